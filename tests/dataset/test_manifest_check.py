"""A damaged manifest file is one error line, "the manifest of PATH is damaged: ...", from
``recordmill.open`` and from ``info``, ``head`` and ``verify``: every byte of a small
``_manifest.parquet`` and ``_manifest.arrow`` is flipped in turn, and each flip is caught or
changes nothing that is read (issues 30 and 31: bare ``OSError`` and ``KeyError``, tracebacks,
and flips in the Arrow file's unread copy that went unnoticed)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import recordmill
from recordmill.cli import main
from recordmill.dataset import manifest_check
from recordmill.dataset.manifest import file_metadata
from recordmill.dataset.schema import tensor_field
from tests.conftest import make_plugin

PLUGIN = """
    import numpy as np

    def task_number():
        return 3

    def schema():
        return {"task": {"type": "int32"}, "name": {"type": "string"},
                "v": {"type": "float32", "shape": [2]}}

    def dict_data(task_id):
        for i in range(4):
            yield {"task": task_id, "name": f"t{task_id}-{i}", "v": np.full(2, i, np.float32)}
"""


@pytest.fixture(scope="module", params=["parquet", "arrow"])
def written(request, tmp_path_factory):
    """A small dataset of each format, and what the tools print for it intact."""
    root = tmp_path_factory.mktemp(request.param)
    plugin = make_plugin(root / "plugin", PLUGIN)
    out = root / "ds"
    recordmill.write(plugin, out, partitions=2, format=request.param, progress=False)
    return out, request.param


def tool(capsys, *argv) -> tuple[int, str, str]:
    """``recordmill ARGV`` in this process: (exit code, stdout, stderr); any exception that
    escapes is the test's failure, as it would be a traceback."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def damaged_line(text: str, path) -> bool:
    lines = text.strip().splitlines()
    return len(lines) == 1 and f"the manifest of {path} is damaged: " in lines[0]


def test_every_flipped_byte_is_caught_or_changes_nothing_read(written, tmp_path, capsys):
    source, fmt = written
    out = tmp_path / "ds"
    shutil.copytree(source, out)
    manifest_path = out / f"_manifest.{fmt}"
    intact = manifest_path.read_bytes()
    reference = recordmill.open(str(out))
    rows = reference.to_arrow()
    tools = {argv[0]: tool(capsys, *argv) for argv in (["info", out], ["head", out])}
    tools["verify"] = tool(capsys, "verify", out)
    assert all(code == 0 for code, _, _ in tools.values())
    caught = 0
    for offset in range(len(intact)):
        damaged = bytearray(intact)
        damaged[offset] ^= 0x01 if offset % 2 else 0x40
        manifest_path.write_bytes(bytes(damaged))
        try:
            ds = recordmill.open(str(out))
        except recordmill.OutputError as e:
            assert damaged_line(str(e), out), (offset, str(e))
            caught += 1
        else:
            assert ds.manifest == reference.manifest, offset
            assert ds.to_arrow().equals(rows), offset
        if offset % 53:  # the tools on every 53rd flip: each pass takes a while
            continue
        for name, (_, stdout, _) in tools.items():
            found = tool(capsys, name, out)
            if found[0] == 0:
                assert found[1] == stdout, (offset, name)
            else:  # verify reports on stdout, the others say it on stderr
                assert found[0] == 1 and damaged_line(found[1] + found[2], out), (offset, found)
    assert caught > 0.9 * len(intact)


def without_checksum(path, fmt: str, change=lambda text: text) -> None:
    """Write the manifest as recordmill did before it had a checksum, its JSON ``change``d."""
    data = path.read_bytes()
    manifest = manifest_check.read(data, fmt)
    text = change(json.dumps(manifest, indent=2)).encode()
    schema = manifest_check.decode_schema(manifest["schema"]["arrow"])
    path.write_bytes(manifest_check.empty_file(schema, fmt, {manifest_check.MANIFEST_KEY: text}))


def test_a_manifest_without_a_checksum_still_opens(written, tmp_path, capsys):
    source, fmt = written
    out = tmp_path / "ds"
    shutil.copytree(source, out)
    without_checksum(out / f"_manifest.{fmt}", fmt)
    assert len(recordmill.open(str(out))) == 12
    assert tool(capsys, "verify", out)[0] == 0


