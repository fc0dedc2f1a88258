"""Schema declarations, inference, and the conversion of rows into Arrow batches."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from recordmill.dataset import schema as schema_mod
from recordmill.dataset.schema import (
    LIST_MAX_ELEMENTS,
    describe,
    infer_schema,
    tensor_spec,
    to_arrow_schema,
)
from recordmill.engine.convert import RowConverter
from recordmill.errors import RowError, SchemaError
from recordmill.read.dataset import to_numpy

SCALARS = {
    "bool": (True, pa.bool_()),
    "int8": (-128, pa.int8()),
    "int16": (32767, pa.int16()),
    "int32": (-(2**31), pa.int32()),
    "int64": (2**62, pa.int64()),
    "uint8": (255, pa.uint8()),
    "uint16": (65535, pa.uint16()),
    "uint32": (2**32 - 1, pa.uint32()),
    "uint64": (2**64 - 1, pa.uint64()),
    "float16": (0.5, pa.float16()),
    "float32": (1.25, pa.float32()),
    "float64": (1e300, pa.float64()),
    "string": ("héllo", pa.string()),
    "bytes": (b"\x00\xff", pa.binary()),
}


def convert(declared, rows):
    return RowConverter(to_arrow_schema(declared)).to_batch(rows)


@pytest.mark.parametrize("name", sorted(SCALARS))
def test_every_scalar_type_round_trips(name):
    value, arrow_type = SCALARS[name]
    batch = convert({"x": {"type": name}}, [{"x": value}, {"x": value}])
    assert batch.schema.field("x").type == arrow_type
    assert batch.column(0).to_pylist() == [value, value]
    assert describe(batch.schema) == [{"name": "x", "type": name, "nullable": False}]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("int32", np.int64(7)),
        ("uint8", np.uint8(200)),
        ("float32", np.float64(0.25)),
        ("float16", np.float16(1.5)),
        ("int64", 3.0),  # a whole float is accepted for an int field
        ("float32", 3),
        ("bool", np.bool_(False)),
        ("string", b"bytes that are utf-8"),
        ("bytes", "text becomes utf-8 bytes"),
    ],
)
def test_numpy_scalars_and_lossless_values_are_accepted(name, value):
    batch = convert({"x": {"type": name}}, [{"x": value}])
    expected = value.item() if isinstance(value, np.generic) else value
    got = batch.column(0).to_pylist()[0]
    if isinstance(expected, str) and name == "bytes":
        expected = expected.encode()
    if isinstance(expected, bytes) and name == "string":
        expected = expected.decode()
    assert got == expected


@pytest.mark.parametrize(
    ("name", "value", "got"),
    [
        ("int32", 1.5, "float 1.5"),
        ("int32", "7", "str '7'"),
        ("int32", True, "bool True"),
        ("uint8", 256, "int 256"),
        ("uint8", -1, "int -1"),
        ("int8", np.int64(1000), "int64 np.int64(1000)"),
        ("bool", 1, "int 1"),
        ("string", 5, "int 5"),
        ("string", b"\xff", "bytes b'\\xff'"),
        ("float32", "1.0", "str '1.0'"),
        ("bytes", 3, "int 3"),
    ],
)
def test_wrong_values_name_row_field_expected_and_got(name, value, got):
    rows = [{"x": SCALARS[name][0]}] * 3 + [{"x": value}]
    with pytest.raises(RowError) as info:
        convert({"x": {"type": name}}, rows)
    error = info.value
    assert (error.row, error.field, error.expected) == (3, "x", name)
    assert error.got.startswith(got.split(" ")[0])
    assert f"expected {name}" in str(error) and "row 3" in str(error)


def test_missing_and_unknown_fields():
    declared = {"a": {"type": "int32"}, "b": {"type": "string"}}
    with pytest.raises(RowError, match=r"row 1, field 'b': missing field; expected string"):
        convert(declared, [{"a": 1, "b": "x"}, {"a": 2}])
    with pytest.raises(RowError, match=r"row 0, field 'c': unknown field"):
        convert(declared, [{"a": 1, "b": "x", "c": 0}])
    with pytest.raises(
        RowError,
        match=r"row 2, field 'b': missing field \(the row has unknown field\(s\) \['c'\] instead\)",
    ):
        convert(declared, [{"a": 1, "b": "x"}, {"a": 1, "b": "x"}, {"a": 1, "c": "x"}])


@pytest.mark.parametrize("row", [[1, "x"], "ab", 7, None])
def test_rows_that_are_not_dicts(row):
    with pytest.raises(RowError, match=r"row 1: dict_data\(\) must yield dicts"):
        convert({"a": {"type": "int32"}, "b": {"type": "string"}}, [{"a": 1, "b": "x"}, row])


def test_none_needs_nullable():
    with pytest.raises(RowError, match=r"row 1, field 'x': value is None.*nullable"):
        convert({"x": {"type": "int32"}}, [{"x": 1}, {"x": None}])
    batch = convert({"x": {"type": "int32", "nullable": True}}, [{"x": 1}, {"x": None}])
    assert batch.column(0).to_pylist() == [1, None]


def test_fixed_shape_tensor():
    declared = {"img": {"type": "uint8", "shape": [2, 2, 3]}}
    values = [np.full((2, 2, 3), i, dtype=np.int64) for i in range(3)]
    batch = convert(declared, [{"img": v} for v in values])
    column = batch.column(0)
    assert column.type == pa.list_(pa.list_(pa.list_(pa.uint8(), 3), 2), 2)
    array = to_numpy(column)
    assert array.dtype == np.uint8 and array.shape == (3, 2, 2, 3)
    assert (array[2] == 2).all()
    nested = convert({"v": {"type": "float32", "shape": [3]}}, [{"v": [1, 2, 3]}])
    assert to_numpy(nested.column(0)).tolist() == [[1.0, 2.0, 3.0]]


def test_fixed_shape_tensor_errors():
    declared = {"img": {"type": "uint8", "shape": [4]}}
    good = np.zeros(4, dtype=np.uint8)
    with pytest.raises(
        RowError,
        match=r"row 1, field 'img': wrong shape \[5\]; expected uint8 array of shape \[4\]",
    ):
        convert(declared, [{"img": good}, {"img": np.zeros(5)}])
    with pytest.raises(
        RowError, match=r"row 0, field 'img': value out of range.*shape \[4\] and dtype int64"
    ):
        convert(declared, [{"img": np.array([0, 1, 2, 300])}])
    with pytest.raises(
        RowError, match=r"row 0, field 'img': value out of range or not a whole number"
    ):
        convert(declared, [{"img": np.array([0.5, 1, 2, 3])}])
    with pytest.raises(RowError, match=r"row 0, field 'img'"):
        convert(declared, [{"img": "abcd"}])


def test_variable_length_arrays():
    declared = {
        "mask": {"type": "uint8", "shape": [-1]},
        "boxes": {"type": "float32", "shape": [-1, 4]},
    }
    rows = [
        {"mask": np.array([1, 0, 1]), "boxes": np.ones((2, 4))},
        {"mask": [], "boxes": []},
        {"mask": [7], "boxes": [[1, 2, 3, 4]]},
    ]
    batch = convert(declared, rows)
    assert batch.column(0).to_pylist() == [[1, 0, 1], [], [7]]
    assert batch.column(1).to_pylist() == [[[1.0] * 4] * 2, [], [[1.0, 2.0, 3.0, 4.0]]]
    assert describe(batch.schema)[1] == {
        "name": "boxes",
        "type": "float32",
        "shape": [-1, 4],
        "layout": "list",
        "nullable": False,
    }
    with pytest.raises(RowError, match=r"row 1, field 'boxes': wrong shape \[2, 3\]"):
        convert(declared, [rows[0], {"mask": [1], "boxes": np.ones((2, 3))}])
    with pytest.raises(RowError, match=r"row 0, field 'mask': value out of range"):
        convert(declared, [{"mask": [1, 256], "boxes": []}])


def test_inner_variable_dimension():
    batch = convert(
        {"m": {"type": "int32", "shape": [2, -1]}},
        [{"m": np.arange(6).reshape(2, 3)}, {"m": np.zeros((2, 1))}],
    )
    assert batch.column(0).to_pylist() == [[[0, 1, 2], [3, 4, 5]], [[0], [0]]]


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ({"x": {"type": "int"}}, r"unknown type 'int' \(known: bool, int8"),
        ({"x": {"type": "int32", "shap": [2]}}, r"unknown key\(s\) \['shap'\]"),
        ({"x": {"type": "int32", "shape": [0]}}, r"shape must be a non-empty list"),
        ({"x": {"type": "int32", "shape": []}}, r"shape must be a non-empty list"),
        ({"x": {"type": "string", "shape": [4, 8], "layout": "tensor"}}, r"tensor layout needs"),
        ({"x": {"type": "int8", "shape": [-1], "layout": "tensor"}}, r"tensor layout needs"),
        ({"x": {"type": "int8", "layout": "list"}}, r"a layout needs a shape"),
        ({"x": {"type": "int8", "shape": [2], "layout": "flat"}}, r"layout must be one of"),
        ({"a.b": "int8"}, r"field name 'a.b' is not allowed \(try 'a_b'\): field names are"),
        ({"x": {"shape": [2]}}, r"expected a dict with a 'type'"),
        ({}, r"non-empty dict or a pyarrow.Schema"),
        ([("x", "int32")], r"non-empty dict or a pyarrow.Schema"),
    ],
)
def test_bad_declarations(declared, message):
    with pytest.raises(SchemaError, match=message):
        to_arrow_schema(declared)


def test_type_aliases_and_short_form():
    schema = to_arrow_schema({"a": "int32", "b": {"type": "binary"}, "c": {"type": "str"}})
    assert schema.types == [pa.int32(), pa.binary(), pa.string()]


def test_a_pyarrow_schema_is_used_as_is():
    schema = pa.schema([pa.field("when", pa.timestamp("s")), pa.field("n", pa.int16())])
    assert to_arrow_schema(schema) is schema
    batch = RowConverter(schema).to_batch([{"when": 0, "n": 3}])
    assert batch.column(1).to_pylist() == [3]
    with pytest.raises(RowError, match=r"row 0, field 'when'"):
        RowConverter(schema).to_batch([{"when": "yesterday", "n": 3}])


def test_inference_rejects_what_it_cannot_type():
    with pytest.raises(RowError, match=r"field 'x': cannot infer.*got NoneType None"):
        infer_schema({"x": None})
    with pytest.raises(RowError, match=r"field 'x': cannot infer"):
        infer_schema({"x": {"nested": 1}})
    with pytest.raises(RowError, match=r"field 'x': cannot infer.*got list \[\[1, 2\], \[3\]\]"):
        infer_schema({"x": [[1, 2], [3]]})
    with pytest.raises(RowError, match=r"dict_data\(\) must yield dicts"):
        infer_schema(("a", 1))


def test_schema_from_yaml(tmp_path):
    from recordmill.dataset.schema import from_yaml

    path = tmp_path / "s.yaml"
    path.write_text("label: int32\nfeat: {type: float32, shape: [3]}\n")
    assert from_yaml(path) == {
        "label": {"type": "int32"},
        "feat": {"type": "float32", "shape": [3]},
    }
    path.write_text("label: integer\n")
    with pytest.raises(SchemaError, match=r"schema field 'label': unknown type 'integer'"):
        from_yaml(path)
    path.write_text("- a\n- b\n")
    with pytest.raises(SchemaError, match=r"s.yaml: expected a mapping"):
        from_yaml(path)


def test_a_pyarrow_schema_with_the_tensor_extension_type_becomes_a_tensor():
    schema = to_arrow_schema(
        pa.schema([pa.field("t", pa.fixed_shape_tensor(pa.float32(), [2, 2]))])
    )
    batch = RowConverter(schema).to_batch([{"t": np.eye(2)}, {"t": np.ones((2, 2))}])
    assert batch.column(0).type == pa.binary(16)
    field = batch.schema.field(0)
    assert to_numpy(batch.column(0), field).tolist() == [[[1, 0], [0, 1]], [[1, 1], [1, 1]]]
    assert describe(schema) == [
        {"name": "t", "type": "float32", "shape": [2, 2], "layout": "tensor", "nullable": True}
    ]
    with pytest.raises(RowError, match=r"row 0, field 't': wrong shape \[3\]"):
        RowConverter(schema).to_batch([{"t": np.zeros(3)}])


def test_large_fixed_shapes_are_tensors_of_raw_bytes():
    schema = to_arrow_schema({"img": {"type": "uint8", "shape": [4, 4, 3]}})
    field = schema.field("img")
    assert field.type == pa.binary(48)
    assert tensor_spec(field) == (np.dtype(np.uint8), (4, 4, 3))
    assert (
        b'"img": {"dtype": "uint8", "shape": [4, 4, 3]}' in schema.metadata[b"recordmill.tensors"]
    )
    images = [np.random.default_rng(i).integers(0, 255, (4, 4, 3)) for i in range(3)]
    batch = RowConverter(schema).to_batch([{"img": im} for im in images])
    array = to_numpy(batch.column(0), field)
    assert array.shape == (3, 4, 4, 3) and array.dtype == np.uint8
    assert (array == np.stack(images)).all()
    assert batch.column(0)[1].as_py() == images[1].astype(np.uint8).tobytes()
    assert to_numpy(batch.column(0).slice(1, 2), field).tolist() == np.stack(images)[1:].tolist()
    with pytest.raises(
        RowError, match=r"row 1, field 'img': wrong shape \[4, 3\]; expected uint8 tensor of shape"
    ):
        RowConverter(schema).to_batch([{"img": images[0]}, {"img": np.zeros((4, 3))}])


def test_the_layout_rule_and_its_override():
    small = [LIST_MAX_ELEMENTS]
    declared = {
        "small": {"type": "float32", "shape": small},
        "large": {"type": "float32", "shape": [LIST_MAX_ELEMENTS + 1]},
        "as_list": {"type": "float32", "shape": [64], "layout": "list"},
        "as_tensor": {"type": "float32", "shape": [2], "layout": "tensor"},
    }
    layouts = [(f["name"], f["layout"]) for f in describe(to_arrow_schema(declared))]
    assert layouts == [
        ("small", "list"),
        ("large", "tensor"),
        ("as_list", "list"),
        ("as_tensor", "tensor"),
    ]
    inferred = infer_schema({"a": np.zeros((8, 8)), "b": np.zeros(3), "c": [1, 2]})
    assert [f["layout"] for f in describe(inferred)] == ["tensor", "list", "list"]


@pytest.mark.parametrize(
    ("spec", "value"),
    [
        ({"type": "float32", "shape": [2]}, [1.0, 2.0]),  # nullable: a tensor
        ({"type": "float32", "shape": [4, 8]}, np.ones((4, 8))),
        ({"type": "int32", "shape": [-1]}, [1, 2, 3]),
        ({"type": "uint8", "shape": [-1, 2]}, np.zeros((3, 2))),
        ({"type": "string", "shape": [-1]}, ["a", "b"]),
        ({"type": "bytes", "shape": [-1]}, [b"\x00", b""]),
    ],
)
def test_nullable_arrays_take_none(spec, value):
    declared = {"x": {**spec, "nullable": True}}
    batch = convert(declared, [{"x": value}, {"x": None}, {"x": value}])
    field = batch.schema.field(0)
    assert batch.column(0).is_null().to_pylist() == [False, True, False]
    values = to_numpy(batch.column(0), field)
    assert values[1] is None
    assert np.asarray(values[2]).tolist() == np.asarray(value).tolist()
    with pytest.raises(RowError, match=r"row 1, field 'x': value is None"):
        convert({"x": spec}, [{"x": value}, {"x": None}])


def test_lists_of_strings_and_bytes():
    declared = {"tags": {"type": "string", "shape": [-1]}, "blobs": {"type": "bytes", "shape": [2]}}
    rows = [
        {"tags": ["cat", "black"], "blobs": [b"\x00\x01", b""]},
        {"tags": np.array(["dog"]), "blobs": (b"a", b"b\x00")},
        {"tags": [], "blobs": [b"", b""]},
    ]
    batch = convert(declared, rows)
    assert batch.schema.field("tags").type == pa.list_(pa.string())
    assert batch.column(0).to_pylist() == [["cat", "black"], ["dog"], []]
    assert batch.column(1).to_pylist() == [[b"\x00\x01", b""], [b"a", b"b\x00"], [b"", b""]]
    with pytest.raises(RowError, match=r"field 'tags': expected a list, got str"):
        convert(declared, [{**rows[0], "tags": "cat"}])
    with pytest.raises(RowError, match=r"field 'tags': wrong type int in the list"):
        convert(declared, [{**rows[0], "tags": ["cat", 3]}])
    with pytest.raises(RowError, match=r"field 'blobs'"):
        convert(declared, [{**rows[0], "blobs": [b"a"]}])
    inferred = infer_schema({"tags": ["a"], "blobs": [b"a"], "grid": [["a", "b"]]})
    assert inferred.types == [
        pa.list_(pa.string()),
        pa.list_(pa.binary()),
        pa.list_(pa.list_(pa.string())),
    ]


@pytest.mark.parametrize(
    ("spec", "empty"),
    [
        ({"type": "uint8", "shape": [-1, 2]}, np.zeros((0, 2))),
        ({"type": "float32", "shape": [-1]}, []),
        ({"type": "int32", "shape": [-1, -1]}, np.zeros((0, 0))),
        ({"type": "int32", "shape": [2, -1]}, np.zeros((2, 0))),
    ],
)
def test_empty_arrays_keep_their_shape(spec, empty):
    batch = convert({"x": spec}, [{"x": empty}, {"x": empty}])
    values = to_numpy(batch.column(0), batch.schema.field(0))
    shape = tuple(0 if d == -1 else d for d in spec["shape"])
    assert [v.shape for v in values] == [shape, shape]


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("float32", 1e300, "value out of range for float32"),
        ("float16", 1e6, "value out of range for float16"),
        ("float32", 2**24 + 1, "an integer that float32 cannot hold exactly"),
        ("float64", 2**53 + 1, "an integer that float64 cannot hold exactly"),
        ("float16", 70000, "an integer that float16 cannot hold exactly"),
    ],
)
def test_values_that_would_change_in_a_float_field_are_refused(name, value, reason):
    with pytest.raises(RowError, match=rf"row 1, field 'x': {reason}.*expected {name}"):
        convert({"x": {"type": name}}, [{"x": 1}, {"x": value}])
    with pytest.raises(RowError, match=rf"row 0, field 'x': {reason}"):
        convert({"x": {"type": name, "shape": [-1]}}, [{"x": [1, value]}])
    big = convert({"x": {"type": "float32"}}, [{"x": 2**25}, {"x": float("inf")}, {"x": 0.1}])
    assert big.column(0).to_pylist()[:2] == [2**25, float("inf")]


@pytest.mark.parametrize(
    "names", [[""], ["a b"], ["a.b"], ["1st"], ["é"], ["label", "Label"], ["image/encoded"]]
)
def test_field_names_follow_one_rule(names):
    with pytest.raises(SchemaError, match=r"field names are letters, digits and underscores"):
        to_arrow_schema({n: "int32" for n in names})
    with pytest.raises(SchemaError, match=r"field names are letters"):
        infer_schema({n: 1 for n in names})
    with pytest.raises(SchemaError, match=r"field names are letters"):
        to_arrow_schema(pa.schema([pa.field(n, pa.int32()) for n in names]))
    assert to_arrow_schema({"_ok_2": "int32", "Label": "int8"}).names == ["_ok_2", "Label"]


@pytest.mark.parametrize(
    ("spec", "values"),
    [
        ({"type": "int64", "shape": [-1]}, [[2**62 + 1], []]),
        ({"type": "uint64", "shape": [-1]}, [[2**63 + 1], [1]]),
        ({"type": "uint64", "shape": [-1]}, [[2**64 - 1], [1]]),
        ({"type": "int64", "shape": [4]}, [[2**62 + 1, 1, 1, 1], [1.0] * 4]),
        ({"type": "uint64", "shape": [20]}, [[2**63 + 1] * 20, [1] * 20]),
        ({"type": "bool", "shape": [-1]}, [[True], []]),
        ({"type": "uint64"}, [2**64 - 1, 1.0]),
        ({"type": "int64"}, [2**62 + 1, 1.0]),
        ({"type": "float64"}, [2**63, 0.5]),
    ],
)
def test_each_value_is_converted_on_its_own_never_rounded_by_its_neighbours(spec, values):
    batch = convert({"x": spec}, [{"x": v} for v in values])
    field = batch.schema.field(0)
    read = to_numpy(batch.column(0), field)
    assert [np.asarray(v).tolist() for v in read] == [np.asarray(v).tolist() for v in values]


@pytest.mark.parametrize(
    ("spec", "values", "bad_row"),
    [
        ({"type": "float32"}, [0.5, 2**24 + 1], 1),
        ({"type": "float16"}, [1.5, 2049], 1),
        ({"type": "float32", "shape": [-1]}, [[0.5], [2**24 + 1]], 1),
        ({"type": "float32", "shape": [-1]}, [[0.5, 2**24 + 1]], 0),
        ({"type": "float32", "shape": [20]}, [[0.5] * 19 + [2**24 + 1]], 0),
    ],
)
def test_an_int_among_floats_is_still_checked(spec, values, bad_row):
    with pytest.raises(RowError, match=rf"row {bad_row}, field 'x': an integer that float"):
        convert({"x": spec}, [{"x": v} for v in values])


def test_nullable_fixed_shapes_are_tensors_and_fixed_lists_with_nulls_need_pyarrow_26():
    schema = to_arrow_schema({"box": {"type": "float32", "shape": [4], "nullable": True}})
    assert describe(schema)[0]["layout"] == "tensor"
    declared = {"box": {"type": "float32", "shape": [4], "nullable": True, "layout": "list"}}
    if int(pa.__version__.split(".")[0]) >= 26:
        assert describe(to_arrow_schema(declared))[0]["layout"] == "list"
    else:
        with pytest.raises(SchemaError, match=r"apache/arrow#35692.*layout.*tensor"):
            to_arrow_schema(declared)


def test_arrays_convert_without_pandas_installed():
    # pyarrow's DataType.to_pandas_dtype() imports pandas, which recordmill does not depend on.
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import sys

        class NoPandas:  # as if pandas were not installed
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "pandas":
                    raise ModuleNotFoundError("No module named 'pandas'", name="pandas")

        sys.meta_path.insert(0, NoPandas())
        import numpy as np
        from recordmill.engine.convert import RowConverter
        from recordmill.read.dataset import to_numpy
        from recordmill.dataset.schema import to_arrow_schema
        schema = to_arrow_schema({"x": {"type": "float32", "shape": [4]},
                                  "t": {"type": "uint8", "shape": [-1, 2]},
                                  "i": {"type": "float16", "shape": [20]}})
        batch = RowConverter(schema).to_batch([{"x": [1, 2, 3, 4], "t": [[1, 2]], "i": np.ones(20)}])
        print([np.asarray(to_numpy(c, f)).sum() for c, f in zip(batch.columns, batch.schema)])
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[np.float32(10.0), np.uint64(3), np.float16(20.0)]"


@pytest.mark.parametrize("target", ["float16", "float32", "float64"])
def test_numpy_float16_beside_an_int_keeps_its_fraction(target):
    # pyarrow reads np.float16 scalars as integers when it picks a type for them (1.5 -> 1).
    batch = convert({"x": {"type": target}}, [{"x": 1}, {"x": np.float16(1.5)}])
    assert batch.column("x").to_pylist() == [1.0, 1.5]


def test_numpy_float16_with_a_fraction_is_no_int():
    with pytest.raises(RowError, match=r"row 1, field 'x': .*expected int64, got float16"):
        convert({"x": {"type": "int64"}}, [{"x": 1}, {"x": np.float16(1.5)}])


def test_an_empty_list_first_takes_its_type_from_the_next_non_empty_one():
    """``tokens == []`` in the first row once gave float64 [-1], then refused the strings."""
    rows = [{"tokens": [], "n": 1}, {"tokens": [], "n": 2}, {"tokens": ["#", "x"], "n": 3}]
    inferred = infer_schema(rows[0], rows[1:])
    assert inferred.field("tokens").type == pa.list_(pa.string())
    ids = infer_schema({"ids": ()}, [{"ids": np.array([3, 4], dtype=np.uint16)}])
    assert ids.field("ids").type == pa.list_(pa.uint16())
    with pytest.raises(RowError) as info:
        infer_schema(rows[0], rows[1:2])
    assert str(info.value).startswith(
        "row 0, field 'tokens': every value seen is an empty list (2 rows); declare its element "
        "type in schema()"
    )


@pytest.mark.parametrize(
    ("name", "low", "high"),
    [
        ("int8", -128, 127),
        ("uint8", 0, 255),
        ("int32", -(2**31), 2**31 - 1),
        ("uint32", 0, 2**32 - 1),
    ],
)
def test_an_int_that_an_int_field_cannot_hold_is_refused(name, low, high):
    """Narrowed on numpy (no pyarrow.compute in a worker): every value checked, both ends."""
    fits = convert({"x": {"type": name}}, [{"x": low}, {"x": high}])
    assert fits.column(0).to_pylist() == [low, high] and fits.column(0).type == SCALARS[name][1]
    for bad in (low - 1, high + 1):
        with pytest.raises(
            RowError, match=rf"row 1, field 'x': value out of range for {name}: it holds {low} to"
        ):
            convert({"x": {"type": name}}, [{"x": 1}, {"x": bad}])
    with pytest.raises(RowError, match="value out of range for int8: it holds -128 to 127"):
        convert({"x": {"type": "int8"}}, [{"x": 128}])


# --- each rule of the module, at its edges (mutmut's survivors) ---------------------------------


@pytest.mark.parametrize(
    ("alias", "name"),
    [("binary", "bytes"), ("str", "string"), ("boolean", "bool"), ("double", "float64")],
)
def test_each_alias_is_the_type_it_names(alias, name):
    got = schema_mod.to_arrow_schema({"a": alias, "b": {"type": alias, "shape": [-1]}})
    assert got.field("a").type == schema_mod.SCALAR_TYPES[name]
    assert got.field("b").type == pa.list_(schema_mod.SCALAR_TYPES[name])


def test_numbers_and_bools_have_a_numpy_dtype_and_nothing_else_does():
    for name, t in schema_mod.SCALAR_TYPES.items():
        if name in ("string", "bytes"):
            with pytest.raises(TypeError) as caught:
                schema_mod.numpy_dtype(t)
            assert str(caught.value) == f"{t} has no numpy dtype"
        else:
            assert schema_mod.numpy_dtype(t) == np.dtype(name)
    with pytest.raises(TypeError, match=r"^date32\[day\] has no numpy dtype$"):
        schema_mod.numpy_dtype(pa.date32())


RULE = schema_mod.NAME_RULE_TEXT


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            ["image/encoded"],
            f"field name 'image/encoded' is not allowed (try 'image_encoded'): {RULE}",
        ),
        (["ok", "9lives"], f"field name '9lives' is not allowed (try '_9lives'): {RULE}"),
        ([""], f"field name '' is not allowed: {RULE}"),
        ([3], f"field name 3 is not allowed: {RULE}"),
        (
            ["Label", "x", "label"],
            f"field names 'Label' and 'label' differ only in case, which SQL tools do not tell "
            f"apart: {RULE}",
        ),
    ],
)
def test_a_name_against_the_rule_is_refused_in_one_whole_line(names, message):
    with pytest.raises(SchemaError) as caught:
        schema_mod.check_names(names)
    assert str(caught.value) == message
    assert RULE == (
        "field names are letters, digits and underscores, not starting with a digit, and differ "
        "in more than upper/lower case"
    )


def test_names_that_differ_in_more_than_case_are_all_allowed():
    schema_mod.check_names(["a", "b", "a_b", "A1", "_x"])


@pytest.mark.parametrize(
    ("name", "safe"), [("a-b", "a_b"), ("/", "_"), ("7", "_7"), ("x7", "x7"), ("é", "_"), ("", "_")]
)
def test_a_safe_name_follows_the_rule(name, safe):
    assert schema_mod.safe_name(name) == safe
    schema_mod.check_names([safe])


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ({}, "schema() must return a non-empty dict or a pyarrow.Schema, got dict {}"),
        (None, "schema() must return a non-empty dict or a pyarrow.Schema, got NoneType None"),
        ({"a": 3}, "schema field 'a': expected a dict with a 'type', got 3"),
        (
            {"a": {"type": "int8", "dims": [2]}},
            "schema field 'a': unknown key(s) ['dims'] (allowed: ['layout', 'nullable', 'shape', "
            "'type'])",
        ),
    ],
)
def test_a_schema_that_is_not_one_is_refused_in_one_whole_line(declared, message):
    with pytest.raises(SchemaError) as caught:
        schema_mod.to_arrow_schema(declared)
    assert str(caught.value) == message


@pytest.mark.parametrize("shape", [[1], [-1], [1, -1], [3, 1]])
def test_a_dimension_is_positive_or_minus_one(shape):
    schema_mod.to_arrow_schema({"a": {"type": "int8", "shape": shape}})
    bad = [*shape[:-1], 0]
    with pytest.raises(SchemaError, match=r"shape must be a non-empty list of positive ints or -1"):
        schema_mod.to_arrow_schema({"a": {"type": "int8", "shape": bad}})
    with pytest.raises(SchemaError, match=r"shape must be a non-empty list of positive ints or -1"):
        schema_mod.to_arrow_schema({"a": {"type": "int8", "shape": [*shape[:-1], -2]}})


def test_up_to_sixteen_elements_a_fixed_shape_is_a_list_and_past_it_a_tensor():
    got = schema_mod.to_arrow_schema(
        {"box": {"type": "float32", "shape": [4, 4]}, "big": {"type": "float32", "shape": [17]}}
    )
    assert got.field("box").type == pa.list_(pa.list_(pa.float32(), 4), 4)
    assert schema_mod.tensor_spec(got.field("big")) == (np.dtype("<f4"), (17,))
    # The key other tools read a tensor's dtype and shape by (docs/output-format.md).
    assert json.loads(got.field("big").metadata[b"recordmill.tensor"]) == {
        "dtype": "float32",
        "shape": [17],
    }


def test_text_is_never_a_tensor():
    with pytest.raises(SchemaError) as caught:
        schema_mod.to_arrow_schema({"t": {"type": "bytes", "shape": [2], "layout": "tensor"}})
    assert str(caught.value) == (
        "schema field 't': the tensor layout needs a fixed shape of numbers or bools"
    )
    got = schema_mod.to_arrow_schema({"t": {"type": "bytes", "shape": [40]}})
    assert got.field("t").type == pa.list_(pa.binary(), 40)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"type": "int8", "shape": [2], "layout": "grid"},
            "layout must be one of list, tensor, got 'grid'",
        ),
        ({"type": "int8", "layout": "list"}, "a layout needs a shape"),
    ],
)
def test_a_field_of_a_bad_layout_is_refused_in_one_whole_line(spec, message):
    with pytest.raises(SchemaError) as caught:
        schema_mod.to_arrow_schema({"f": spec})
    assert str(caught.value) == f"schema field 'f': {message}"


def test_inferred_fields_are_not_nullable_and_keep_what_numpy_says():
    row = {
        "b": True,
        "nb": np.bool_(False),
        "i": 3,
        "f": 1.5,
        "s": "x",
        "y": b"z",
        "i16": np.int16(3),
        "f32": np.float32(1),
        "zero_d": np.array(5),
        "small": np.zeros((2, 3), np.uint8),
        "large": np.zeros((4, 5), np.float32),
        "ints": [1, 2],
        "nested": [[1.0, 2.0], [3.0, 4.0]],
        "from_numpy": [np.int8(1)],
        "texts": ["a"],
        "blobs": [[b"x"]],
        "unicode": np.array(["a", "bc"]),
        "raw": np.array([[b"a"]]),
    }
    got = infer_schema(row)
    assert not any(f.nullable for f in got)
    assert {f.name: f.type for f in got if f.name != "large"} == {
        "b": pa.bool_(),
        "nb": pa.bool_(),
        "i": pa.int64(),
        "f": pa.float64(),
        "s": pa.string(),
        "y": pa.binary(),
        "i16": pa.int16(),
        "f32": pa.float32(),
        "zero_d": pa.int64(),
        "small": pa.list_(pa.list_(pa.uint8(), 3), 2),
        "ints": pa.list_(pa.int64()),
        "nested": pa.list_(pa.list_(pa.float64())),
        "from_numpy": pa.list_(pa.int8()),
        "texts": pa.list_(pa.string()),
        "blobs": pa.list_(pa.list_(pa.binary())),
        "unicode": pa.list_(pa.string()),
        "raw": pa.list_(pa.list_(pa.binary())),
    }
    assert tensor_spec(got.field("large")) == (np.dtype("<f4"), (4, 5))


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (5, "row 0: dict_data() must yield dicts, got int 5"),
        ({}, "row 0: the row has no fields"),
        (
            {"c": np.complex64(1)},
            "row 0, field 'c': cannot infer the field's type from the first row; declare it in "
            "schema(), got complex64 np.complex64(1+0j)",
        ),
        (
            {"o": [object()]},
            "row 0, field 'o': cannot infer the field's type from the first row; declare it in "
            "schema(), got list [<object object at",
        ),
    ],
)
def test_a_row_that_says_no_type_is_refused_in_one_line_at_row_0(row, message):
    with pytest.raises(RowError) as caught:
        infer_schema(row)
    assert str(caught.value).startswith(message)
    assert len(str(caught.value).splitlines()) == 1


def fields(**types) -> pa.Schema:
    return pa.schema([pa.field(n, t, nullable=False) for n, t in types.items()])


def test_the_tasks_schemas_are_one_or_the_first_difference_is_named():
    base = fields(a=pa.int64(), b=pa.string())
    assert (
        schema_mod.check_same_schema({2: base, 0: base, 1: fields(a=pa.int64(), b=pa.string())})
        == base
    )
    cases = [
        ({3: fields(a=pa.int64()), 0: base, 1: base}, "task 3 has no field 'b'; task 0 has it"),
        (
            {5: base, 4: fields(a=pa.int64(), b=pa.int64()), 9: base},
            "field 'b' is int64 in task 4 but string in task 5; declare a schema() so that all "
            "values are converted to one type",
        ),
        (
            {1: base, 2: fields(a=pa.int64(), b=pa.string(), c=pa.bool_())},
            "task 2 has field(s) ['c'] that task 1 has not",
        ),
    ]
    for schemas, message in cases:
        with pytest.raises(SchemaError) as caught:
            schema_mod.check_same_schema(schemas)
        assert str(caught.value) == message


def test_tensors_of_one_width_but_other_shapes_are_other_schemas():
    wide = pa.schema([schema_mod.tensor_field("t", np.dtype(np.uint8), [2, 3], False)])
    tall = pa.schema([schema_mod.tensor_field("t", np.dtype(np.uint8), [3, 2], False)])
    assert wide.field("t").type == tall.field("t").type  # binary(6) both
    assert schema_mod.first_difference(wide, tall) == (wide.field("t"), tall.field("t"))
    with pytest.raises(SchemaError, match=r"^field 't' is "):
        schema_mod.check_same_schema({0: wide, 1: tall})


def test_a_value_in_a_message_is_its_type_and_at_most_60_characters():
    assert (
        schema_mod.describe_value(np.zeros((2, 3), np.uint8))
        == "numpy array of shape [2, 3] and dtype uint8"
    )
    assert schema_mod.describe_value("x" * 58) == f"str '{'x' * 58}'"  # 60 characters: as it is
    assert schema_mod.describe_value("x" * 59) == f"str '{'x' * 56}..."  # 61: cut to 57 and "..."


def test_a_schema_file_is_refused_in_one_line_naming_the_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("image/encoded: bytes\nimage_encoded: int8\n")
    with pytest.raises(SchemaError) as caught:
        schema_mod.from_yaml(path, rename=schema_mod.safe_name)
    assert str(caught.value) == f"schema file {path}: two names become the same field name"
    path.write_text("a-b: int8\nc: {type: int8, shape: [2]}\n")
    assert schema_mod.from_yaml(path, rename=schema_mod.safe_name) == {
        "a_b": {"type": "int8"},
        "c": {"type": "int8", "shape": [2]},
    }
    path.write_text("a: int8\nb: {type: int8, shape: [0]}\n")
    with pytest.raises(SchemaError) as caught:
        schema_mod.from_yaml(path)
    assert str(caught.value) == (
        f"schema file {path}: schema field 'b': shape must be a non-empty list of positive ints "
        "or -1, got [0]"
    )
    path.write_text("")
    with pytest.raises(SchemaError) as caught:
        schema_mod.from_yaml(path)
    assert str(caught.value) == f"schema file {path}: expected a mapping of field names to types"
    missing = tmp_path / "missing.yaml"
    with pytest.raises(SchemaError) as caught:
        schema_mod.from_yaml(missing)
    assert str(caught.value).startswith(f"cannot read schema file {missing}: [Errno 2]")


def test_list_types_have_a_level_per_dimension_fixed_where_the_dimension_is():
    assert schema_mod.list_type(pa.int8(), [-1, 3]) == pa.list_(pa.list_(pa.int8(), 3))
    assert schema_mod.list_type(pa.int8(), [2, -1]) == pa.list_(pa.list_(pa.int8()), 2)
    assert schema_mod.nested_shape(schema_mod.list_type(pa.int8(), [2, -1, 1])) == (
        [2, -1, 1],
        pa.int8(),
    )


def test_only_a_fixed_size_binary_field_with_the_key_is_a_tensor():
    info = {schema_mod.TENSOR_KEY: b'{"dtype": "uint8", "shape": [2]}'}
    assert tensor_spec(pa.field("t", pa.binary(2), metadata=info)) == (np.dtype(np.uint8), (2,))
    assert tensor_spec(pa.field("t", pa.binary(), metadata=info)) is None
    assert tensor_spec(pa.field("t", pa.binary(2))) is None
    assert tensor_spec(pa.field("t", pa.binary(2), metadata={b"other": b"1"})) is None


def test_the_tensor_index_is_made_again_and_other_metadata_kept():
    stale = {schema_mod.TENSORS_KEY: b'{"gone": {}}', b"mine": b"kept"}
    plain = schema_mod.with_tensor_index(pa.schema([("x", pa.int8())], metadata=stale))
    assert plain.metadata == {b"mine": b"kept"}
    field = schema_mod.tensor_field("t", np.dtype(np.int16), [2, 2], False)
    indexed = schema_mod.with_tensor_index(pa.schema([field], metadata=stale))
    assert indexed.metadata == {
        b"mine": b"kept",
        schema_mod.TENSORS_KEY: b'{"t": {"dtype": "int16", "shape": [2, 2]}}',
    }
    assert schema_mod.with_tensor_index(pa.schema([("x", pa.int8())])).metadata is None


@pytest.mark.parametrize("shape", [3, "3", [], [2, 0]])
def test_a_shape_that_is_not_a_list_of_dimensions_is_refused_in_one_line(shape):
    with pytest.raises(SchemaError) as caught:
        schema_mod.to_arrow_schema({"f": {"type": "int8", "shape": shape}})
    assert str(caught.value) == (
        f"schema field 'f': shape must be a non-empty list of positive ints or -1, got {shape!r}"
    )
