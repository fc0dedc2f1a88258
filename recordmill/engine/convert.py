"""Rows -> Arrow record batches of one schema, checked value by value.

Data flows one way: row dicts are checked against the schema and turned into an Arrow record
batch here, inside the worker that produced them. Values are converted to a field's type only when
nothing is lost; every mismatch becomes a :class:`RowError` naming the row, the field, what was
expected and what came.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np
import pyarrow as pa

from recordmill.dataset.schema import (
    TYPE_NAMES,
    describe_value,
    expected_text,
    nested_shape,
    numpy_dtype,
    tensor_spec,
)
from recordmill.engine.plain import numpy_array, plain_array
from recordmill.errors import RowError

_DTYPE = attrgetter("dtype")


class RowConverter:
    """Turns lists of row dicts into record batches of one schema."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.names = schema.names
        self._keys = frozenset(self.names)
        self._getters = [itemgetter(name) for name in self.names]

    def to_batch(self, rows: list[Any], first_row: int = 0) -> pa.RecordBatch:
        """Convert ``rows``; errors name the row as ``first_row`` + its index in ``rows``."""
        try:
            # Same length and every schema key present means exactly the schema's keys.
            if rows and set(map(len, rows)) != {len(self.names)}:
                raise KeyError
            columns = [list(map(getter, rows)) for getter in self._getters]
        except (KeyError, TypeError, IndexError):
            raise self._bad_row(rows, first_row) from None
        arrays = []
        for field, values in zip(self.schema, columns, strict=True):
            try:
                array = column(values, field)
            except _Mismatch:
                raise self._diagnose(field, values, first_row) from None
            if array.null_count and not field.nullable:
                row = first_row + array.is_null().to_pylist().index(True)
                raise RowError(
                    'value is None; declare the field with "nullable": true to allow it',
                    row=row,
                    field=field.name,
                    expected=expected_text(field),
                    got="None",
                )
            arrays.append(array)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _bad_row(self, rows: list[Any], first_row: int) -> RowError:
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping):
                return RowError(
                    "dict_data() must yield dicts", row=first_row + i, got=describe_value(row)
                )
            missing = sorted(self._keys - set(row.keys()))
            unknown = sorted(str(k) for k in set(row.keys()) - self._keys)
            if missing:
                field = self.schema.field(missing[0])
                instead = f" (the row has unknown field(s) {unknown} instead)" if unknown else ""
                return RowError(
                    "missing field" + instead,
                    row=first_row + i,
                    field=field.name,
                    expected=expected_text(field),
                )
            if unknown:
                return RowError(
                    f"unknown field (the schema has {', '.join(self.names)})",
                    row=first_row + i,
                    field=unknown[0],
                )
        return RowError("rows do not match the schema", row=first_row)

    def _diagnose(self, field: pa.Field, values: Sequence[Any], first_row: int) -> RowError:
        for i, value in enumerate(values):
            try:
                column([value], field)
            except _Mismatch as e:
                return RowError(
                    e.reason or "wrong type",
                    row=first_row + i,
                    field=field.name,
                    expected=expected_text(field),
                    got=describe_value(value),
                )
        return RowError(
            "values cannot be combined into one column",
            row=first_row,
            field=field.name,
            expected=expected_text(field),
            got=", ".join(sorted({type(v).__name__ for v in values})),
        )


class _Mismatch(Exception):
    def __init__(self, reason: str = ""):
        super().__init__(reason)
        self.reason = reason