def test_rows_turned_into_sows_is_named(written, tmp_path, capsys):
    """Issue 31: one flipped byte that turns a partition's "rows" into "Sows" gave a bare
    KeyError from open, info and head, and a traceback from verify."""
    source, fmt = written
    out = tmp_path / "ds"
    shutil.copytree(source, out)
    path = out / f"_manifest.{fmt}"
    data = bytearray(path.read_bytes())
    # The second partition's "rows" (the first "rows" of all is a task's, in Arrow's first
    # copy as well: the last one the reader reads is the footer's).
    at = data.rindex(b'"rows"', 0, data.rindex(b'"tasks"'))
    data[at + 1] ^= ord("r") ^ ord("S")
    path.write_bytes(bytes(data))
    for argv in (["info", out], ["head", out], ["verify", out]):
        code, stdout, stderr = tool(capsys, *argv)
        assert code == 1 and damaged_line(stdout + stderr, out), (argv, stdout, stderr)
        assert "checksum" in stdout + stderr or "two copies" in stdout + stderr
    with pytest.raises(recordmill.OutputError, match=r"checksum does not match|two copies"):
        recordmill.open(str(out))

    # The same damage in a manifest written before the checksum: the key and partition named.
    shutil.copy(source / path.name, path)
    without_checksum(path, fmt, lambda text: text.replace('"rows": 6,', '"Sows": 6,', 1))
    named = f'partition 0 (part-00000-of-00002.{fmt}): "rows" is missing'
    for argv in (["info", out], ["head", out], ["verify", out]):
        code, stdout, stderr = tool(capsys, *argv)
        assert code == 1 and damaged_line(stdout + stderr, out) and named in stdout + stderr
    with pytest.raises(recordmill.OutputError, match=named.replace("(", r"\(").replace(")", r"\)")):
        recordmill.open(str(out))


def test_a_damaged_key_of_the_readable_schema_is_named(written, tmp_path, capsys):
    """Issue 31: a damaged "nullable" passed verify while info crashed."""
    source, fmt = written
    out = tmp_path / "ds"
    shutil.copytree(source, out)
    without_checksum(
        out / f"_manifest.{fmt}", fmt, lambda text: text.replace('"nullable"', '"nullablE"', 1)
    )
    for argv in (["info", out], ["verify", out]):
        code, stdout, stderr = tool(capsys, *argv)
        assert code == 1 and damaged_line(stdout + stderr, out), (argv, stdout, stderr)
        assert 'schema field 0 (task): "nullable" is missing' in stdout + stderr


def test_a_damaged_arrow_schema_in_the_manifest_is_one_line(written, tmp_path, capsys):
    """Issue 30: a flipped byte in the Arrow schema the manifest records made verify crash with
    ``OSError: Invalid flatbuffers message`` (and others of pyarrow's) and open raise it bare;
    with a checksum and without one."""
    source, fmt = written
    out = tmp_path / "ds"
    shutil.copytree(source, out)
    path = out / f"_manifest.{fmt}"
    intact = path.read_bytes()
    reference = recordmill.open(str(out))
    start = intact.rindex(b'"arrow": "') + len(b'"arrow": "')
    for offset in range(start, start + 64):
        for checksum in (True, False):
            damaged = bytearray(intact)
            damaged[offset] ^= 0x01
            path.write_bytes(bytes(damaged))
            if not checksum:  # the same byte, in a manifest from before the checksum
                path.write_bytes(intact)
                at = offset - start

                def flip(text, at=at):
                    i = text.index('"arrow": "') + len('"arrow": "') + at
                    return text[:i] + chr(ord(text[i]) ^ 0x01) + text[i + 1 :]

                without_checksum(path, fmt, flip)
            try:
                ds = recordmill.open(str(out))
            except recordmill.OutputError as e:
                assert damaged_line(str(e), out), str(e)
                harmless = False
            else:  # a byte no reader reads (padding), possible only without the checksum
                assert not checksum and ds.schema.equals(reference.schema), offset
                harmless = True
            for command in ("verify", "info", "head"):
                code, stdout, stderr = tool(capsys, command, out)
                if not harmless:
                    assert code == 1 and damaged_line(stdout + stderr, out), (offset, stdout)
                else:
                    assert code == 0, (offset, stdout, stderr)
    # And through the command line, as a user meets it: one line, no traceback.
    for command in ("verify", "info"):
        result = subprocess.run(
            [sys.executable, "-m", "recordmill", command, str(out)], capture_output=True, text=True
        )
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert damaged_line(result.stdout + result.stderr, out), (command, result)


