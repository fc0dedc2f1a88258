"""A MindRecord file damaged in each way the reader names, converted with the mindrecord plugin
(``recordmill.write("mindrecord", ...)`` in this process): the run fails with the line that names
the damage, and writes nothing. Files are written by our MindRecord writer, then changed: a byte
run of a row's raw data replaced by one of the same length, or the header (JSON, rewritten in its
place) made to declare what the bytes are not."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import recordmill
from recordmill.errors import SKIP_HINT
from recordmill.inputs import mindrecord_writer as mw


def convert(path, tmp_path) -> str:
    out = tmp_path / "out"
    with pytest.raises(recordmill.RecordmillError) as caught:
        recordmill.write("mindrecord", out, options={"input": str(path)}, workers=0)
    assert not out.exists()
    text = str(caught.value)
    assert "\n" not in text
    return text.removesuffix(f" {SKIP_HINT}")  # where a damage is skipped: said once, tested once


def one_row(tmp_path, schema, row, rows=1):
    path = tmp_path / "x.mindrecord"
    mw.write_dataset(path, schema, [row] * rows)
    return path


def set_header(path, change) -> None:
    """Rewrite the header JSON in its place (the header's room is larger than its text)."""
    data = bytearray(path.read_bytes())
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(bytes(data[8 : 8 + length]))
    change(header)
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) + 8 <= header["header_size"]
    data[: 8 + max(length, len(text))] = struct.pack("<Q", len(text)) + text.ljust(length, b" ")
    path.write_bytes(bytes(data))


def declare(path, schema=None, blob_fields=None) -> None:
    def change(header):
        if schema is not None:
            header["schema"][0]["schema"] = schema
        if blob_fields is not None:
            header["schema"][0]["blob_fields"] = blob_fields

    set_header(path, change)


A_ONE = mw.packb({"a": 1})  # the raw data of a row {"a": 1}: b"\x81\xa1a\x01"

RAW = {  # raw bytes of A_ONE's length -> the damage they are named by
    b"\x93\x01\x02\x03": "the raw data is a msgpack list, not a map",
    b"\x82\xa1a\x01": "the msgpack data ends early",
    b"\x01\x02\x03\x04": "3 bytes after the msgpack value",
    b"\x81\xa1a\xcd": "the msgpack data ends inside a number",
    b"\x81\xa1a\xd9": "the msgpack data ends inside a length",
    b"\x81\xa1a\xa5": "a msgpack str of 5 bytes runs past the data's end",
}


@pytest.mark.parametrize("raw", sorted(RAW), ids=lambda r: RAW[r].split()[-1])
def test_damaged_raw_data_is_named(tmp_path, raw):
    path = one_row(tmp_path, {"a": {"type": "int64"}}, {"a": 1})
    data = path.read_bytes()
    assert data.count(A_ONE) == 1 and len(raw) == len(A_ONE)
    path.write_bytes(data.replace(A_ONE, raw))
    line = convert(path, tmp_path)
    assert "x.mindrecord: row 0 (raw data at byte " in line
    assert line.endswith(f"{RAW[raw]} (damaged)")


SCALARS = [  # (what the bytes hold, what the header declares, the line)
    ({"a": "x"}, {"a": {"type": "int32"}}, "field 'a' (int32) holds 'x'"),
    ({"a": "x"}, {"a": {"type": "float64"}}, "field 'a' (float64) holds 'x'"),
    ({"a": 5}, {"a": {"type": "string"}}, "field 'a' (string) holds 5"),
    ({"a": 5}, {"a": {"type": "int64"}, "b": {"type": "int64"}}, "the raw data lacks field 'b'"),
]


@pytest.mark.parametrize(("row", "declared", "line"), SCALARS, ids=[s[2] for s in SCALARS])
def test_a_raw_value_of_another_type_is_named(tmp_path, row, declared, line):
    kinds = {str: "string", int: "int64"}
    path = one_row(tmp_path, {k: {"type": kinds[type(v)]} for k, v in row.items()}, row)
    declare(path, declared)
    assert convert(path, tmp_path).endswith(f"{line} (damaged)")


BLOBS = [  # (the blob field's bytes, the fields declared, the blob fields, the line)
    (b"\0" * 6, {"b": {"type": "float32", "shape": [-1]}}, ["b"], "6 bytes are not whole float32s"),
    (
        np.zeros(3, np.float32).tobytes(),
        {"b": {"type": "float32", "shape": [2, 2]}},
        ["b"],
        "field 'b' holds 3 values, not shape [2, 2]",
    ),
    (
        b"\0" * 4,
        {"b": {"type": "bytes"}, "c": {"type": "bytes"}},
        ["b", "c"],
        "the blob ends before all its fields",
    ),
    (
        (100).to_bytes(8, "big"),
        {"b": {"type": "bytes"}, "c": {"type": "bytes"}},
        ["b", "c"],
        "a blob field of 100 bytes runs past the blob's end",
    ),
    (
        b"\0" * 19,
        {"b": {"type": "bytes"}, "c": {"type": "bytes"}},
        ["b", "c"],
        "3 bytes after the blob's fields",
    ),
    (
        b"\0\0",
        {"b": {"type": "int32", "shape": [-1]}},
        ["b"],
        "a compressed integer array shorter than its count",
    ),
    (
        b"\0\0\0\x08\0",
        {"b": {"type": "int32", "shape": [-1]}},
        ["b"],
        "a compressed array of 8 integers ends in its bitmap",
    ),
    (
        b"\0\0\0\x01\0",
        {"b": {"type": "int32", "shape": [-1]}},
        ["b"],
        "a compressed array of 1 integers needs 6 bytes and has 5",
    ),
]


