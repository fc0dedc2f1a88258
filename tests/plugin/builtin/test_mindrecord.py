"""The mindrecord plugin on files MindSpore's own FileWriter wrote (tests/data/mindrecord, see
make.py there), on our demo writer's files, and, when mindspore imports, on fresh ones."""

from __future__ import annotations

import importlib.util
import shutil
import struct
from dataclasses import replace

import numpy as np
import pytest

import recordmill
from recordmill.inputs import mindrecord as mr
from recordmill.inputs import mindrecord_writer as mw
from tests.conftest import REPO, run_writer, write_here

DATA = REPO / "tests" / "data" / "mindrecord"
_spec = importlib.util.spec_from_file_location("mindrecord_make", DATA / "make.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)


def plain(value):
    """A value as recordmill reads it back (numpy arrays as nested lists)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def written(out):
    return [{k: plain(v) for k, v in row.items()} for row in recordmill.open(str(out))]


def expected(row):
    return {k: plain(v) for k, v in row.items()}


def convert(*args, process=False):
    """A run that must succeed: in this process, or with ``process`` as ``python writer.py``."""
    result = (run_writer if process else write_here)("--script", "mindrecord", *args, "--quiet")
    assert result.returncode == 0, result.stderr
    return result


def test_every_type_mindspore_wrote_is_read_value_by_value(tmp_path):
    """One shard over two blob pages and two row groups of a raw page; one task per page, rows
    written straight to the partitions (the header gives each task's row count)."""
    out = tmp_path / "out"
    result = convert(
        *("--input", DATA / "all_types.mindrecord", "--output", out, "--pages-per-task", "1"),
        *("--partitions", "2", "--workers", "2"),
        process=True,
    )
    assert "straight to partitions" in result.stdout
    header = mr.read_header(DATA / "all_types.mindrecord")
    assert len(header.blob_pages) == 2 and header.compressed_ints
    rows = written(out)
    assert rows == [expected(make.all_types_row(i)) for i in range(make.ALL_TYPES_ROWS)]
    assert isinstance(rows[5]["f32"], float) and rows[5]["f32"] == float(np.float32(5 / 3))
    fields = {f["name"]: f for f in recordmill.read_manifest(out)["schema"]["fields"]}
    assert {n: (f["type"], f.get("shape")) for n, f in fields.items()} == {
        n: (s["type"], s.get("shape")) for n, s in make.ALL_TYPES_SCHEMA.items()
    }


def test_any_shard_or_the_folder_reads_every_shard(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for k in range(3):
        shutil.copy(DATA / f"shards.mindrecord{k}", folder)
    (folder / "notes.txt").write_text("not a shard")
    shards = [str(folder / f"shards.mindrecord{k}") for k in range(3)]
    for given in (folder, *shards):  # the header of any shard lists them all
        assert mr.shard_paths(given) == shards
    out = tmp_path / "out"
    convert("--input", folder / "shards.mindrecord1", "--output", out, "--workers", "1")
    rows = written(out)
    assert sorted(r["id"] for r in rows) == list(range(make.SHARDS_ROWS))
    for row in rows:
        assert row == expected(make.shards_row(row["id"]))
    # shard by shard, each in the order MindSpore wrote its rows
    counts = [mr.read_header(path).rows for path in shards]
    assert sum(counts) == make.SHARDS_ROWS and min(counts) > 0
    starts = np.cumsum([0, *counts])
    for k in range(3):
        ids = [r["id"] for r in rows[starts[k] : starts[k + 1]]]
        assert ids == sorted(ids)


def test_our_integer_compression_is_mindsporess():
    """The blob of a shard whose only blob field is an int64 array is that array compressed."""
    header = mr.read_header(DATA / "shards.mindrecord0")
    page = header.blob_pages[0]
    data = (DATA / "shards.mindrecord0").read_bytes()[header.header_size :]
    (length,) = struct.unpack_from("<Q", data, 0)
    first_id = next(mr.rows(header))[1]["id"]
    assert data[8 : 8 + length] == mw.compress_ints(make.shards_row(first_id)["tokens"])
    assert page["start_row_id"] == 0
    edge = np.array([0, -1, 127, -128, 128, -129, 2**15, -(2**31), 2**31, -(2**63), 2**63 - 1])
    assert mr.uncompress_ints(mw.compress_ints(edge)).tolist() == edge.tolist()


def test_a_missing_shard_is_named(tmp_path):
    shutil.copy(DATA / "shards.mindrecord0", tmp_path)
    shutil.copy(DATA / "shards.mindrecord2", tmp_path)
    result = write_here(
        *("--script", "mindrecord", "--input", tmp_path / "shards.mindrecord0"),
        *("--output", tmp_path / "out", "--workers", "1", "--quiet"),
    )
    assert result.returncode == 1
    assert "missing:" in result.stderr and "shards.mindrecord1" in result.stderr


def skip_run(path, out):
    """The same input with --on-bad-input skip, in this process (faster than a second run)."""
    recordmill.write(
        "mindrecord", str(out), options={"input": str(path)}, workers=1, on_bad_input="skip"
    )
    return written(out), recordmill.read_rejects(out)


def one_error_line(result):
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("recordmill: error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_truncated_shard_is_named_or_skipped(tmp_path):
    path = tmp_path / "all_types.mindrecord"
    path.write_bytes((DATA / "all_types.mindrecord").read_bytes()[:-5000])
    header = mr.read_header(path)
    last = header.blob_pages[-1]
    common = ["--script", "mindrecord", "--input", path, "--workers", "1", "--quiet"]
    line = one_error_line(write_here(*common, "--output", tmp_path / "fail"))
    at = header.header_size + last["page_id"] * header.page_size
    assert f"all_types.mindrecord: BLOB_DATA page {last['page_id']} at byte {at}" in line
    assert "the file ends inside the page (truncated" in line
    rows, (reject,) = skip_run(path, tmp_path / "skip")
    assert rows == [expected(make.all_types_row(i)) for i in range(85)]
    assert reject["source"].endswith(f"all_types.mindrecord:page {last['page_id']}")
    assert "truncated" in reject["reason"]


def test_a_damaged_length_is_named_or_skipped(tmp_path):
    """A corrupted byte in a row's length: its page's rows cannot be told apart."""
    path = tmp_path / "all_types.mindrecord"
    data = bytearray((DATA / "all_types.mindrecord").read_bytes())
    header = mr.read_header(DATA / "all_types.mindrecord")
    data[header.header_size + 3] ^= 0x40  # row 0's uint64 length, in blob page 0
    path.write_bytes(bytes(data))
    common = ["--script", "mindrecord", "--input", path, "--workers", "1", "--quiet"]
    line = one_error_line(write_here(*common, "--output", tmp_path / "fail"))
    assert f"rows 0..84, blob page 0, row 0 at byte {header.header_size}" in line
    assert "runs past the page's end" in line
    rows, (reject,) = skip_run(path, tmp_path / "skip")
    assert rows == [expected(make.all_types_row(i)) for i in range(85, make.ALL_TYPES_ROWS)]
    assert reject["source"].endswith("all_types.mindrecord:page 0")


def test_a_damaged_row_is_named_or_skipped(tmp_path):
    """A corrupted msgpack type byte spoils one row, the others of its page are read."""
    path = tmp_path / "all_types.mindrecord"
    data = bytearray((DATA / "all_types.mindrecord").read_bytes())
    header = mr.read_header(DATA / "all_types.mindrecord")
    raw_page = next(p for p in header.pages if p["page_type"] == "RAW_DATA")
    raw_at = header.header_size + raw_page["page_id"] * header.page_size
    (first,) = struct.unpack_from("<Q", data, raw_at)
    second = raw_at + 8 + first  # row 1's raw data
    data[second + 8] = 0xC1  # its map's type byte: a byte msgpack never uses
    path.write_bytes(bytes(data))
    common = ["--script", "mindrecord", "--input", path, "--workers", "1", "--quiet"]
    line = one_error_line(write_here(*common, "--output", tmp_path / "fail"))
    assert f"all_types.mindrecord: row 1 (raw data at byte {second}, blob at byte" in line
    assert "msgpack type byte 0xc1" in line
    rows, (reject,) = skip_run(path, tmp_path / "skip")
    assert [r["id"] for r in rows] == [
        make.all_types_row(i)["id"] for i in range(make.ALL_TYPES_ROWS) if i != 1
    ]
    assert reject["source"].endswith("all_types.mindrecord:1")


def test_a_damaged_header_is_named(tmp_path):
    path = tmp_path / "x.mindrecord"
    data = bytearray((DATA / "all_types.mindrecord").read_bytes())
    data[8] = ord("[")  # the header's JSON no longer parses
    path.write_bytes(bytes(data))
    line = one_error_line(
        write_here(
            *("--script", "mindrecord", "--input", path, "--output", tmp_path / "o"),
            *("--workers", "1"),
        )
    )
    assert "x.mindrecord: header at byte 8: not a MindRecord header" in line


def test_versions_compare_as_numbers():
    """Int arrays are compressed from format version 3.0 on: 10.0 too, 2.9 not."""
    header = mr.Header("x", {"a": {"type": "int64", "shape": [-1]}}, ("a",), (), 0, 0, "3.0", ())
    versions = ("2.9", "3.0", "3.1", "10.0", "")
    compressed = {v: replace(header, version=v).compressed_ints for v in versions}
    assert compressed == {"2.9": False, "3.0": True, "3.1": True, "10.0": True, "": False}
    assert mr.version_numbers("10.0") > mr.version_numbers("3.0") == (3, 0)


def test_the_demo_writer_is_read_back_exactly(tmp_path):
    """Our writer (make_demo) writes what MindSpore's FileReader reads (checked once with
    mindspore 2.10, and below when it imports); our reader gives back every value, from a
    folder that holds the .db files too."""
    mw.make_demo(tmp_path / "demo", np.random.default_rng(0))
    assert sorted(p.name for p in (tmp_path / "demo").iterdir()) == [
        "demo.mindrecord0",
        "demo.mindrecord0.db",
        "demo.mindrecord1",
        "demo.mindrecord1.db",
    ]
    out = tmp_path / "out"
    convert("--input", tmp_path / "demo", "--output", out, "--workers", "1")
    rows = written(out)
    assert rows == [expected(r) for r in mw.demo_rows(np.random.default_rng(0))]
    assert rows[0]["data"][:2] == b"\xff\xd8"  # JPEG bytes stay bytes


def test_schemas_without_blob_or_raw_fields(tmp_path):
    """MindSpore writes a 4-byte dummy blob when no field is a blob, and a dummy raw map when
    every field is one; both read as the fields alone."""
    scalars = [{"id": i, "x": np.float32(i / 3), "s": "é" * i} for i in range(5)]
    mw.write_dataset(
        tmp_path / "s.mindrecord",
        {"id": {"type": "int64"}, "x": {"type": "float32"}, "s": {"type": "string"}},
        scalars,
    )
    blobs = [{"b": bytes([i]) * i} for i in range(5)]
    mw.write_dataset(tmp_path / "b.mindrecord", {"b": {"type": "bytes"}}, blobs)
    for name, rows in (("s", scalars), ("b", blobs)):
        got = [r for _, r, _ in mr.rows(mr.read_header(tmp_path / f"{name}.mindrecord"))]
        assert [expected(r) for r in got] == [expected(r) for r in rows]


def test_fresh_files_from_mindspore_are_read_value_by_value(tmp_path):
    """Two shards of every type; no blob field (a dummy blob); only a blob field (a dummy raw
    map)."""
    pytest.importorskip(
        "mindspore.mindrecord",
        reason="mindspore is not installed here (pip install mindspore in another venv; "
        "tests/data/mindrecord holds files it wrote)",
    )
    all_types = [make.all_types_row(i) for i in range(30)]
    make.write("all.mindrecord", 2, make.ALL_TYPES_SCHEMA, all_types, 7, tmp_path)
    scalars = [{"id": i, "x": i / 4} for i in range(9)]
    make.write(
        "s.mindrecord", 1, {"id": {"type": "int64"}, "x": {"type": "float64"}}, scalars, 9, tmp_path
    )
    blobs = [{"b": bytes([i]) * (i + 1)} for i in range(6)]  # FileWriter drops an empty b""
    make.write("b.mindrecord", 1, {"b": {"type": "bytes"}}, blobs, 6, tmp_path)

    def read(path):
        return [expected(r) for p in mr.shard_paths(path) for _, r, _ in mr.rows(mr.read_header(p))]

    by_id = sorted(read(tmp_path / "all.mindrecord1"), key=lambda r: r["id"])
    assert by_id == sorted(map(expected, all_types), key=lambda r: r["id"])
    assert read(tmp_path / "s.mindrecord") == scalars
    assert read(tmp_path / "b.mindrecord") == blobs