def test_the_copy_of_an_arrow_manifest_that_is_not_read_is_checked_too(tmp_path, capsys):
    """Issue 30: an Arrow IPC file holds its schema, and the manifest, twice; flips in the
    stream's copy (which ``open_file`` does not read) went unnoticed by verify."""
    plugin = make_plugin(tmp_path / "plugin", PLUGIN)
    out = tmp_path / "ds"
    recordmill.write(plugin, out, format="arrow", progress=False)
    path = out / "_manifest.arrow"
    intact = path.read_bytes()
    first = intact.index(b'{\n  "format_version"')
    assert first < len(intact) // 2  # the stream's copy, before the footer's
    for offset in range(first, intact.index(b"\n}", first), 7):
        damaged = bytearray(intact)
        damaged[offset] ^= 0x01
        path.write_bytes(bytes(damaged))
        with pytest.raises(recordmill.OutputError, match=r"the manifest of .* is damaged"):
            recordmill.open(str(out))
        code, stdout, _ = tool(capsys, "verify", out)
        assert code == 1 and damaged_line(stdout, out), (offset, stdout)


def _part(m):
    return m["partitions"][0]


STRUCTURE = {  # a damage -> the line that names it
    "a list": (lambda m: ["not", "an", "object"], "it holds list JSON, not an object"),
    "no version": (
        lambda m: m.pop("format_version"),
        '"format_version" is missing or not a number',
    ),
    "a format": (lambda m: m.update(format="orc"), "\"format\" is 'orc', not one of"),
    "an arrow schema": (
        lambda m: m["schema"].update(arrow="AAAA"),
        '"schema"."arrow" cannot be read (',
    ),
    "field names": (
        lambda m: m["schema"]["fields"].reverse(),
        '"schema"."fields" do not name the fields of "schema"."arrow"',
    ),
    "a path out": (
        lambda m: _part(m).update(file="../../secret.parquet"),
        'partition 0: "file" is "../../secret.parquet", not a partition file name',
    ),
    "a path in a name that matches at its start": (
        lambda m: _part(m).update(file=_part(m)["file"] + "/../../escaped"),
        '/../../escaped", not a partition file name',
    ),
    "a name with a newline after it": (
        lambda m: _part(m).update(file=_part(m)["file"] + "\n"),
        '\\n", not a partition file name',
    ),
    "a path before a partition's name": (
        lambda m: _part(m).update(file="x/../../" + _part(m)["file"]),
        'partition 0: "file" is "x/../../part-',
    ),
    "a file twice": (
        lambda m: m["partitions"][1].update(file=_part(m)["file"]),
        'partition 1: "file" is ',
    ),
    "groups past bytes": (
        lambda m: _part(m).update(row_groups=10**9),
        "partition 0: 1,000,000,000 row groups in ",
    ),
    "offsets": (
        lambda m: _part(m).update(group_offsets=_part(m)["group_offsets"][:-1]),
        'partition 0: "group_offsets" lists ',
    ),
    "a rejects file": (
        lambda m: m["rejects"].update(file="/dev/zero"),
        'a rejects file is "/dev/zero", not a rejects file name',
    ),
}


@pytest.mark.parametrize("damage", sorted(STRUCTURE))
def test_each_damage_to_the_manifest_structure_is_named(written, damage):
    source, _ = written
    manifest = json.loads(json.dumps(recordmill.read_manifest(source)))
    change, line = STRUCTURE[damage]
    changed = change(manifest)
    if isinstance(changed, list):
        manifest = changed
    with pytest.raises(manifest_check.Damaged) as caught:
        manifest_check.check_structure(manifest)
    assert line in str(caught.value), (damage, str(caught.value))
    if damage == "a file twice":
        assert str(caught.value).endswith(", named twice")