def column(values: Sequence[Any], field: pa.Field) -> pa.Array:
    """One field's values as an Arrow array of its type (None is null)."""
    try:
        spec = tensor_spec(field)
        if spec is not None:
            return _tensor_column(values, field.type, *spec)
        t = field.type
        if pa.types.is_list(t) or pa.types.is_fixed_size_list(t):
            shape, leaf = nested_shape(t)
            if leaf in (pa.string(), pa.binary()):
                return _text_column(values, t, len(shape))
            if -1 not in shape:
                return _fixed_column(values, t, shape, leaf)
            return _ragged_column(values, t, shape, leaf)
        if t in TYPE_NAMES:
            return _scalar_column(values, t)
        return pa.array(values, type=t)
    except (
        pa.ArrowInvalid,
        pa.ArrowTypeError,
        pa.ArrowNotImplementedError,
        TypeError,
        ValueError,
        OverflowError,
    ) as e:
        raise _Mismatch(_short(e)) from e


def _kind(t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "text"
    if pa.types.is_null(t):
        return "null"
    return "other"


_CASTS = {("int", "float"), ("float", "int")}


def _scalar_column(values: Sequence[Any], target: pa.DataType) -> pa.Array:
    numbers = pa.types.is_integer(target) or pa.types.is_floating(target)
    try:
        array = plain_array(values)
        if array is None:
            array = pa.array(values)
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
        # Python ints beyond int64 (uint64 values, or 2**63 for a float), or ints beside
        # floats that Arrow will not combine: one by one.
        if numbers:
            return _one_by_one(values, target)
        raise
    if numbers and pa.types.is_integer(array.type) and np.float16 in set(map(type, values)):
        # pyarrow reads numpy float16 scalars as integers (1.5 -> 1): each value on its own.
        return _one_by_one(values, target)
    if array.type == target:
        return array
    source, dest = _kind(array.type), _kind(target)
    if source != dest and source != "null" and (source, dest) not in _CASTS:
        raise _Mismatch("wrong type")
    if source == dest == "int" and not array.null_count:
        return _narrowed(_values_of(array), target)
    if source == "float" and numbers and any(_is_int(v) for v in values):
        # Ints among floats: Arrow made them all floats, which may have rounded a large one.
        return _one_by_one(values, target)
    if dest == "float" and source != "null":
        # Arrow's safe cast lets a float overflow to inf and refuses exact large integers;
        # numpy with explicit checks does what the README promises.
        nulls, source_values = None, _values_of(array)
        if array.null_count:
            nulls = _nulls_of(array)
            source_values = np.where(nulls, 0, source_values)
        converted = _as_numpy(source_values, numpy_dtype(target))
        return numpy_array(converted, None if nulls is None else ~nulls)
    return array.cast(target)  # a safe cast: overflow and fractional parts are errors


def _narrowed(ints: np.ndarray, target: pa.DataType) -> pa.Array:
    """Integers as the integer type ``target``, each checked to fit (as Arrow's safe cast would,
    without importing pyarrow.compute, which a worker would import for it alone)."""
    dtype = numpy_dtype(target)
    bounds = np.iinfo(dtype)
    if len(ints) and (ints.min() < bounds.min or ints.max() > bounds.max):
        raise _Mismatch(
            f"value out of range for {dtype.name}: it holds {bounds.min} to {bounds.max}"
        )
    return numpy_array(ints.astype(dtype))


def _values_of(array: pa.Array) -> np.ndarray:
    """A number array's values as a numpy view of its buffer (``Array.to_numpy`` would import
    pandas: see plain.py)."""
    dtype = numpy_dtype(array.type)
    return np.frombuffer(array.buffers()[1], dtype, len(array), array.offset * dtype.itemsize)


def _nulls_of(array: pa.Array) -> np.ndarray:
    """Where an array is null, from its validity bitmap (``is_null().to_numpy()`` would import
    pandas)."""
    bits = np.unpackbits(np.frombuffer(array.buffers()[0], np.uint8), bitorder="little")
    return ~bits[array.offset : array.offset + len(array)].astype(bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _one_by_one(values: Sequence[Any], target: pa.DataType) -> pa.Array:
    """Scalars converted each on its own (None is null), so that no value is rounded on the
    way by a type chosen for all of them."""
    dtype = numpy_dtype(target)
    converted = np.zeros(len(values), dtype)
    for i, value in enumerate(values):
        if value is not None:
            converted[i] = _as_numpy(np.asarray(value), dtype)
    nulls = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    return numpy_array(converted, ~nulls if nulls.any() else None)


def _row_array(value: Any, dtype: np.dtype) -> np.ndarray:
    """One row's array as ``dtype``, converted on its own: numpy never picks a type for several
    rows together, nor rounds an int that a list mixes with floats."""
    array = np.asarray(value)
    if array.dtype.kind == "f" and not isinstance(value, np.ndarray) and array.size:
        objects = np.asarray(value, dtype=object)
        if any(_is_int(v) for v in objects.flat):
            converted = np.empty(objects.shape, dtype)
            for index, item in np.ndenumerate(objects):
                converted[index] = _as_numpy(np.asarray(item), dtype)
            return converted
    if not array.size and array.dtype.kind in "biufO":
        return np.empty(array.shape, dtype)  # [] has no values to lose
    return _as_numpy(array, dtype)


def _as_numpy(values: Any, dtype: np.dtype) -> np.ndarray:
    """``values`` as an array of ``dtype``, refusing anything the conversion would change."""
    array = np.asarray(values)
    if array.dtype == dtype:
        return array
    if array.dtype.kind not in "biuf" or (array.dtype.kind == "b") != (dtype.kind == "b"):
        raise _Mismatch("wrong type")
    with np.errstate(all="ignore"):
        converted = array.astype(dtype)
        if dtype.kind in "iu" and not np.array_equal(converted, array):
            raise _Mismatch("value out of range or not a whole number")
        if dtype.kind == "f" and array.dtype.kind in "iu":
            exact = np.isfinite(converted).all() and np.array_equal(
                converted.astype(array.dtype), array
            )
            if not exact:
                raise _Mismatch(f"an integer that {dtype.name} cannot hold exactly")
        overflow = dtype.kind == "f" and array.dtype.kind == "f"
        if overflow and (np.isinf(converted) & np.isfinite(array)).any():
            raise _Mismatch(f"value out of range for {dtype.name} (it would become inf)")
    return converted


def _split_nulls(values: Sequence[Any]) -> tuple[list[Any], np.ndarray | None]:
    """The values that are not None, and a mask of the None rows (None when there are none)."""
    if not any(map(operator.is_, values, repeat(None))):
        return list(values), None
    mask = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    return [v for v in values if v is not None], mask


def _stack(values: list[Any], shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """Same-shape arrays (or nested lists) as one C-ordered array of (rows, *shape)."""
    if not values:
        return np.empty((0, *shape), dtype)
    if set(map(type, values)) == {np.ndarray} and len(set(map(_DTYPE, values))) == 1:
        # Arrays of one dtype: one copy, then one checked conversion, as numpy needs no common
        # type for them (the usual case, and by far the fastest).
        stacked = np.array(values)
        if stacked.shape != (len(values), *shape):
            raise _Mismatch(f"wrong shape {list(stacked.shape[1:])}")
        return _as_numpy(stacked, dtype)
    rows = [_row_array(v, dtype) for v in values]
    for row in rows:
        if row.shape != tuple(shape):
            raise _Mismatch(f"wrong shape {list(row.shape)}")
    return np.stack(rows)


def _with_nulls(present: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Rows of zeros where ``mask`` is set, so that every row keeps its place."""
    if mask is None:
        return present
    full = np.zeros((len(mask), *present.shape[1:]), present.dtype)
    full[~mask] = present
    return full


def _tensor_column(
    values: Sequence[Any], target: pa.DataType, dtype: np.dtype, shape: tuple[int, ...]
) -> pa.Array:
    """Tensors: the stacked arrays' bytes, one fixed-size value per row, without a copy."""
    present, mask = _split_nulls(values)
    stacked = _with_nulls(_stack(present, shape, dtype), mask)
    validity = None if mask is None else pa.py_buffer(np.packbits(~mask, bitorder="little"))
    data = pa.py_buffer(stacked.reshape(-1).view(np.uint8)) if stacked.size else pa.py_buffer(b"")
    return pa.Array.from_buffers(
        target, len(values), [validity, data], null_count=0 if mask is None else int(mask.sum())
    )


def _fixed_column(
    values: Sequence[Any], target: pa.DataType, shape: list[int], leaf: pa.DataType
) -> pa.Array:
    """Small fixed-shape arrays: one numpy stack, then one fixed-size list level per dimension."""
    present, mask = _split_nulls(values)
    stacked = _with_nulls(_stack(present, shape, numpy_dtype(leaf)), mask)
    child = numpy_array(stacked.ravel())
    for level, dim in enumerate(reversed(shape)):
        outer = mask is not None and level == len(shape) - 1
        child = pa.FixedSizeListArray.from_arrays(
            child, dim, mask=numpy_array(mask) if outer else None
        )
    return child.cast(target) if child.type != target else child


def _ragged_column(
    values: Sequence[Any], target: pa.DataType, shape: list[int], leaf: pa.DataType
) -> pa.Array:
    """Arrays with variable dimensions: their values concatenated, then one level of lists per
    dimension (fixed-size lists for fixed dimensions), offsets from each array's shape."""
    dtype = numpy_dtype(leaf)
    mask = _split_nulls(values)[1]
    empty = np.empty([0 if d == -1 else d for d in shape], dtype=dtype)
    arrays = []
    for value in values:
        if value is None:
            arrays.append(empty)
            continue
        if isinstance(value, (str, bytes)) or np.asarray(value).dtype.kind in "USV":
            raise _Mismatch("wrong type")
        array = _row_array(value, dtype)
        if array.size == 0 and array.ndim != len(shape):
            array = empty  # [] for a [-1, 2] field: no pairs
        if array.ndim != len(shape) or any(
            d not in (-1, n) for d, n in zip(shape, array.shape, strict=True)
        ):
            raise _Mismatch(f"wrong shape {list(array.shape)}")
        arrays.append(array)
    flat = np.concatenate([a.ravel() for a in arrays]) if arrays else np.empty(0, dtype)
    child = numpy_array(flat)
    for axis in reversed(range(len(shape))):
        outer = mask is not None and axis == 0
        if shape[axis] != -1:
            child = pa.FixedSizeListArray.from_arrays(
                child, shape[axis], mask=numpy_array(mask) if outer else None
            )
            continue
        lengths = np.concatenate(
            [np.full(math.prod(a.shape[:axis]), a.shape[axis], dtype=np.int64) for a in arrays]
            or [np.empty(0, np.int64)]
        )
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        child = pa.ListArray.from_arrays(
            numpy_array(offsets), child, mask=numpy_array(mask) if outer else None
        )
    return child.cast(target) if child.type != target else child


def _text_column(values: Sequence[Any], target: pa.DataType, depth: int) -> pa.Array:
    """Arrays of strings or bytes: Python lists (or numpy string arrays) of str or bytes, which
    are converted as for a scalar field (UTF-8 between the two)."""
    kind = (str, bytes, bytearray, memoryview)
    return pa.array(
        [None if v is None else _text_lists(v, depth, kind) for v in values], type=target
    )


def _text_lists(value: Any, depth: int, kind: Any) -> list[Any]:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise _Mismatch(f"expected a list, got {type(value).__name__}")
    if depth > 1:
        return [_text_lists(v, depth - 1, kind) for v in value]
    for v in value:
        if not isinstance(v, kind):
            raise _Mismatch(f"wrong type {type(v).__name__} in the list")
    return list(value)


def _short(error: Exception) -> str:
    return str(error).splitlines()[0][:200] if str(error) else type(error).__name__
