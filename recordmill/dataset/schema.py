"""Schemas: MindRecord-style declarations, inference from a first row, and how fields are stored.

A field is a scalar, an array or a tensor. Arrays (any shape with a -1, or a fixed shape of at
most :data:`LIST_MAX_ELEMENTS` elements, and arrays of strings or bytes) are nested Arrow lists,
which every tool shows as arrays. Larger fixed shapes of numbers are *tensors*: one
``fixed_size_binary`` value per row holding the array's raw bytes (C order, little-endian), with
its dtype and shape in the field's metadata (``recordmill.tensor``) and, for tools that only see a
file's key-value metadata, in the schema's (``recordmill.tensors``). Parquet stores nested lists
with two levels per element, which makes large arrays 5-25x slower to write and read than their
bytes; a tensor column costs what its bytes cost (``benchmarks/bench_tensors.py``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

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
TEXT_TYPES = ("string", "bytes")
FIELD_KEYS = {"type", "shape", "nullable", "layout"}
LAYOUTS = ("list", "tensor")
# Fixed shapes up to this many elements stay lists (a bbox, a small feature vector): SQL tools show
# them as arrays, and at this size the lists' extra cost is small (see the benchmarks README).
LIST_MAX_ELEMENTS = 16
# pyarrow before 26 cannot read a fixed-size list holding nulls from Parquet (apache/arrow#35692).
_NULLABLE_FIXED_LISTS = int(pa.__version__.split(".")[0]) >= 26
TENSOR_KEY = b"recordmill.tensor"
TENSORS_KEY = b"recordmill.tensors"
# Plain identifiers: SQL without quotes, pandas attributes, Python keywords arguments.
NAME_RULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME_RULE_TEXT = (
    "field names are letters, digits and underscores, not starting with a digit, "
    "and differ in more than upper/lower case"
)


# --- names --------------------------------------------------------------------------------------


def numpy_dtype(t: pa.DataType) -> np.dtype:
    """The numpy dtype of a number or bool type (pyarrow's own ``to_pandas_dtype`` needs
    pandas installed)."""
    name = TYPE_NAMES.get(t)
    if name is None or name in TEXT_TYPES:
        raise TypeError(f"{t} has no numpy dtype")
    return np.dtype(name)


def check_names(names: Sequence[str]) -> None:
    """Refuse names that some tools cannot use as they are (see :data:`NAME_RULE_TEXT`)."""
    seen: dict[str, str] = {}
    for name in names:
        if not isinstance(name, str) or not NAME_RULE.fullmatch(name):
            hint = f" (try {safe_name(name)!r})" if isinstance(name, str) and name else ""
            raise SchemaError(f"field name {name!r} is not allowed{hint}: {NAME_RULE_TEXT}")
        if name.lower() in seen:
            raise SchemaError(
                f"field names {seen[name.lower()]!r} and {name!r} differ only in case, which "
                f"SQL tools do not tell apart: {NAME_RULE_TEXT}"
            )
        seen[name.lower()] = name


def safe_name(name: str) -> str:
    """``name`` made to follow the rule: other characters become ``_`` (``image/encoded`` ->
    ``image_encoded``), and a leading digit gets a ``_`` in front."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", name) or "_"
    return "_" + name if name[0].isdigit() else name


# --- declaring ----------------------------------------------------------------------------------


def to_arrow_schema(declared: Mapping[str, Any] | pa.Schema) -> pa.Schema:
    """An Arrow schema from a MindRecord-style dict or a ``pyarrow.Schema``."""
    if isinstance(declared, pa.Schema):
        return _from_pyarrow(declared)
    if not isinstance(declared, Mapping) or not declared:
        raise SchemaError(
            f"schema() must return a non-empty dict or a pyarrow.Schema, got {describe_value(declared)}"
        )
    check_names(list(declared))
    return with_tensor_index(pa.schema([_declared_field(name, s) for name, s in declared.items()]))