# --- each refusal of read() as its whole line, made directly (mutmut's survivors) --------------


def stored(written) -> dict[bytes, bytes]:
    """The metadata of a written dataset's manifest file."""
    out, fmt = written
    return file_metadata((out / f"_manifest.{fmt}").read_bytes(), fmt)


def manifest_text(written) -> tuple[bytes, str]:
    return stored(written)[manifest_check.MANIFEST_KEY], written[1]


def structure_refusal(written, change) -> str | None:
    """What ``check_structure`` says of a written dataset's manifest after ``change(manifest,
    its first partition)``; None: nothing."""
    manifest = json.loads(json.dumps(recordmill.read_manifest(written[0])))
    change(manifest, _part(manifest))
    try:
        manifest_check.check_structure(manifest)
    except manifest_check.Damaged as e:
        return str(e)
    return None


def checked(text: bytes) -> dict[bytes, bytes]:
    """A manifest's metadata: its JSON and the JSON's checksum."""
    return {
        manifest_check.MANIFEST_KEY: text,
        manifest_check.CHECKSUM_KEY: manifest_check.checksum(text),
    }


def refused(data: bytes, fmt: str) -> str:
    with pytest.raises(manifest_check.Damaged) as caught:
        manifest_check.read(data, fmt)
    return str(caught.value)


def test_the_file_keeps_its_json_under_its_key_with_the_checksum_beside_it(written):
    metadata = stored(written)
    text = metadata[b"recordmill.manifest"]
    assert metadata[b"recordmill.manifest.sha256"] == manifest_check.checksum(text)
    assert json.loads(text)["format_version"] == manifest_check.FORMAT_VERSION == 2


def test_a_file_without_a_manifest_or_with_a_wrong_checksum_is_refused_in_one_line(written):
    text, fmt = manifest_text(written)
    schema = manifest_check.decode_schema(json.loads(text)["schema"]["arrow"])
    none = manifest_check.empty_file(schema, fmt, {})
    assert refused(none, fmt) == "it holds no manifest (recordmill.manifest is not in its metadata)"
    wrong = {**checked(text), manifest_check.CHECKSUM_KEY: b"0" * 64}
    assert refused(manifest_check.empty_file(schema, fmt, wrong), fmt) == (
        "its checksum does not match its contents: a byte of it was changed"
    )
    bad = b'{"format_version": 2,'
    unchecked = manifest_check.empty_file(schema, fmt, {manifest_check.MANIFEST_KEY: bad})
    try:
        json.loads(bad)
    except ValueError as e:
        said = str(e)
    assert refused(unchecked, fmt) == f"its JSON cannot be read ({said})"
    other = pa.schema([("other", pa.int8())])
    metadata = checked(text)
    assert refused(manifest_check.empty_file(other, fmt, metadata), fmt) == (
        "the schema of the file differs from the schema it records"
    )


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_a_file_whose_tensor_differs_from_the_recorded_one_is_refused(tmp_path, fmt):
    """Only a field's own metadata says a tensor's shape: a file whose ``t`` is (5, 4) where
    the manifest records (4, 5) is another dataset's file."""
    plugin = make_plugin(
        tmp_path / "plugin",
        """
        import numpy as np

        def task_number():
            return 1

        def schema():
            return {"t": {"type": "uint8", "shape": [4, 5]}}

        def dict_data(task_id):
            yield {"t": np.zeros((4, 5), np.uint8)}
        """,
    )
    recordmill.write(plugin, tmp_path / "ds", format=fmt, progress=False)
    text, _ = manifest_text((tmp_path / "ds", fmt))
    recorded = manifest_check.decode_schema(json.loads(text)["schema"]["arrow"])
    reshaped = recorded.set(0, tensor_field("t", np.dtype(np.uint8), [5, 4], False))
    assert reshaped.field("t").type == recorded.field("t").type  # binary(20) both
    assert refused(manifest_check.empty_file(reshaped, fmt, checked(text)), fmt) == (
        "the schema of the file differs from the schema it records"
    )