@pytest.mark.parametrize(("blob", "declared", "fields", "line"), BLOBS, ids=[b[3] for b in BLOBS])
def test_a_blob_of_another_shape_is_named(tmp_path, blob, declared, fields, line):
    path = one_row(tmp_path, {"b": {"type": "bytes"}}, {"b": blob})
    declare(path, declared, fields)
    assert convert(path, tmp_path).endswith(f"{line} (damaged)")


def test_a_page_that_holds_more_or_fewer_rows_than_its_header_says_is_named(tmp_path):
    path = one_row(tmp_path, {"a": {"type": "int64"}}, {"a": 1}, rows=2)

    def rows_in_blob_page(count):
        def change(header):
            page = next(p for p in header["page"] if p["page_type"] == "BLOB_DATA")
            page["end_row_id"] = page["start_row_id"] + count

        return change

    intact = path.read_bytes()
    set_header(path, rows_in_blob_page(3))
    assert "x.mindrecord: rows 0..2, blob page 0, row 2 at byte " in convert(path, tmp_path)
    assert convert(path, tmp_path).endswith(": the page ends early")
    path.write_bytes(intact)
    set_header(path, rows_in_blob_page(1))
    line = convert(path, tmp_path)
    assert "x.mindrecord: rows 0..0, blob page 0 at byte " in line
    assert line.endswith(" bytes after its 1 rows (damaged)")


def test_a_file_shorter_than_its_header_is_named(tmp_path):
    path = one_row(tmp_path, {"a": {"type": "int64"}}, {"a": 1})
    intact = path.read_bytes()
    path.write_bytes(intact[:5])
    assert convert(path, tmp_path).endswith(
        "x.mindrecord: header at byte 0: the file ends before its header"
    )
    (length,) = struct.unpack_from("<Q", intact, 0)
    path.write_bytes(intact[: 8 + length // 2])
    assert convert(path, tmp_path).endswith(
        f"x.mindrecord: header at byte 8: the file ends inside the header (truncated: "
        f"{length // 2} of {length} bytes)"
    )


def test_a_field_of_a_type_mindrecord_has_not_is_named(tmp_path):
    path = one_row(tmp_path, {"a": {"type": "int64"}}, {"a": 1})
    declare(path, {"a": {"type": "int8"}})
    assert "x.mindrecord: header at byte 8: field 'a' has type 'int8', not one of int32" in (
        convert(path, tmp_path)
    )


def test_a_folder_without_mindrecord_files_or_a_shard_missing_is_named(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "notes.txt").write_text("no shard")
    assert convert(folder, tmp_path).endswith(
        f"--input {folder} holds no MindRecord file (x.mindrecord[N])"
    )
    mw.write_dataset(folder / "s.mindrecord", {"a": {"type": "int64"}}, [{"a": 1}] * 4, 2)
    (folder / "s.mindrecord1").unlink()
    line = convert(folder / "s.mindrecord0", tmp_path)
    assert line.endswith(
        f"{folder / 's.mindrecord0'}: its header lists shards s.mindrecord0, s.mindrecord1; "
        f"missing: {folder / 's.mindrecord1'}"
    )


def test_shards_of_other_fields_or_fields_of_one_column_are_named(tmp_path):
    folder = tmp_path / "in"
    mw.write_dataset(folder / "a.mindrecord", {"a": {"type": "int64"}}, [{"a": 1}])
    mw.write_dataset(folder / "b.mindrecord", {"b": {"type": "int64"}}, [{"b": 1}])
    assert convert(folder, tmp_path).endswith(
        f"--input {folder}: {folder / 'b.mindrecord'} has other fields than "
        f"{folder / 'a.mindrecord'} (b vs a); give one dataset, or a folder holding one"
    )
    path = one_row(tmp_path, {"a": {"type": "int64"}, "b": {"type": "int64"}}, {"a": 1, "b": 2})
    declare(path, {"a-b": {"type": "int64"}, "a.b": {"type": "int64"}})  # another writer's names
    assert convert(path, tmp_path).endswith("fields 'a-b' and 'a.b' both become column 'a_b'")


def test_pages_per_task_below_zero_is_refused(tmp_path):
    path = one_row(tmp_path, {"a": {"type": "int64"}}, {"a": 1})
    out = tmp_path / "out"
    options = {"input": str(path), "pages_per_task": -1}
    with pytest.raises(
        recordmill.RecordmillError, match=r"^plugin mindrecord: --pages-per-task must be 0 or more"
    ):
        recordmill.write("mindrecord", out, options=options, workers=0)


def test_our_writer_refuses_a_header_or_a_row_larger_than_its_room(tmp_path):
    with pytest.raises(ValueError, match=r"^the header needs \d+ bytes; raise header_size$"):
        mw.write_dataset(
            tmp_path / "h.mindrecord", {"a": {"type": "int64"}}, [{"a": 1}], header_size=64
        )
    with pytest.raises(ValueError, match=r"^row 1 does not fit in a page of 64 bytes$"):
        rows = [{"b": b"x"}, {"b": b"x" * 100}]
        mw.write_dataset(tmp_path / "p.mindrecord", {"b": {"type": "bytes"}}, rows, page_size=64)
