"""The refusals of dataset/ that no other test reaches, each reached the way a user would: a
manifest file damaged in one way and opened with ``recordmill.open``, a plugin whose rows or
schema break a rule and written with ``recordmill.write``, a schema file given to the csv
plugin. Each test names the message it expects."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import recordmill
from recordmill.dataset import manifest, manifest_check
from tests.conftest import edit_manifest, make_plugin

PLUGIN = """
    def task_number():
        return 2

    def dict_data(task_id):
        for i in range(3):
            yield {"task": task_id, "i": i}
"""


@pytest.fixture(scope="module", params=["parquet", "arrow"])
def written(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    out = root / "ds"
    recordmill.write(
        make_plugin(root / "p", PLUGIN), out, format=request.param, workers=0, progress=False
    )
    return out, request.param


@pytest.fixture
def copy(written, tmp_path):
    source, fmt = written
    out = tmp_path / "ds"
    shutil.copytree(source, out)
    return out, fmt


def refused(out) -> str:
    with pytest.raises(recordmill.OutputError) as caught:
        recordmill.open(str(out))
    text = str(caught.value)
    assert text.startswith(f"the manifest of {out} is damaged: _manifest.") and "\n" not in text
    return text


def replace_manifest(out, fmt, data: bytes) -> None:
    (out / f"_manifest.{fmt}").write_bytes(data)


def test_a_manifest_file_without_the_manifest_is_refused(copy):
    out, fmt = copy
    schema = manifest.arrow_schema(recordmill.read_manifest(out))
    replace_manifest(out, fmt, manifest_check.empty_file(schema, fmt, {b"other": b"1"}))
    assert "it holds no manifest (recordmill.manifest is not in its metadata)" in refused(out)


def test_a_manifest_whose_json_cannot_be_read_is_refused(copy):
    out, fmt = copy
    schema = manifest.arrow_schema(recordmill.read_manifest(out))
    metadata = {manifest_check.MANIFEST_KEY: b'{"format_version": 2,'}  # no checksum beside it
    replace_manifest(out, fmt, manifest_check.empty_file(schema, fmt, metadata))
    assert "its JSON cannot be read (" in refused(out)


def test_a_manifest_file_that_holds_rows_is_refused(copy):
    out, fmt = copy
    found = recordmill.read_manifest(out)
    text = json.dumps(found).encode()
    metadata = {manifest_check.MANIFEST_KEY: text}
    table = pa.table({"task": pa.array([0, 1], pa.int64()), "i": pa.array([0, 0], pa.int64())})
    schema = manifest.arrow_schema(found)
    table = table.cast(schema)
    sink = pa.BufferOutputStream()
    if fmt == "arrow":
        with pa.ipc.new_file(sink, schema.with_metadata(metadata)) as writer:
            writer.write_table(table)
    else:
        pq.write_table(table.replace_schema_metadata(metadata), sink)
    replace_manifest(out, fmt, sink.getvalue().to_pybytes())
    assert "it holds 2 rows; a manifest file holds none" in refused(out)


def test_a_manifest_file_of_another_schema_than_it_records_is_refused(copy):
    out, fmt = copy
    found = recordmill.read_manifest(out)
    other = pa.schema([("task", pa.int32()), ("i", pa.int64())])  # int64 recorded
    data = manifest.to_bytes(found, other)
    replace_manifest(out, fmt, data)
    assert "the schema of the file differs from the schema it records" in refused(out)


@pytest.mark.parametrize("written", ["parquet"], indirect=True)  # the Parquet magic
def test_a_parquet_manifest_with_a_damaged_header_is_refused(written, tmp_path):
    source, fmt = written
    out = tmp_path / "ds"
    shutil.copytree(source, out)
    data = bytearray((out / "_manifest.parquet").read_bytes())
    data[:4] = b"PAX1"  # pyarrow itself reads only the magic at the end
    replace_manifest(out, fmt, bytes(data))
    assert "its Parquet header or schema is damaged" in refused(out)


@pytest.mark.parametrize("written", ["arrow"], indirect=True)  # an IPC file's two schemas
def test_the_first_copy_of_an_arrow_manifest_is_compared_with_the_footer(written, tmp_path):
    source, fmt = written
    out = tmp_path / "ds"
    shutil.copytree(source, out)
    data = (out / "_manifest.arrow").read_bytes()
    first = data.index(b'"total_rows"')  # in the stream's schema message, not the footer's
    assert data.count(b'"total_rows"') == 2
    changed = data[:first] + b'"total_rowz"' + data[first + len(b'"total_rows"') :]
    replace_manifest(out, fmt, changed)
    assert "its two copies of the schema (and of the manifest) differ" in refused(out)


def test_a_truncated_manifest_file_is_refused(copy):
    out, fmt = copy
    data = (out / f"_manifest.{fmt}").read_bytes()
    replace_manifest(out, fmt, data[: len(data) // 2])
    kind = {"parquet": "a Parquet", "arrow": "an Arrow IPC"}[fmt]
    assert f"it cannot be read as {kind} file (" in refused(out)


def rewrite(out, fmt, found) -> None:
    """The manifest file of ``fmt`` holding ``found``, with its checksum: damaged only as
    ``found`` is."""
    text = json.dumps(found).encode()
    metadata = {
        manifest_check.MANIFEST_KEY: text,
        manifest_check.CHECKSUM_KEY: manifest_check.checksum(text),
    }
    schema = manifest.arrow_schema(found)
    replace_manifest(out, fmt, manifest_check.empty_file(schema, fmt, metadata))


def test_a_key_that_is_missing_or_of_another_type_is_named(copy):
    out, fmt = copy
    intact = recordmill.read_manifest(out)
    rewrite(out, fmt, {k: v for k, v in intact.items() if k != "total_rows"})
    assert refused(out).endswith(': "total_rows" is missing')
    rewrite(out, fmt, {**intact, "total_rows": "six"})
    assert refused(out).endswith(': "total_rows" is "six", not a whole number')
    rewrite(out, fmt, intact)
    assert len(recordmill.open(str(out))) == 6


def test_a_format_that_is_none_of_ours_is_named(copy):
    out, fmt = copy
    rewrite(out, fmt, {**recordmill.read_manifest(out), "format": "orc"})
    assert refused(out).endswith("\"format\" is 'orc', not one of parquet, arrow")


def test_offsets_of_another_count_than_the_row_groups_are_named(copy):
    out, _ = copy
    part = recordmill.read_manifest(out)["partitions"][0]
    assert part["row_groups"] == 1 and len(part["group_offsets"]) == 2

    def damage(m):
        m["partitions"][0]["group_offsets"] = [4]

    edit_manifest(out, damage)
    assert refused(out).endswith('partition 0: "group_offsets" lists 1, 2 expected')


def test_more_row_groups_than_bytes_are_named(copy):
    out, _ = copy

    def damage(m):
        m["partitions"][0]["row_groups"] = 10**9

    size = recordmill.read_manifest(out)["partitions"][0]["bytes"]
    edit_manifest(out, damage)
    assert refused(out).endswith(f"partition 0: 1,000,000,000 row groups in {size:,} bytes")


def write(tmp_path, source, **settings):
    settings = {"workers": 0, "progress": False, **settings}
    return recordmill.write(make_plugin(tmp_path / "p", source), tmp_path / "out", **settings)


def test_field_names_that_differ_only_in_case_are_refused(tmp_path):
    source = """
        def task_number():
            return 1

        def dict_data(task_id):
            yield {"Label": 1, "label": 2}
    """
    with pytest.raises(
        recordmill.SchemaError,
        match="field names 'Label' and 'label' differ only in case, which SQL tools do not tell",
    ):
        write(tmp_path, source)
    assert not (tmp_path / "out").exists()


def test_an_unknown_key_of_a_declared_field_is_refused(tmp_path):
    source = """
        def task_number():
            return 1

        def schema():
            return {"x": {"type": "int32", "shap": [2]}}

        def dict_data(task_id):
            yield {"x": 1}
    """
    with pytest.raises(recordmill.SchemaError, match=r"field 'x': unknown key\(s\) \['shap'\]"):
        write(tmp_path, source)


def test_a_row_without_fields_is_refused(tmp_path):
    source = """
        def task_number():
            return 1

        def dict_data(task_id):
            yield {}
    """
    with pytest.raises(recordmill.RecordmillError, match="row 0: the row has no fields"):
        write(tmp_path, source)


def test_a_value_whose_type_cannot_be_inferred_is_refused(tmp_path):
    source = """
        def task_number():
            return 1

        def dict_data(task_id):
            yield {"when": {"a": 1}}
    """
    with pytest.raises(recordmill.RecordmillError) as caught:
        write(tmp_path, source)
    assert "field 'when': cannot infer the field's type from the first row; declare it" in str(
        caught.value
    )


TASKS = """
    ROWS = {rows!r}

    def task_number():
        return 2

    def dict_data(task_id):
        yield ROWS[task_id]