def test_a_file_that_holds_rows_is_refused_in_one_line(written):
    text, fmt = manifest_text(written)
    schema = manifest_check.decode_schema(json.loads(text)["schema"]["arrow"])
    metadata = checked(text)
    first = recordmill.open(str(written[0])).to_arrow().slice(0, 1)
    row = pa.table(first.columns, schema=schema)
    sink = pa.BufferOutputStream()
    if fmt == "arrow":
        with pa.ipc.new_file(sink, schema.with_metadata(metadata)) as writer:
            writer.write_table(row)
    else:
        with pq.ParquetWriter(sink, schema) as writer:
            writer.add_key_value_metadata(metadata)
            writer.write_table(row)
    assert (
        refused(sink.getvalue().to_pybytes(), fmt) == "it holds 1 rows; a manifest file holds none"
    )


def test_a_damaged_header_or_first_copy_is_refused_in_one_line(written):
    out, fmt = written
    data = bytearray((out / f"_manifest.{fmt}").read_bytes())
    data[0] ^= 0x01  # the magic at the start, which pyarrow does not read
    expected = {
        "parquet": "its Parquet header or schema is damaged",
        "arrow": "its two copies of the schema (and of the manifest) differ",
    }
    assert refused(bytes(data), fmt) == expected[fmt]


def test_a_schema_with_a_character_outside_base64_is_refused(written):
    """Decoders that skip such characters would read the schema as if it were intact."""
    text, _ = manifest_text(written)
    manifest = json.loads(text)
    arrow = manifest["schema"]["arrow"]
    manifest["schema"]["arrow"] = arrow[:8] + "!" + arrow[8:]
    with pytest.raises(manifest_check.Damaged, match=r'^"schema"."arrow" cannot be read \('):
        manifest_check.check_structure(manifest)


def test_the_structures_refusals_are_whole_lines(written):
    def said(change) -> str | None:
        return structure_refusal(written, lambda m, p: change(m))

    with pytest.raises(manifest_check.Damaged, match=r"^it holds list JSON, not an object$"):
        manifest_check.check_structure([recordmill.read_manifest(written[0])])
    assert said(lambda m: m.update(format_version="2")) == (
        '"format_version" is missing or not a number'
    )
    assert said(lambda m: m["schema"]["fields"].reverse()) == (
        '"schema"."fields" do not name the fields of "schema"."arrow"'
    )
    assert said(lambda m: m["tasks"][1].update(rows=-1)) == (
        'task entry 1: "rows" is -1, not a whole number'
    )
    try:
        manifest_check.decode_schema("AAAA")
    except Exception as e:  # pyarrow's own error for these bytes, on one line
        expected = f"{type(e).__name__}: {' '.join(str(e).split())}"
    assert said(lambda m: m["schema"].update(arrow="AAAA")) == (
        f'"schema"."arrow" cannot be read ({expected})'
    )


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_bytes_of_no_format_are_refused_with_pyarrows_error_on_one_line(fmt):
    data = b"not a file of any format\n" * 4
    try:
        if fmt == "arrow":
            pa.ipc.open_file(pa.BufferReader(data))
        else:
            pq.ParquetFile(pa.BufferReader(data))
    except Exception as e:
        error = f"{type(e).__name__}: {' '.join(str(e).split())}"
    kind = {"parquet": "a Parquet", "arrow": "an Arrow IPC"}[fmt]
    assert refused(data, fmt) == f"it cannot be read as {kind} file ({error})"


