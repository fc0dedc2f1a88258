"""Arrow columns as the values a training loop uses: numpy arrays, Python scalars, bytes.

``to_numpy`` turns a whole column into one value per row (one array for fixed shapes);
``row_getter`` makes the function that fetches a single row's value, used by ``ds[i]`` where the
cost of each call matters (a few microseconds, not a column conversion).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from recordmill.dataset.schema import nested_shape, numpy_dtype, tensor_spec

RowGetter = Callable[[pa.Array, int], Any]


def to_numpy(column: pa.Array | pa.ChunkedArray, field: pa.Field | None = None) -> Any:
    """A column as numpy where that fits: numbers -> an array; tensors and small fixed-shape
    arrays -> one array of shape (rows, *shape), a view of the column's memory for tensors;
    variable-length arrays -> a list of arrays, each with the field's number of dimensions;
    strings, bytes and arrays of them -> lists. Give the ``field`` (it holds a tensor's dtype and
    shape) wherever the column may be a tensor; null rows are None."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    t = column.type
    spec = tensor_spec(field) if field is not None else None
    if spec is not None:
        return _tensors(column, *spec)
    shape, leaf = nested_shape(t)
    numeric = pa.types.is_integer(leaf) or pa.types.is_floating(leaf) or pa.types.is_boolean(leaf)
    if shape and numeric and -1 not in shape and not column.null_count:
        # Fixed shape all the way down: one (rows, *shape) array, no per-row work.
        flat = column
        for _ in shape:
            flat = flat.flatten()
        return _numbers(flat).reshape(len(column), *shape)
    if shape and numeric:
        return _arrays(column, shape, numpy_dtype(leaf))
    if not shape and numeric and not column.null_count:
        return _numbers(column)
    return column.to_pylist()


def _numbers(column: pa.Array) -> np.ndarray:
    """A column of numbers without nulls as numpy: a view of its bytes where it can be (pyarrow's
    ``to_numpy`` would import pandas when it is installed, 0.2 s in each new process)."""
    t = column.type
    if pa.types.is_boolean(t) or column.null_count:
        return column.to_numpy(zero_copy_only=False)
    dtype = numpy_dtype(t)
    return np.frombuffer(
        column.buffers()[1], dtype=dtype, count=len(column), offset=column.offset * dtype.itemsize
    )


# Floats narrower than Python's come back as numpy scalars of their own type, which print as
# the value stored and keep their dtype through a DataLoader's collate.
_NARROW_FLOATS = {pa.float32(): np.float32, pa.float16(): np.float16}


def row_values(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The rows of a batch as dicts: scalars as Python values, arrays as numpy."""
    return rows_of(batch.schema, batch.columns, batch.num_rows)


def rows_of(schema: pa.Schema, columns: list[Any], rows: int) -> list[dict[str, Any]]:
    """``row_values`` of a schema's columns: Arrow arrays, or lists of the values already made."""
    values = [
        c if isinstance(c, list) else column_values(c, f)
        for c, f in zip(columns, schema, strict=True)
    ]
    if not values:
        return [{} for _ in range(rows)]
    names = schema.names
    return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]


def column_values(column: pa.Array, field: pa.Field) -> Any:
    """A column's values as ``row_values`` puts them in its rows, indexed by row."""
    values = to_numpy(column, field)
    narrow = _NARROW_FLOATS.get(column.type)
    if narrow is not None:  # float32 as itself: 17.99, not 17.989999771118164
        return [None if v is None else narrow(v) for v in values]
    if isinstance(values, np.ndarray) and values.ndim == 1:
        return values.tolist()
    return values


def row_getter(field: pa.Field) -> RowGetter:
    """``get(column, i)``: row ``i``'s value of a column of ``field``, as ``row_values`` gives it."""
    t = field.type
    spec = tensor_spec(field)
    if spec is not None:
        return _tensor_getter(*spec, t.byte_width)
    plain = (
        pa.types.is_integer(t)
        or t in (pa.float32(), pa.float64(), pa.bool_())
        or pa.types.is_string(t)
        or pa.types.is_binary(t)
    )
    narrow = _NARROW_FLOATS.get(t)
    if narrow is not None:
        return lambda column, i: None if (v := column[i].as_py()) is None else narrow(v)
    if plain:
        return lambda column, i: column[i].as_py()
    return lambda column, i: row_values(
        pa.RecordBatch.from_arrays([column.slice(i, 1)], schema=pa.schema([field]))
    )[0][field.name]


def _tensor_getter(dtype: np.dtype, shape: tuple[int, ...], width: int) -> RowGetter:
    count = math.prod(shape)

    def get(column: pa.Array, i: int) -> Any:
        if column.null_count and not column[i].is_valid:
            return None
        array = np.frombuffer(
            column.buffers()[1], dtype=dtype, count=count, offset=(column.offset + i) * width
        ).reshape(shape)
        array.flags.writeable = False  # a view of decoded (cached) or memory-mapped bytes
        return array

    return get


def _tensors(column: pa.Array, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
    """Tensor rows as one (rows, *shape) array over the column's own bytes (or, with nulls, a
    list holding None for the null rows)."""
    if not len(column):
        return np.empty((0, *shape), dtype)
    width = column.type.byte_width
    array = np.frombuffer(
        column.buffers()[1],
        dtype=dtype,
        count=len(column) * math.prod(shape),
        offset=column.offset * width,
    ).reshape(len(column), *shape)
    array.flags.writeable = False  # a view of decoded (cached) or memory-mapped bytes
    if not column.null_count:
        return array
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    return [array[i] if ok else None for i, ok in enumerate(valid)]


def _arrays(column: pa.Array, shape: list[int], dtype: np.dtype) -> list[Any]:
    """Arrays of a shape with variable dimensions (or with nulls), one per row, each with the
    declared number of dimensions even when empty."""
    if shape[0] == -1 and -1 not in shape[1:] and pa.types.is_list(column.type):
        # The usual [-1] or [-1, 4]: views of one array of all values, cut at the offsets.
        offsets = column.offsets.to_numpy()
        values = column.values
        for _ in shape[1:]:
            values = values.flatten()
        flat = values.to_numpy(zero_copy_only=False).reshape(-1, *shape[1:])
        flat.flags.writeable = False  # views of it may share the decoded (cached) bytes
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        return [flat[offsets[i] : offsets[i + 1]] if ok else None for i, ok in enumerate(valid)]
    empty = [0 if d == -1 else d for d in shape]
    out = []
    for value in column.to_pylist():
        if value is None:
            out.append(None)
            continue
        array = np.asarray(value, dtype=dtype)
        out.append(array.reshape(empty) if array.ndim != len(shape) and not array.size else array)
    return out
