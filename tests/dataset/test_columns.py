"""dataset/columns.py: Arrow columns as the values a training loop gets, a whole column at once
(``to_numpy``, ``row_values``) or one row at a time (``row_getter``, what ``ds[i]`` uses). Every
column here is sliced as well, since a batch is a slice of a group: its offset must be kept."""

from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa
import pytest

from recordmill.dataset.columns import column_values, row_getter, row_values, rows_of, to_numpy
from recordmill.dataset.schema import tensor_field


def tensor_column(arrays: list, dtype: str, shape: tuple[int, ...]) -> tuple[pa.Array, pa.Field]:
    """A tensor column (fixed-size binary, little-endian) of ``arrays``, None a null row."""
    field = tensor_field("t", np.dtype(dtype), shape, nullable=True)
    little = np.dtype(dtype).newbyteorder("<")
    values = [None if a is None else np.asarray(a, little).tobytes() for a in arrays]
    return pa.array(values, type=field.type), field


def same(got, expected) -> None:
    """Values equal, arrays with their dtype and shape, None where None."""
    if expected is None:
        assert got is None
    elif isinstance(expected, np.ndarray):
        assert isinstance(got, np.ndarray), type(got)
        assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
        np.testing.assert_array_equal(got, expected)
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), got
        for g, e in zip(got, expected, strict=True):
            same(g, e)
    else:
        assert type(got) is type(expected) and got == expected, (got, expected)


TENSORS = [np.arange(6, dtype=np.int16).reshape(2, 3) * (i + 1) - i for i in range(5)]


def test_tensors_are_one_read_only_view_of_the_columns_bytes_from_its_offset():
    column, field = tensor_column(TENSORS, "int16", (2, 3))
    got = to_numpy(column.slice(1, 3), field)
    same(got, np.stack(TENSORS[1:4]))
    assert not got.flags.writeable and not got.flags.owndata
    assert np.shares_memory(got, np.frombuffer(column.buffers()[1], np.uint8))


def test_tensors_with_null_rows_are_a_list_with_none_for_them():
    rows = [TENSORS[0], None, TENSORS[2], None, TENSORS[4]]
    column, field = tensor_column(rows, "float32", (2, 3))
    expected = [None if r is None else r.astype(np.float32) for r in rows]
    same(to_numpy(column, field), expected)
    same(to_numpy(column.slice(1, 3), field), expected[1:4])


def test_an_empty_tensor_column_keeps_its_shape_and_dtype():
    column, field = tensor_column([], "uint8", (4, 5))
    same(to_numpy(column, field), np.empty((0, 4, 5), np.uint8))


def test_a_tensor_column_given_without_its_field_is_bytes():
    column, _ = tensor_column(TENSORS[:2], "int16", (2, 3))
    assert to_numpy(column) == [t.astype("<i2").tobytes() for t in TENSORS[:2]]


@pytest.mark.parametrize(
    "dtype", ["int8", "uint8", "int32", "uint64", "float16", "float32", "float64"]
)
def test_numbers_without_nulls_are_a_view_from_the_columns_offset(dtype):
    column = pa.array(np.arange(10).astype(dtype), type=pa.from_numpy_dtype(np.dtype(dtype)))
    got = to_numpy(column.slice(3, 4))
    same(got, np.arange(3, 7).astype(dtype))
    assert not got.flags.owndata


def test_bools_are_an_array_and_numbers_with_nulls_a_list():
    same(to_numpy(pa.array([True, False, True]).slice(1)), np.array([False, True]))
    same(to_numpy(pa.array([1, None, 3], pa.int32()).slice(1)), [None, 3])


def test_a_fixed_shape_all_the_way_down_is_one_array():
    type_ = pa.list_(pa.list_(pa.uint8(), 3), 2)
    rows = [[[i, i + 1, i + 2], [i + 3, i + 4, i + 5]] for i in range(0, 40, 10)]
    got = to_numpy(pa.array(rows, type_).slice(1, 2))
    same(got, np.array(rows[1:3], np.uint8))


def test_a_fixed_shape_with_null_rows_is_one_array_a_row():
    rows = [[1, 2, 3], None, [4, 5, 6]]
    got = to_numpy(pa.array(rows, pa.list_(pa.int32(), 3)))
    same(got, [np.array([1, 2, 3], np.int32), None, np.array([4, 5, 6], np.int32)])


def test_variable_lengths_are_arrays_cut_at_the_offsets_each_with_its_dimensions():
    rows = [[1.5], [], None, [2.5, 3.5, 4.5], [5.5, 6.5]]
    column = pa.array(rows, pa.list_(pa.float32()))
    expected = [None if r is None else np.array(r, np.float32) for r in rows]
    same(to_numpy(column), expected)
    same(to_numpy(column.slice(1, 4)), expected[1:5])
    same(to_numpy(column.slice(3)), expected[3:])


