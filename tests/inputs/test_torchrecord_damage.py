"""TorchRecord databases (LMDB, values of caffe2 TensorProtos) whose second record is damaged in
each way the reader names, converted with the torchrecord plugin in this process: one line
naming the database, the key and the damage. The first record is intact (the schema is taken
from it); a damaged first record is named as the one the schema comes from."""

from __future__ import annotations

import struct

import pytest

import recordmill
from recordmill.errors import SKIP_HINT
from recordmill.inputs import torchrecord as tr

lmdb = pytest.importorskip("lmdb", reason='pip install "recordmill[torchrecord]"')


def varint(n: int) -> bytes:
    return tr.encode_varint(n)


def field(number: int, payload: bytes) -> bytes:
    return tr.message(number, payload)


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


IMAGE = tr.encode_tensor(bytes(range(6)), tr.BYTE, dims=[2, 1])  # 2 x 1 RGB pixels
LABEL = tr.encode_tensor(b"3")


def record(*tensors: bytes) -> bytes:
    return b"".join(field(1, t) for t in tensors)


GOOD = record(IMAGE, LABEL)


def database(tmp_path, values) -> str:
    folder = tmp_path / "db"
    env = lmdb.open(str(folder), map_size=1 << 20)
    with env.begin(write=True) as txn:
        for k, value in enumerate(values):
            txn.put(str(k).encode(), value)
    env.close()
    return str(folder)


def refused(tmp_path, path) -> str:
    out = tmp_path / "out"
    with pytest.raises(recordmill.RecordmillError) as caught:
        recordmill.write("torchrecord", out, options={"input": path}, workers=0, progress=False)
    assert not out.exists()
    text = str(caught.value)
    assert "\n" not in text
    return text.removesuffix(f" {SKIP_HINT}")


def tensor(*parts: bytes) -> bytes:
    return b"".join(parts)


DATA_TYPE = key(2, 0)
DAMAGES = {
    "three tensors": (record(IMAGE, LABEL, LABEL), "it holds 3 tensors, not TorchRecord's two"),
    "image type": (
        record(tr.encode_tensor(b"\0" * 6, 1, dims=[2, 1]), LABEL),
        "the image tensor is FLOAT, not BYTE",
    ),
    "image dims": (
        record(tr.encode_tensor(bytes(6), tr.BYTE, dims=[6]), LABEL),
        "the image tensor has dims [6], not [width, height]",
    ),
    "image bytes": (
        record(tr.encode_tensor(bytes(6), tr.BYTE, dims=[2, 2]), LABEL),
        "the image tensor of dims [width 2, height 2] holds 6 bytes, not 12 (RGB)",
    ),
    "label text": (
        record(IMAGE, tr.encode_tensor(b"\xff")),
        "the label tensor holds b'\\xff', which is not text",
    ),
    "label strings": (
        record(IMAGE, tensor(DATA_TYPE + varint(4), field(6, b"a"), field(6, b"b"))),
        "the label tensor holds 2 strings, not one",
    ),
    "label type": (
        record(IMAGE, tensor(DATA_TYPE + varint(99))),
        "a tensor of data_type 99, which caffe2 does not define",
    ),
    "label range": (
        record(IMAGE, tensor(DATA_TYPE + varint(7), key(4, 0) + varint(300))),
        "a INT8 tensor holds a value out of its range",
    ),
    "label count": (
        record(IMAGE, tensor(key(1, 0) + varint(2), DATA_TYPE + varint(2), key(4, 0) + varint(1))),
        "a INT32 tensor of dims [2] holds 1 values, not 2",
    ),
    "int32": (
        record(IMAGE, tensor(DATA_TYPE + varint(2), key(4, 0) + varint(1 << 40))),
        "an int32 value 1099511627776 out of range",
    ),
    "dims wire": (record(IMAGE, key(1, 5) + bytes(4)), "field 1 (dims) has wire type 5"),
    "floats": (record(IMAGE, field(3, bytes(3))), "field 3 (float_data) holds 3 bytes"),
    "declared": (
        record(IMAGE, key(5, 0) + varint(1)),
        "field 5 has wire type 0, not its declared one",
    ),
    "protos": (key(1, 0) + varint(1), "field 1 (protos) has wire type 0, not a message"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_record_is_named(tmp_path, damage):
    value, line = DAMAGES[damage]
    path = database(tmp_path, [GOOD, value])
    text = refused(tmp_path, path)
    assert f"{path}: key '1' (record 1): {line}" in text, text


def test_a_damaged_first_record_is_named_as_the_schemas(tmp_path):
    path = database(tmp_path, [record(IMAGE), GOOD])
    assert refused(tmp_path, path).endswith(
        f"{path}: key '0' (record 0): it holds 1 tensors, not TorchRecord's two (the image, the "
        "label); the schema is taken from it"
    )


def test_an_input_without_records_or_databases_is_named(tmp_path):
    path = database(tmp_path, [])
    assert refused(tmp_path, path).endswith(
        f"--input {path} holds no records to take the schema from"
    )
    (tmp_path / "empty").mkdir()
    assert refused(tmp_path, str(tmp_path / "empty")).endswith(
        f"--input {tmp_path / 'empty'} is not an LMDB database (no data.mdb) and holds none "
        "(db0/, db1/...)"
    )
    (tmp_path / "file").write_text("x")
    assert refused(tmp_path, str(tmp_path / "file")).endswith(
        f"--input {tmp_path / 'file'} is not a folder"
    )


def test_a_database_whose_pages_are_damaged_is_named(tmp_path):
    path = database(tmp_path, [GOOD] * 300)  # pages of keys under a branch page
    data = tmp_path / "db" / "data.mdb"
    env = lmdb.open(path, readonly=True, lock=False)
    size = env.stat()["psize"]
    env.close()
    damaged = bytearray(data.read_bytes())
    damaged[2 * size : 2 * size + 16] = b"\xff" * 16  # page 2's header
    data.write_bytes(bytes(damaged))
    assert refused(tmp_path, path).endswith(
        f"{path}: cannot list its keys: LMDB says mdb_cursor_get: MDB_CORRUPTED: Located page was "
        "wrong type"
    )


def test_a_key_that_lmdb_lists_but_cannot_get_is_named(tmp_path):
    """A leaf page whose node of key b"1" has lost its key size: LMDB lists the key (as b""),
    then refuses to get it."""
    path = database(tmp_path, [GOOD, GOOD])
    data = tmp_path / "db" / "data.mdb"
    damaged = bytearray(data.read_bytes())
    node = struct.pack("<IHH", len(GOOD), 0, 1) + b"1"  # its data size, flags, key size, key
    assert damaged.count(node) == 1
    at = damaged.index(node)
    damaged[at + 6 : at + 8] = bytes(2)  # the key size: 0
    data.write_bytes(bytes(damaged))
    assert refused(tmp_path, path) == (
        f"task 0 failed: {path}: key b'': LMDB says mdb_get: MDB_BAD_VALSIZE: Unsupported size "
        "of key/DB name/data, or wrong DUPFIXED size at row 1"
    )