def _from_pyarrow(schema: pa.Schema) -> pa.Schema:
    """A user's Arrow schema, as it is, except that Arrow's ``fixed_shape_tensor`` extension
    type (which some readers cannot load) becomes a tensor field."""
    check_names(schema.names)
    if not any(isinstance(f.type, pa.FixedShapeTensorType) for f in schema) and not any(
        tensor_spec(f) for f in schema
    ):
        return schema
    fields = [
        tensor_field(f.name, numpy_dtype(f.type.value_type), f.type.shape, f.nullable)
        if isinstance(f.type, pa.FixedShapeTensorType)
        else f
        for f in schema
    ]
    return with_tensor_index(pa.schema(fields, metadata=schema.metadata))


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
    shape = spec.get("shape")
    if shape is not None and (
        not isinstance(shape, Sequence)
        or isinstance(shape, str)
        or not shape
        or not all(isinstance(d, int) and (d > 0 or d == -1) for d in shape)
    ):
        raise SchemaError(
            f"schema field {name!r}: shape must be a non-empty list of positive ints or -1, "
            f"got {shape!r}"
        )
    layout = spec.get("layout")
    if layout is not None:
        if layout not in LAYOUTS:
            raise SchemaError(
                f"schema field {name!r}: layout must be one of {', '.join(LAYOUTS)}, got {layout!r}"
            )
        if shape is None:
            raise SchemaError(f"schema field {name!r}: a layout needs a shape")
        if layout == "tensor" and (-1 in shape or type_name in TEXT_TYPES):
            raise SchemaError(
                f"schema field {name!r}: the tensor layout needs a fixed shape of numbers or bools"
            )
    nullable = bool(spec.get("nullable", False))
    return field_for(name, SCALAR_TYPES[type_name], shape, nullable, layout)


def field_for(
    name: str,
    value_type: pa.DataType,
    shape: Sequence[int] | None,
    nullable: bool,
    layout: str | None = None,
) -> pa.Field:
    """The field of a value type and shape: a scalar, a list array or a tensor (``layout``
    None picks by the rule in this module's docstring)."""
    if shape is None:
        return pa.field(name, value_type, nullable=nullable)
    text = value_type in (pa.string(), pa.binary())
    if layout is None:
        # A nullable fixed shape is a tensor even when small: see _NULLABLE_FIXED_LISTS.
        small = math.prod(shape) <= LIST_MAX_ELEMENTS and not nullable
        layout = "list" if -1 in shape or small or text else "tensor"
    if layout == "tensor":
        return tensor_field(name, numpy_dtype(value_type), shape, nullable)
    if nullable and shape[0] != -1 and not _NULLABLE_FIXED_LISTS:
        raise SchemaError(
            f"schema field {name!r}: a nullable array whose first dimension is fixed is a "
            f"fixed-size list, which pyarrow {pa.__version__} cannot read back from Parquet once "
            "it holds a null (apache/arrow#35692, fixed in pyarrow 26); "
            + ("use a -1 first dimension" if text else 'use "layout": "tensor"')
            + " or pyarrow 26 or newer"
        )
    return pa.field(name, list_type(value_type, list(shape)), nullable=nullable)


def tensor_field(name: str, dtype: np.dtype, shape: Sequence[int], nullable: bool) -> pa.Field:
    shape = [int(d) for d in shape]
    info = {"dtype": dtype.name, "shape": shape}
    return pa.field(
        name,
        pa.binary(dtype.itemsize * math.prod(shape)),
        nullable=nullable,
        metadata={TENSOR_KEY: json.dumps(info).encode()},
    )


def tensor_spec(field: pa.Field) -> tuple[np.dtype, tuple[int, ...]] | None:
    """The dtype and shape of a tensor field; None for every other field."""
    if not pa.types.is_fixed_size_binary(field.type) or not field.metadata:
        return None
    text = field.metadata.get(TENSOR_KEY)
    if text is None:
        return None
    info = json.loads(text)
    return np.dtype(info["dtype"]).newbyteorder("<"), tuple(info["shape"])


def with_tensor_index(schema: pa.Schema) -> pa.Schema:
    """The schema with its tensors' dtypes and shapes also in its own metadata, which Parquet
    keeps as the file's key-value metadata (DuckDB ``parquet_kv_metadata``, Polars
    ``read_parquet_metadata``)."""
    index = {f.name: json.loads(f.metadata[TENSOR_KEY]) for f in schema if tensor_spec(f)}
    metadata = {k: v for k, v in (schema.metadata or {}).items() if k != TENSORS_KEY}
    if index:
        metadata[TENSORS_KEY] = json.dumps(index).encode()
    return schema.with_metadata(metadata) if metadata else schema.remove_metadata()