"""


@pytest.mark.parametrize(
    ("rows", "line"),
    [
        ([{"a": 1, "b": 2}, {"a": 1}], "task 1 has no field 'b'; task 0 has it"),
        ([{"a": 1}, {"a": 1, "c": 2}], "task 1 has field(s) ['c'] that task 0 has not"),
        (
            [{"a": 1}, {"a": "x"}],
            "field 'a' is int64 in task 0 but string in task 1; declare a schema() so that",
        ),
    ],
)
def test_tasks_whose_inferred_schemas_differ_are_refused(tmp_path, rows, line):
    with pytest.raises(recordmill.SchemaError) as caught:
        write(tmp_path, TASKS.format(rows=rows), workers=1)
    assert line in str(caught.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a: [", "cannot read schema file "),
        ("- int32\n", ": expected a mapping of field names to types"),
        ("a b: int32\na_b: int64\n", ": two names become the same field name"),
        ("a: integer\n", ": schema field 'a': unknown type 'integer'"),
    ],
)
def test_a_schema_file_that_is_not_one_is_refused(tmp_path, text, line):
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    (tmp_path / "s.yaml").write_text(text)
    options = {"input": tmp_path / "t.csv", "schema": tmp_path / "s.yaml"}
    with pytest.raises(recordmill.RecordmillError) as caught:
        recordmill.write("csv", tmp_path / "out", options=options, workers=0, progress=False)
    assert f"schema file {tmp_path / 's.yaml'}" in str(caught.value) and line in str(caught.value)


@pytest.mark.parametrize(("kind", "shape"), [("float32", [-1, 2]), ("string", [2])])
def test_a_tensor_layout_of_a_varying_shape_or_of_text_is_refused(tmp_path, kind, shape):
    source = f"""
        def task_number():
            return 1

        def schema():
            return {{"x": {{"type": "{kind}", "shape": {shape}, "layout": "tensor"}}}}

        def dict_data(task_id):
            yield {{"x": None}}
    """
    with pytest.raises(recordmill.SchemaError) as caught:
        write(tmp_path, source)
    assert str(caught.value).endswith(
        "schema field 'x': the tensor layout needs a fixed shape of numbers or bools"
    )


def test_a_rejects_file_that_is_gone_is_named(tmp_path):
    source = """
        import recordmill

        def task_number():
            return 1

        def dict_data(task_id):
            yield recordmill.Reject("input 0", "unreadable")
            yield {"x": 1}
    """
    summary = write(tmp_path, source, on_bad_input="skip")
    name = summary.manifest["rejects"]["file"]
    assert [r["source"] for r in recordmill.read_rejects(tmp_path / "out")] == ["input 0"]
    (tmp_path / "out" / name).unlink()
    with pytest.raises(recordmill.OutputError) as caught:
        recordmill.read_rejects(tmp_path / "out")
    assert str(caught.value).startswith(f"{tmp_path / 'out'}/{name} cannot be read: ")