def test_variable_rows_of_pairs_keep_their_pairs_even_when_empty():
    rows = [[[1, 2]], [], [[3, 4], [5, 6]], None]
    column = pa.array(rows, pa.list_(pa.list_(pa.int16(), 2)))
    expected = [np.array([[1, 2]], np.int16), np.empty((0, 2), np.int16)]
    expected += [np.array([[3, 4], [5, 6]], np.int16), None]
    same(to_numpy(column), expected)
    same(to_numpy(column.slice(2)), expected[2:])


def test_other_shapes_are_one_array_a_row_an_empty_one_with_every_dimension():
    type_ = pa.list_(pa.list_(pa.int64()))  # [-1, -1]
    got = to_numpy(pa.array([[[1, 2], [3, 4]], [], None, [[]]], type_).slice(1))
    same(got, [np.empty((0, 0), np.int64), None, np.empty((1, 0), np.int64)])
    fixed_outer = pa.array([[[1], [2]], [[3, 4], [5, 6]]], pa.list_(pa.list_(pa.int64()), 2))
    same(to_numpy(fixed_outer.slice(1)), [np.array([[3, 4], [5, 6]])])


def test_text_bytes_and_lists_of_them_are_lists():
    same(to_numpy(pa.array(["a", None, "ccc"]).slice(1)), [None, "ccc"])
    same(to_numpy(pa.array([b"\x00", b"xy"])), [b"\x00", b"xy"])
    same(to_numpy(pa.array([["a"], [], ["b", "c"]])), [["a"], [], ["b", "c"]])


def test_a_chunked_column_is_what_its_chunks_joined_give():
    chunked = pa.chunked_array([pa.array([[1], [2, 3]]), pa.array([[], [4]])])
    same(to_numpy(chunked), to_numpy(chunked.combine_chunks()))
    assert [a.tolist() for a in to_numpy(chunked)] == [[1], [2, 3], [], [4]]


def test_column_values_are_python_numbers_and_narrow_floats_their_own_type():
    same(column_values(pa.array([1, 2], pa.int64()), pa.field("x", pa.int64())), [1, 2])
    f32 = pa.array([17.99, None], pa.float32())
    got = column_values(f32, pa.field("x", pa.float32()))
    assert type(got[0]) is np.float32 and got[0] == np.float32(17.99) and got[1] is None
    f16 = column_values(pa.array([np.float16(0.5)], pa.float16()), pa.field("x", pa.float16()))
    assert type(f16[0]) is np.float16
    column, field = tensor_column(TENSORS[:2], "int16", (2, 3))
    same(column_values(column, field), np.stack(TENSORS[:2]))


def test_rows_take_lists_already_made_and_refuse_columns_of_other_lengths():
    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    rows = rows_of(schema, [pa.array([1, 2]), ["x", "y"]], 2)
    assert rows == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    assert rows_of(pa.schema([]), [], 3) == [{}, {}, {}]
    with pytest.raises(ValueError):
        rows_of(schema, [pa.array([1, 2]), ["x"]], 2)
    with pytest.raises(ValueError):
        rows_of(schema, [pa.array([1, 2])], 2)


def kinds() -> list[tuple[pa.Array, pa.Field]]:
    """A column of each kind a dataset holds, with null and empty rows where the kind has them."""
    columns = [
        (pa.array([1, None, 3, 4], pa.int64()), None),
        (pa.array([0.25, 1.5, None, 2.0], pa.float32()), None),
        (pa.array([*np.array([0.5, 1.0, 2.0], np.float16), None], pa.float16()), None),
        (pa.array([1.0, 2.0, 3.0, 4.0]), None),
        (pa.array([True, None, False, True]), None),
        (pa.array(["a", "bb", None, ""]), None),
        (pa.array(["a", "bb", None, ""], pa.large_string()), None),
        (pa.array([b"a", None, b"\x00", b""]), None),
        (pa.array([[1.5], [], None, [2.5, 3.5]], pa.list_(pa.float32())), None),
        (pa.array([[[1, 2]], [], None, [[3, 4]]], pa.list_(pa.list_(pa.int16(), 2))), None),
        (pa.array([["a"], [], None, ["b", "c"]]), None),
        (pa.array([datetime.date(2026, 1, d) for d in range(1, 5)]), None),
        tensor_column([TENSORS[0], None, TENSORS[2], TENSORS[3]], "int16", (2, 3)),
    ]
    return [(c, f if f is not None else pa.field("x", c.type)) for c, f in columns]


@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize(("column", "field"), kinds(), ids=lambda v: str(getattr(v, "type", "")))
def test_a_row_by_itself_is_that_row_of_the_whole_column(column, field, offset):
    column = column.slice(offset)
    batch = pa.RecordBatch.from_arrays([column], schema=pa.schema([field]))
    whole = [row[field.name] for row in row_values(batch)]
    get = row_getter(field)
    assert len(whole) == len(column)
    for i, value in enumerate(whole):
        same(get(column, i), value)


def test_a_tensor_row_is_a_read_only_view_of_the_column():
    column, field = tensor_column(TENSORS, "int16", (2, 3))
    got = row_getter(field)(column.slice(2), 1)
    same(got, TENSORS[3])
    assert not got.flags.writeable
    assert np.shares_memory(got, np.frombuffer(column.buffers()[1], np.uint8))
