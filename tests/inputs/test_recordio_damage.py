"""RecordIO files (MXNet's .rec and .idx) damaged in each way the reader names, converted with
the recordio plugin in this process: one line naming the file, the record and the damage."""

from __future__ import annotations

import struct

import pytest

import recordmill
from recordmill.errors import SKIP_HINT
from recordmill.inputs import recordio

PAYLOADS = [recordio.pack(float(i), i, bytes([i]) * 12) for i in range(3)]


def refused(tmp_path, **options) -> str:
    out = tmp_path / "out"
    options = {"input": str(tmp_path / "in" / "a.rec"), **options}
    with pytest.raises(recordmill.RecordmillError) as caught:
        recordmill.write("recordio", out, options=options, workers=0, progress=False)
    assert not out.exists()
    text = str(caught.value)
    assert "\n" not in text
    return text.removesuffix(f" {SKIP_HINT}")


def rec(tmp_path, payloads=PAYLOADS, keys=None):
    (tmp_path / "in").mkdir(exist_ok=True)
    path = tmp_path / "in" / "a.rec"
    recordio.write_records(path, payloads, keys)
    return path


def test_a_file_that_ends_inside_a_record_header_is_named(tmp_path):
    path = rec(tmp_path)
    size = path.stat().st_size
    path.write_bytes(path.read_bytes() + recordio.MAGIC_BYTES + b"\0")
    line = refused(tmp_path, no_image_header=True)
    assert line.startswith(f"task 0 failed: {path}: record 3 at byte {size}: the file ends inside")
    assert line.endswith("the file ends inside a record header (truncated) at row 3")


def test_a_record_that_starts_with_a_later_part_is_named(tmp_path):
    path = rec(tmp_path)
    data = bytearray(path.read_bytes())
    (lrecord,) = struct.unpack_from("<I", data, 4)
    struct.pack_into("<I", data, 4, 2 << 29 | lrecord)  # the first record says: a middle part
    path.write_bytes(bytes(data))
    line = refused(tmp_path, no_image_header=True, no_index=True)
    assert f"{path}: record 0 at byte 0: part flag 2 where 0 or 1 should be (damaged file)" in line


def test_a_length_that_runs_over_the_next_header_is_named(tmp_path):
    path = rec(tmp_path)
    data = bytearray(path.read_bytes())
    (lrecord,) = struct.unpack_from("<I", data, 4)
    length = lrecord & recordio.LENGTH_MASK
    struct.pack_into("<I", data, 4, length + 8)  # takes in the next record's header
    path.write_bytes(bytes(data))
    line = refused(tmp_path, no_image_header=True)
    assert (
        f"{path}: record 0 at byte 0: its length ({length + 8} bytes) runs over the next "
        "record's header: a damaged length"
    ) in line


def test_an_index_that_gives_two_keys_one_offset_or_one_past_the_end_is_named(tmp_path):
    path = rec(tmp_path, keys=[0, 1, 2])
    index = tmp_path / "in" / "a.idx"
    index.write_text("0\t0\n1\t0\n")
    assert refused(tmp_path).endswith(f"{index}: key '1' has the offset 0 of another key")
    size = path.stat().st_size
    index.write_text(f"0\t0\n1\t{size}\n")
    assert refused(tmp_path).endswith(
        f"{index}: offset {size} is past the end of {path} ({size} bytes); --no-index reads the "
        ".rec alone"
    )


def test_an_image_header_that_does_not_fit_the_record_is_named(tmp_path):
    rec(tmp_path, [b"\0" * 10])
    line = refused(tmp_path, label_width=1)
    assert "10 bytes, too short for the 24-byte image header" in line
    rec(tmp_path, [struct.pack(recordio.IR_FORMAT, 5, 0.0, 0, 0)])
    line = refused(tmp_path, label_width=1)
    assert "the image header announces 5 labels, more than the record's 24 bytes hold" in line


def test_a_label_width_of_zero_is_refused(tmp_path):
    rec(tmp_path)
    assert refused(tmp_path, label_width=0).endswith(
        "--label-width must be -1 or at least 1, got 0"
    )