def from_yaml(
    path: str | os.PathLike[str], rename: Callable[[str], str] | None = None
) -> dict[str, dict[str, Any]]:
    """A schema from a YAML file (``label: int32`` or ``feat: {type: float32, shape: [3]}``),
    checked, in the dict form a ``schema()`` hook returns. Read with ``yaml.safe_load``.
    ``rename`` maps the file's names to field names (a plugin's rule, such as :func:`safe_name`)."""
    import yaml  # only for a schema file: every write imports this module

    try:
        with open(path) as f:
            declared = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise SchemaError(f"cannot read schema file {path}: {e}") from e
    if not isinstance(declared, dict) or not declared:
        raise SchemaError(f"schema file {path}: expected a mapping of field names to types")
    rename = rename or str
    specs = {rename(str(k)): v if isinstance(v, dict) else {"type": v} for k, v in declared.items()}
    if len(specs) != len(declared):
        raise SchemaError(f"schema file {path}: two names become the same field name")
    try:
        to_arrow_schema(specs)
    except SchemaError as e:
        raise SchemaError(f"schema file {path}: {e}") from e
    return specs


def list_type(value_type: pa.DataType, shape: list[int]) -> pa.DataType:
    """Nested lists, one level per dimension: fixed-size lists for fixed dimensions, lists for
    -1 (DuckDB ``FLOAT[3][2]``, Polars ``Array(Float32, shape=(2, 3))``, Hugging Face sequences)."""
    for dim in reversed(shape):
        value_type = pa.list_(value_type) if dim == -1 else pa.list_(value_type, dim)
    return value_type


def nested_shape(t: pa.DataType) -> tuple[list[int], pa.DataType]:
    """The shape (-1 for variable dimensions) and the value type of nested list types."""
    shape = []
    while pa.types.is_list(t) or pa.types.is_fixed_size_list(t):
        shape.append(t.list_size if pa.types.is_fixed_size_list(t) else -1)
        t = t.value_type
    return shape, t


# --- describing ---------------------------------------------------------------------------------


def describe(schema: pa.Schema) -> list[dict[str, Any]]:
    """The schema as readable JSON: ``[{"name", "type", "shape"?, "layout"?, "nullable"}]``."""
    out = []
    for field in schema:
        type_name, shape, layout = type_shape_layout(field)
        entry: dict[str, Any] = {"name": field.name, "type": type_name}
        if shape is not None:
            entry["shape"] = shape
            entry["layout"] = layout
        entry["nullable"] = field.nullable
        out.append(entry)
    return out


def type_shape_layout(field: pa.Field) -> tuple[str, list[int] | None, str | None]:
    """A field as recordmill's type name, shape (None for scalars) and layout."""
    spec = tensor_spec(field)
    if spec is not None:
        return spec[0].name, list(spec[1]), "tensor"
    shape, t = nested_shape(field.type)
    if shape:
        return TYPE_NAMES.get(t, str(t)), shape, "list"
    return TYPE_NAMES.get(t, str(t)), None, None


def expected_text(field: pa.Field) -> str:
    type_name, shape, layout = type_shape_layout(field)
    if shape is None:
        return type_name
    return f"{type_name} {'tensor' if layout == 'tensor' else 'array'} of shape {shape}"


# --- inferring ----------------------------------------------------------------------------------


def infer_schema(row: Any, later: Sequence[Any] = ()) -> pa.Schema:
    """A schema from the first row: int -> int64, float -> float64, str -> string, bytes ->
    bytes, numpy scalars keep their dtype, numpy arrays keep their shape (a tensor when large),
    lists of numbers, strings or bytes become variable-length arrays. An empty list says
    nothing of its elements: the first non-empty value of the field in ``later`` rows does. It
    is then enforced on every row."""
    if not isinstance(row, Mapping):
        raise RowError("dict_data() must yield dicts", row=0, got=describe_value(row))
    if not row:
        raise RowError("the row has no fields", row=0)
    check_names([str(k) for k in row])
    fields = [_infer_field(str(k), _telling(k, v, later)) for k, v in row.items()]
    return with_tensor_index(pa.schema(fields))


