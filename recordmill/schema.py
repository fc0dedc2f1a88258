"""Schemas: MindRecord-style declarations, inference from a first row, and rows -> Arrow batches.

Data flows one way: row dicts are checked against the schema and turned into an Arrow record batch
here, inside the worker that produced them. Every mismatch becomes a :class:`RowError` naming the
row, the field, what was expected and what came.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import yaml

from recordmill.errors import RowError, SchemaError

SCALAR_TYPES: dict[str, pa.DataType] = {
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float16": pa.float16(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
}
ALIASES = {"binary": "bytes", "str": "string", "boolean": "bool", "double": "float64"}
TYPE_NAMES = {t: name for name, t in SCALAR_TYPES.items()}
FIELD_KEYS = {"type", "shape", "nullable"}


# --- declaring ----------------------------------------------------------------------------------


def to_arrow_schema(declared: Mapping[str, Any] | pa.Schema) -> pa.Schema:
    """An Arrow schema from a MindRecord-style dict or a ``pyarrow.Schema``."""
    if isinstance(declared, pa.Schema):
        return declared
    if not isinstance(declared, Mapping) or not declared:
        raise SchemaError(
            f"schema() must return a non-empty dict or a pyarrow.Schema, got {_describe(declared)}"
        )
    return pa.schema([_declared_field(name, spec) for name, spec in declared.items()])


def _declared_field(name: str, spec: Any) -> pa.Field:
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, Mapping) or "type" not in spec:
        raise SchemaError(f"schema field {name!r}: expected a dict with a 'type', got {spec!r}")
    unknown = set(spec) - FIELD_KEYS
    if unknown:
        raise SchemaError(
            f"schema field {name!r}: unknown key(s) {sorted(unknown)} (allowed: {sorted(FIELD_KEYS)})"
        )
    type_name = ALIASES.get(spec["type"], spec["type"])
    if type_name not in SCALAR_TYPES:
        raise SchemaError(
            f"schema field {name!r}: unknown type {spec['type']!r} "
            f"(known: {', '.join(SCALAR_TYPES)})"
        )
    value_type = SCALAR_TYPES[type_name]
    shape = spec.get("shape")
    if shape is not None:
        if (
            not isinstance(shape, Sequence)
            or not shape
            or not all(isinstance(d, int) and (d > 0 or d == -1) for d in shape)
        ):
            raise SchemaError(
                f"schema field {name!r}: shape must be a non-empty list of positive ints or -1, "
                f"got {shape!r}"
            )
        if type_name in ("string", "bytes"):
            raise SchemaError(f"schema field {name!r}: shape needs a numeric or bool type")
        value_type = array_type(value_type, list(shape))
    return pa.field(name, value_type, nullable=bool(spec.get("nullable", False)))


def from_yaml(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """A schema from a YAML file (``label: int32`` or ``feat: {type: float32, shape: [3]}``),
    checked, in the dict form a ``schema()`` hook returns. Read with ``yaml.safe_load``."""
    try:
        with open(path) as f:
            declared = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise SchemaError(f"cannot read schema file {path}: {e}") from e
    if not isinstance(declared, dict) or not declared:
        raise SchemaError(f"schema file {path}: expected a mapping of field names to types")
    specs = {str(k): v if isinstance(v, dict) else {"type": v} for k, v in declared.items()}
    to_arrow_schema(specs)  # report a bad type here, naming the file's field
    return specs


def array_type(value_type: pa.DataType, shape: list[int]) -> pa.DataType:
    """Nested lists, one level per dimension: fixed-size lists for fixed dimensions, lists for -1.

    A fixed shape such as [2, 3] is ``fixed_size_list<fixed_size_list<float32, 3>, 2>`` rather than
    Arrow's ``fixed_shape_tensor`` extension type: every Parquet reader understands it and keeps
    the shape (DuckDB ``FLOAT[3][2]``, Polars ``Array(Float32, shape=(2, 3))``, Hugging Face
    datasets fixed-length sequences), while the extension type breaks Hugging Face's loader.
    """
    for dim in reversed(shape):
        value_type = pa.list_(value_type) if dim == -1 else pa.list_(value_type, dim)
    return value_type


def describe(schema: pa.Schema) -> list[dict[str, Any]]:
    """The schema as readable JSON: ``[{"name", "type", "shape"?, "nullable"}]``."""
    out = []
    for field in schema:
        type_name, shape = _type_and_shape(field.type)
        entry: dict[str, Any] = {"name": field.name, "type": type_name}
        if shape is not None:
            entry["shape"] = shape
        entry["nullable"] = field.nullable
        out.append(entry)
    return out


def _type_and_shape(t: pa.DataType) -> tuple[str, list[int] | None]:
    if isinstance(t, pa.FixedShapeTensorType):
        return TYPE_NAMES.get(t.value_type, str(t.value_type)), list(t.shape)
    shape, t = _nested_shape(t)
    if shape and t in TYPE_NAMES:
        return TYPE_NAMES[t], shape
    if shape:
        return str(t), shape
    return TYPE_NAMES.get(t, str(t)), None


def expected_text(field: pa.Field) -> str:
    type_name, shape = _type_and_shape(field.type)
    return f"{type_name} array of shape {shape}" if shape is not None else type_name


# --- inferring ----------------------------------------------------------------------------------


def infer_schema(row: Any) -> pa.Schema:
    """A schema from one row: int -> int64, float -> float64, str -> string, bytes -> bytes,
    numpy scalars keep their dtype, numpy arrays become fixed-shape tensors, lists of numbers
    variable-length lists. The inferred schema is then enforced on every row."""
    if not isinstance(row, Mapping):
        raise RowError("dict_data() must yield dicts", row=0, got=_describe(row))
    if not row:
        raise RowError("the row has no fields", row=0)
    return pa.schema(
        [pa.field(str(k), _infer_type(str(k), v), nullable=False) for k, v in row.items()]
    )


def _infer_type(name: str, value: Any) -> pa.DataType:
    if isinstance(value, (bool, np.bool_)):
        return pa.bool_()
    if isinstance(value, int):
        return pa.int64()
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, str):
        return pa.string()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return pa.binary()
    if isinstance(value, np.generic) and value.dtype.kind in "iuf":
        return pa.from_numpy_dtype(value.dtype)
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        value_type = pa.from_numpy_dtype(value.dtype)
        if value.ndim == 0:
            return value_type
        return array_type(value_type, list(value.shape))
    if isinstance(value, (list, tuple)):
        arr = np.asarray(value)
        if arr.dtype.kind in "biuf" and arr.ndim >= 1:
            return array_type(pa.from_numpy_dtype(arr.dtype), [-1] * arr.ndim)
    raise RowError(
        "cannot infer the field's type from the first row; declare it in schema()",
        row=0,
        field=name,
        got=_describe(value),
    )


def check_same_schema(schemas: Mapping[int, pa.Schema]) -> pa.Schema:
    """The one schema that all tasks produced (inferred schemas are compared task by task)."""
    items = sorted(schemas.items())
    first_task, first = items[0]
    for task_id, other in items[1:]:
        if other.equals(first):
            continue
        for field in first:
            index = other.get_field_index(field.name)
            if index < 0:
                raise SchemaError(
                    f"task {task_id} has no field {field.name!r}; task {first_task} has it"
                )
            if other.field(index).type != field.type:
                raise SchemaError(
                    f"field {field.name!r} is {expected_text(field)} in task {first_task} but "
                    f"{expected_text(other.field(index))} in task {task_id}; declare a schema() so "
                    "that all values are converted to one type"
                )
        extra = [name for name in other.names if name not in first.names]
        raise SchemaError(f"task {task_id} has field(s) {extra} that task {first_task} has not")
    return first


# --- converting ---------------------------------------------------------------------------------


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
                array = _column(values, field.type)
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
                    "dict_data() must yield dicts", row=first_row + i, got=_describe(row)
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
                _column([value], field.type)
            except _Mismatch as e:
                return RowError(
                    e.reason or "wrong type",
                    row=first_row + i,
                    field=field.name,
                    expected=expected_text(field),
                    got=_describe(value),
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


def _column(values: Sequence[Any], target: pa.DataType) -> pa.Array:
    try:
        if isinstance(target, pa.FixedShapeTensorType):
            return _tensor_column(values, target)
        if pa.types.is_list(target) or pa.types.is_fixed_size_list(target):
            shape, leaf = _nested_shape(target)
            if -1 not in shape:
                return _fixed_column(values, target, shape, leaf)
            return _ragged_column(values, target)
        if target in TYPE_NAMES:
            return _scalar_column(values, target)
        return pa.array(values, type=target)
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
    try:
        array = pa.array(values)
    except OverflowError:
        # Python ints beyond int64 (uint64 values): convert directly, after ruling out floats,
        # which a direct conversion would truncate silently.
        if pa.types.is_integer(target) and all(isinstance(v, (int, np.integer)) for v in values):
            return pa.array(values, type=target)
        raise
    if array.type == target:
        return array
    source, dest = _kind(array.type), _kind(target)
    if source != dest and source != "null" and (source, dest) not in _CASTS:
        raise _Mismatch("wrong type")
    return array.cast(target)  # a safe cast: overflow and fractional parts are errors


def _as_numpy(values: Any, dtype: np.dtype) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype == dtype:
        return array
    if array.dtype.kind not in "biuf" or (array.dtype.kind == "b") != (dtype.kind == "b"):
        raise _Mismatch("wrong type")
    converted = array.astype(dtype)
    if dtype.kind in "iu" and not np.array_equal(converted, array):
        raise _Mismatch("value out of range or not a whole number")
    return converted


def _tensor_column(values: Sequence[Any], target: pa.FixedShapeTensorType) -> pa.Array:
    dtype = target.value_type.to_pandas_dtype()
    shape = tuple(target.shape)
    if not values:
        return pa.ExtensionArray.from_storage(target, pa.array([], type=target.storage_type))
    stacked = np.array(values)
    if stacked.shape != (len(values), *shape):
        raise _Mismatch(f"wrong shape {list(np.shape(values[0]))}")
    stacked = np.ascontiguousarray(_as_numpy(stacked, np.dtype(dtype)))
    return pa.FixedShapeTensorArray.from_numpy_ndarray(stacked)


def _nested_shape(t: pa.DataType) -> tuple[list[int], pa.DataType]:
    """The shape (-1 for variable dimensions) and the value type of nested list types."""
    shape = []
    while pa.types.is_list(t) or pa.types.is_fixed_size_list(t):
        shape.append(t.list_size if pa.types.is_fixed_size_list(t) else -1)
        t = t.value_type
    return shape, t


def _fixed_column(
    values: Sequence[Any], target: pa.DataType, shape: list[int], leaf: pa.DataType
) -> pa.Array:
    """Fixed-shape arrays: one numpy stack, then one fixed-size list level per dimension."""
    stacked = np.array(values) if values else np.empty((0, *shape))
    if stacked.shape != (len(values), *shape):
        raise _Mismatch(f"wrong shape {list(np.shape(values[0]))}")
    child: pa.Array = pa.array(_as_numpy(stacked, np.dtype(leaf.to_pandas_dtype())).ravel())
    for dim in reversed(shape):
        child = pa.FixedSizeListArray.from_arrays(child, dim)
    return child.cast(target) if child.type != target else child


def _ragged_column(values: Sequence[Any], target: pa.DataType) -> pa.Array:
    shape, leaf = _nested_shape(target)
    dtype = np.dtype(leaf.to_pandas_dtype())
    arrays = []
    empty_shape = [0 if d == -1 else d for d in shape]
    for value in values:
        array = np.asarray(value)
        if array.size == 0 and array.ndim != len(shape):
            array = np.empty(empty_shape, dtype=dtype)  # [] for a [-1, 2] field: no pairs
        if array.ndim != len(shape) or any(
            d not in (-1, n) for d, n in zip(shape, array.shape, strict=True)
        ):
            raise _Mismatch(f"wrong shape {list(array.shape)}")
        arrays.append(array)
    flat = (
        _as_numpy(np.concatenate([a.ravel() for a in arrays]), dtype)
        if arrays
        else np.empty(0, dtype)
    )
    child: pa.Array = pa.array(flat)
    for axis in reversed(range(len(shape))):
        if shape[axis] != -1:
            child = pa.FixedSizeListArray.from_arrays(child, shape[axis])
            continue
        lengths = np.concatenate(
            [np.full(math.prod(a.shape[:axis]), a.shape[axis], dtype=np.int64) for a in arrays]
            or [np.empty(0, np.int64)]
        )
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        child = pa.ListArray.from_arrays(pa.array(offsets), child)
    return child.cast(target) if child.type != target else child


def _short(error: Exception) -> str:
    return str(error).splitlines()[0][:200] if str(error) else type(error).__name__


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"numpy array of shape {list(value.shape)} and dtype {value.dtype}"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"