def test_each_listed_file_and_list_of_a_partition_is_checked_whole(written):
    """A partition's lists (group offsets and checksums, an older layout's batch checksums) hold
    one entry a row group, and the offsets and checksums one more (the footer); its row groups are at most
    its rows (one for an empty partition); every rejects file is a rejects file's name."""
    intact = recordmill.read_manifest(written[0])
    groups = _part(intact)["row_groups"]

    def said(change) -> str | None:
        return structure_refusal(written, change)

    def entries(key: str, count: int) -> list:
        return [[0]] * count if key == "batch_crc32" else [0] * count

    long_name = "x" * 100
    assert said(lambda m, p: p.update(file=long_name)) == (
        f'partition 0: "file" is "{"x" * 79}, not a partition file name'
    )
    for key, listed in [
        ("group_crc32c", groups + 1),
        ("batch_crc32", groups),
        ("group_offsets", groups + 1),
    ]:
        assert said(lambda m, p, k=key, n=listed: p.update({k: entries(k, n)})) is None
        wrong = said(lambda m, p, k=key, n=listed: p.update({k: entries(k, n + 1)}))
        assert wrong == f'partition 0: "{key}" lists {listed + 1}, {listed} expected'
    empty = {"rows": 0, "row_groups": 1, "group_offsets": [4, 8], "group_crc32c": [0, 0]}
    assert said(lambda m, p: p.update(empty)) is None
    assert said(
        lambda m, p: p.update(empty, row_groups=2, group_offsets=[4, 6, 8], group_crc32c=[0, 0, 0])
    ) == (f"partition 0: 2 row groups in {_part(intact)['bytes']:,} bytes")
    assert said(lambda m, p: p.update(row_groups=0, group_offsets=[4], group_crc32c=[0])) is None
    assert said(lambda m, p: m["rejects"].update(files=["/dev/zero"])) == (
        'a rejects file is "/dev/zero", not a rejects file name'
    )


def test_the_rejects_files_of_earlier_versions_are_checked_too(written):
    source, _ = written
    manifest = json.loads(json.dumps(recordmill.read_manifest(source)))
    manifest["history"] = [{"version": 1}, "not an entry", {"rejects": {"file": None}}]
    manifest_check.check_structure(manifest)  # nothing named: nothing to refuse
    manifest["history"].append({"rejects": {"file": "../secret.jsonl"}})
    with pytest.raises(manifest_check.Damaged) as caught:
        manifest_check.check_structure(manifest)
    assert str(caught.value) == 'a rejects file is "../secret.jsonl", not a rejects file name'


def test_a_damaged_key_is_named_by_its_path_and_a_long_value_cut_at_40(written):
    intact = recordmill.read_manifest(written[0])

    def said(change) -> str | None:
        return structure_refusal(written, change)

    # An optional key left out is passed over, and the keys after it are still checked.
    assert said(lambda m, p: (p.pop("row_groups"), p.update(values="x"))) == (
        f'partition 0 ({_part(intact)["file"]}): "values" is "x", not an object or null'
    )
    assert said(lambda m, p: m["schema"].pop("arrow")) == '"schema": "arrow" is missing'
    field = f"schema field 0 ({intact['schema']['fields'][0]['name']}): "
    for change, line in [
        (lambda m, p: m.update(schema=5), '"schema" is 5, not an object'),
        (
            lambda m, p: m.update(plugin={**m["plugin"], "options": 5}),
            '"plugin": "options" is 5, not an object',
        ),
        (lambda m, p: m.update(format=5), '"format" is 5, not a string'),
        (
            lambda m, p: m["schema"]["fields"][0].update(nullable="x"),
            f'{field}"nullable" is "x", not true or false',
        ),
        (
            lambda m, p: m["schema"]["fields"][0].update(shape="x"),
            f'{field}"shape" is "x", not a list',
        ),
    ]:
        assert said(change) == line
    assert said(lambda m, p: p.update(group_offsets=[1, -1])) == (
        f'partition 0 ({_part(intact)["file"]}): "group_offsets" is [1, -1], not a list of a '
        "whole number or null"
    )
    assert said(lambda m, p: p.update(rows="y" * 50)) == (
        f'partition 0 ({_part(intact)["file"]}): "rows" is "{"y" * 36}..., not a whole number'
    )
    assert said(lambda m, p: p.update(rows="y" * 38)) == (
        f'partition 0 ({_part(intact)["file"]}): "rows" is "{"y" * 38}", not a whole number'
    )
    assert said(lambda m, p: m["rejects"].update(file="r" * 100)) == (
        f'a rejects file is "{"r" * 79}, not a rejects file name'
    )