def _telling(name: Any, value: Any, later: Sequence[Any]) -> Any:
    """``value``, or where it is an empty list, the field's first non-empty list in ``later``."""
    if not isinstance(value, (list, tuple)) or len(value):
        return value
    for row in later:
        other = row.get(name) if isinstance(row, Mapping) else None
        if isinstance(other, (list, tuple, np.ndarray)) and len(other):
            return list(other)  # of variable length, as the empty one says: not a tensor
    raise RowError(
        f"every value seen is an empty list ({len(later) + 1} rows); declare its element type "
        "in schema()",
        row=0,
        field=str(name),
    )


def _infer_field(name: str, value: Any) -> pa.Field:
    if isinstance(value, (bool, np.bool_)):
        return pa.field(name, pa.bool_(), nullable=False)
    if isinstance(value, int):
        return pa.field(name, pa.int64(), nullable=False)
    if isinstance(value, float):
        return pa.field(name, pa.float64(), nullable=False)
    if isinstance(value, str):
        return pa.field(name, pa.string(), nullable=False)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return pa.field(name, pa.binary(), nullable=False)
    if isinstance(value, np.generic) and value.dtype.kind in "iuf":
        return pa.field(name, pa.from_numpy_dtype(value.dtype), nullable=False)
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        value_type = pa.from_numpy_dtype(value.dtype)
        shape = list(value.shape) if value.ndim else None
        return field_for(name, value_type, shape, nullable=False)
    if isinstance(value, (list, tuple, np.ndarray)):
        text = _text_type(value)
        if text is not None:
            return field_for(name, text[0], [-1] * text[1], nullable=False)
        try:
            arr = np.asarray(value)
        except ValueError:  # ragged nesting: no one shape
            arr = np.asarray(None)
        if arr.dtype.kind in "biuf" and arr.ndim >= 1:
            return field_for(name, pa.from_numpy_dtype(arr.dtype), [-1] * arr.ndim, False)
    raise RowError(
        "cannot infer the field's type from the first row; declare it in schema()",
        row=0,
        field=name,
        got=describe_value(value),
    )


def _text_type(value: Any) -> tuple[pa.DataType, int] | None:
    """(string or binary, depth) for (nested) lists or numpy arrays of str or of bytes."""
    if isinstance(value, np.ndarray):
        kinds = {"U": pa.string(), "S": pa.binary()}
        return (kinds[value.dtype.kind], value.ndim) if value.dtype.kind in kinds else None
    depth = 0
    while isinstance(value, (list, tuple)) and value:
        depth, value = depth + 1, value[0]
    if isinstance(value, str):
        return pa.string(), depth
    if isinstance(value, (bytes, bytearray)):
        return pa.binary(), depth
    return None


def first_difference(
    reference: pa.Schema, other: pa.Schema
) -> tuple[pa.Field, pa.Field | None] | None:
    """The first field of ``reference`` that ``other`` lacks (paired with None) or holds
    otherwise (paired with its own); None when every field of ``reference`` is there as it is."""
    for field in reference:
        index = other.get_field_index(field.name)
        if index < 0:
            return field, None
        if not other.field(index).equals(field, check_metadata=True):
            return field, other.field(index)
    return None


def check_same_schema(schemas: Mapping[int, pa.Schema]) -> pa.Schema:
    """The one schema that all tasks produced (inferred schemas are compared task by task)."""
    items = sorted(schemas.items())
    first_task, first = items[0]
    for task_id, other in items[1:]:
        if other.equals(first, check_metadata=True):
            continue
        differs = first_difference(first, other)
        if differs is not None:
            field, found = differs
            if found is None:
                raise SchemaError(
                    f"task {task_id} has no field {field.name!r}; task {first_task} has it"
                )
            raise SchemaError(
                f"field {field.name!r} is {expected_text(field)} in task {first_task} but "
                f"{expected_text(found)} in task {task_id}; declare a schema() so "
                "that all values are converted to one type"
            )
        extra = [name for name in other.names if name not in first.names]
        raise SchemaError(f"task {task_id} has field(s) {extra} that task {first_task} has not")
    return first


def describe_value(value: Any) -> str:
    """A value as error messages show it: its type and a short repr."""
    if isinstance(value, np.ndarray):
        return f"numpy array of shape {list(value.shape)} and dtype {value.dtype}"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"
