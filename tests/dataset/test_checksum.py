"""dataset/checksum.py against its definitions: CRC-32C's check value and continuation, and a
column's CRC-32 over every buffer, length and null count of it and of every array nested in it."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pyarrow as pa

from recordmill.dataset import checksum


def test_crc32c_is_the_castagnoli_crc_and_continues_a_value():
    assert checksum.crc32c(b"123456789") == 0xE3069283
    assert checksum.crc32c(b"") == 0
    whole = checksum.crc32c(b"hello world")
    assert checksum.crc32c(b" world", checksum.crc32c(b"hello")) == whole
    assert checksum.crc32c(memoryview(b"hello world")) == whole
    assert checksum.crc32c(pa.py_buffer(b"hello world")) == whole


def _by_definition(array: pa.Array) -> int:
    """zlib's CRC-32 over the array's buffers, then each nested array's length and null count."""
    crc = 0
    for buffer in array.buffers():
        if buffer is not None:
            crc = zlib.crc32(buffer, crc)
    parts = [array]
    t = array.type
    if pa.types.is_struct(t):
        parts += [array.field(i) for i in range(t.num_fields)]
    elif pa.types.is_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_large_list(t):
        parts.append(array.values)
    elif pa.types.is_map(t):
        parts += [array.keys, array.items]
    for part in parts:
        crc = zlib.crc32(struct.pack("<qq", len(part), part.null_count), crc)
    return crc


ARRAYS = {
    "int64": pa.array([1, 2, None, 4]),
    "string": pa.array(["a", "bc", None]),
    "list": pa.array([[1, 2], None, [3]], pa.list_(pa.int32())),
    "large list": pa.array([[1.5], []], pa.large_list(pa.float64())),
    "fixed list": pa.array([[1, 2], [3, 4]], pa.list_(pa.int8(), 2)),
    "struct": pa.array([{"x": 1, "y": "a"}, {"x": None, "y": "b"}]),
    "map": pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64())),
}


def test_a_columns_crc32_covers_its_buffers_and_each_nested_arrays_length_and_nulls():
    for name, array in ARRAYS.items():
        assert checksum.column_crc32(array) == _by_definition(array), name


def test_an_extension_columns_crc32_covers_its_storage_too():
    storage = pa.array([[1, 2], [3, 4]], pa.list_(pa.int8(), 2))
    tensor = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.int8(), [2]), storage)
    nested = [tensor, storage, storage.values]
    expected = 0
    for buffer in tensor.buffers():
        if buffer is not None:
            expected = zlib.crc32(buffer, expected)
    for part in nested:
        expected = zlib.crc32(struct.pack("<qq", len(part), part.null_count), expected)
    assert checksum.column_crc32(tensor) == expected


def test_a_change_to_any_part_of_a_column_changes_its_crc32():
    base = checksum.column_crc32(pa.array([[1, 2], [3]], pa.list_(pa.int32())))
    others = [
        pa.array([[1, 2], [4]], pa.list_(pa.int32())),  # a value
        pa.array([[1], [2, 3]], pa.list_(pa.int32())),  # the offsets
        pa.array([[1, 2], None], pa.list_(pa.int32())),  # a null
        pa.array([[1, 2], [None]], pa.list_(pa.int32())),  # a nested null
    ]
    assert all(checksum.column_crc32(a) != base for a in others)


def test_batch_crc32_is_that_of_the_batch_as_an_ipc_file_gives_it_back():
    batch = pa.record_batch(
        {"a": pa.array(np.arange(10)), "s": pa.array([str(i) for i in range(10)])}
    )
    piece = batch.slice(3, 4)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(piece)
    read = pa.ipc.open_file(sink.getvalue()).get_batch(0)
    expected = [checksum.column_crc32(c) for c in read.columns]
    assert checksum.batch_crc32(piece) == expected
    # the slice's own buffers are the whole batch's, its offsets not rebased: other sums
    assert expected != [checksum.column_crc32(c) for c in piece.columns]
