"""The recordio plugin on files MXNet 1.9.1 itself wrote (tests/data/recordio, see make.py there;
MXNet is not needed to run these tests): every value is compared with what MXNet's own reader
read back from them (expected.json)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import struct

import numpy as np
import pytest

import recordmill
from recordmill import Reject
from recordmill.errors import InputError
from recordmill.inputs import recordio
from recordmill.kit import Source
from recordmill.plugin.options import Options
from tests.conftest import REPO, run_writer, write_here

DATA = REPO / "tests" / "data" / "recordio"
EXPECTED = json.loads((DATA / "expected.json").read_text())
_spec = importlib.util.spec_from_file_location(
    "recordio_plugin", REPO / "plugins/recordio/plugin.py"
)
plugin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plugin)


def options(*args, on_bad_input="fail"):
    """The plugin's options from these flags, and recordmill's bad-input policy, as hooks get them."""
    parser = argparse.ArgumentParser()
    plugin.add_options(parser)
    values = vars(parser.parse_args([str(a) for a in args]))
    return Options(values, on_bad_input=on_bad_input)


def rows_of(opts):
    """Every task's rows, in task order, as the engine would take them (without the Sources
    that name their file)."""
    tasks = range(plugin.task_number(opts))
    return [row for t in tasks for row in plugin.dict_data(t, opts) if not isinstance(row, Source)]


def assert_rows_match(rows, name, dtype=np.float32):
    """Rows against what MXNet read: index = id, label = flag labels (or the one label), image."""
    expected = EXPECTED[name]
    assert len(rows) == len(expected)
    for row, want in zip(rows, expected, strict=True):
        assert row["index"] == want["id"]
        assert row["data"] == bytes.fromhex(want["data"])
        labels = want["label"] if want["flag"] else [want["label"]]
        got = np.atleast_1d(row["label"])
        assert got.dtype == dtype and got.tolist() == np.float32(labels).tolist()


def copy(tmp_path, *names):
    folder = tmp_path / "in"
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(DATA / name, folder / name)
    return folder


@pytest.mark.parametrize("name", ["im2rec.rec", "multi.rec", "det.rec"])
@pytest.mark.parametrize("tasks", [1, 2, 3, 5, 9])
def test_image_records_mxnet_wrote_are_read_in_any_split(tmp_path, name, tasks):
    """With the .idx (ranges of its entries) and without (byte ranges: each task finds its first
    record; the records MXNet split around the magic number must not be taken for starts)."""
    for use_index in (True, False):
        opts = options(
            "--input", DATA / name, "--tasks", tasks, *([] if use_index else ["--no-index"])
        )
        assert_rows_match(rows_of(opts), name)
        counts = [plugin.task_rows(t, opts) for t in range(plugin.task_number(opts))]
        if use_index and name != "det.rec":  # det.rec has no .idx
            assert sum(counts) == len(EXPECTED[name]) and len(counts) == min(tasks, sum(counts))
        else:
            assert set(counts) == {None}


def test_the_label_shape_is_the_files(tmp_path):
    assert plugin.schema(options("--input", DATA / "im2rec.rec"))["label"] == {"type": "float32"}
    assert plugin.schema(options("--input", DATA / "multi.rec"))["label"] == {
        "type": "float32",
        "shape": [3],
    }
    # Widths 7, 12, 0 (one label in the header) and 2: a list.
    assert plugin.schema(options("--input", DATA / "det.rec"))["label"]["shape"] == [-1]
    # The widths of every file are seen: det.rec's, then multi.rec's 3.
    folder = copy(tmp_path, "multi.rec", "det.rec")
    opts = options("--input", folder, "--no-index")
    assert plugin.schema(opts)["label"]["shape"] == [-1]
    rows = rows_of(opts)
    assert [r["label"].tolist() for r in rows] == [
        w["label"] if w["flag"] else [w["label"]]
        for w in EXPECTED["det.rec"] + EXPECTED["multi.rec"]
    ]


def test_raw_records_mxnet_wrote(tmp_path):
    """Empty records, padding, the magic alone, unaligned and trailing magics, in every split."""
    want = [bytes.fromhex(r["data"]) for r in EXPECTED["raw.rec"]]
    # Offsets by the format: 8-byte headers, data padded to 4; a magic at an aligned position
    # costs a header instead of its 4 bytes (record 5: two empty parts; record 8: four parts).
    offsets = [0, 8, 20, 32, 44, 56, 72, 96, 116, 152]
    for tasks in range(1, 14):
        rows = rows_of(options("--input", DATA / "raw.rec", "--no-image-header", "--tasks", tasks))
        assert [r["data"] for r in rows] == want
        assert [r["offset"] for r in rows] == offsets


def test_our_writer_writes_the_bytes_mxnet_wrote():
    """encode_record and pack, our demo writer, against MXNet's files byte for byte."""
    raw = b"".join(recordio.encode_record(bytes.fromhex(r["data"])) for r in EXPECTED["raw.rec"])
    assert raw == (DATA / "raw.rec").read_bytes()
    for name in ("im2rec.rec", "multi.rec", "det.rec"):
        packed = [
            recordio.pack(r["label"], r["id"], bytes.fromhex(r["data"]), r["id2"])
            for r in EXPECTED[name]
        ]
        assert b"".join(map(recordio.encode_record, packed)) == (DATA / name).read_bytes()
    offsets = [int(o) for _, o in EXPECTED["idx"]["im2rec.idx"]]
    assert [o for _, o in recordio.read_index(DATA / "im2rec.idx")] == offsets


def test_a_run_writes_partitions_straight_from_the_indexed_rows(tmp_path):
    out = tmp_path / "out"
    result = run_writer(
        *("--script", "recordio", "--input", DATA / "im2rec.rec", "--tasks", "2"),
        *("--output", out, "--partitions", "2", "--quiet"),
    )
    assert result.returncode == 0, result.stderr
    assert "rows straight to partitions" in result.stdout
    # float32 scalars come back as numpy float32, as the manifest says.
    assert_rows_match(list(recordmill.open(str(out))), "im2rec.rec", dtype=np.float32)
    fields = {f["name"]: f for f in recordmill.read_manifest(out)["schema"]["fields"]}
    assert fields["label"]["type"] == "float32" and fields["index"]["type"] == "int64"


def test_images_go_through_the_image_pipeline():
    """--encode tensor decodes the PNG records as MXNet's unpack_img did (pixel for pixel)."""
    opts = options("--input", DATA / "multi.rec", "--encode", "tensor", "--size", 6, 8)
    assert plugin.schema(opts)["image"] == {"type": "uint8", "shape": [6, 8, 3]}
    rows = rows_of(opts)
    assert [r["image"].tolist() for r in rows] == [w["rgb"] for w in EXPECTED["multi.rec"]]
    opts = options("--input", DATA / "im2rec.rec", "--encode", "png")
    assert [(r["height"], r["width"]) for r in rows_of(opts)] == [(6, 8)] * 6


def test_int_labels_must_be_whole_numbers():
    rows = rows_of(options("--input", DATA / "im2rec.rec", "--label-type", "int32"))
    assert [r["label"] for r in rows] == [w["label"] for w in EXPECTED["im2rec.rec"]]
    assert rows[1]["label"].dtype == np.int32
    with pytest.raises(InputError, match=r"multi.rec: record 0 at byte 0: label \[0.0, 0.5"):
        rows_of(options("--input", DATA / "multi.rec", "--label-type", "int64"))


def test_a_label_width_that_does_not_hold_names_the_fix():
    with pytest.raises(InputError, match="record 1 at byte 280 has 12 labels where the schema"):
        rows_of(options("--input", DATA / "det.rec", "--label-width", 7))
    rows = rows_of(options("--input", DATA / "det.rec", "--label-width", 7, on_bad_input="skip"))
    assert [type(r) for r in rows] == [dict, Reject, Reject, Reject]


def test_raw_records_read_as_images_say_what_to_do():
    with pytest.raises(
        InputError, match=r"raw\.rec: record 0 at byte 0: 0 bytes, too short.*--no-image-header"
    ):
        rows_of(options("--input", DATA / "raw.rec"))


def damaged(tmp_path, change, *names):
    folder = copy(tmp_path, *names)
    path = folder / names[0]
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(change(data)))
    return folder, path


def flip_magic_of_record_2(data):
    data[1004 + 1] ^= 0xFF  # record 2 starts at byte 1004 (im2rec.idx)
    return data


def test_a_corrupted_byte_is_named_or_skipped(tmp_path):
    folder, path = damaged(tmp_path, flip_magic_of_record_2, "im2rec.rec", "im2rec.idx")
    common = ["--script", "recordio", "--input", folder, "--quiet"]
    failed = write_here(*common, "--output", tmp_path / "fail")
    assert failed.returncode == 1
    (line,) = [x for x in failed.stderr.splitlines() if x.startswith("recordmill: error:")]
    assert f"{path}: record 2 at byte 1004: no record header" in line and "damaged" in line
    assert "passed over" not in line  # a run that fails passes nothing over
    assert "Traceback" not in failed.stderr
    skipped = write_here(*common, "--output", tmp_path / "skip", "--on-bad-input", "skip")
    assert skipped.returncode == 0, skipped.stderr
    rows = list(recordmill.open(str(tmp_path / "skip")))
    assert [r["index"] for r in rows] == [100, 101, 103, 104, 105]
    (reject,) = recordmill.read_rejects(tmp_path / "skip")
    assert reject["source"] == f"{path}:2"
    assert "bytes 1004 to 1256 passed over" in reject["reason"]


def test_a_corrupted_byte_without_the_index_skips_to_the_next_record_start(tmp_path):
    folder, path = damaged(tmp_path, flip_magic_of_record_2, "im2rec.rec")
    with pytest.raises(InputError) as failed:
        rows_of(options("--input", folder))
    assert "record 2 at byte 1004: no record header" in str(failed.value)
    assert "passed over" not in str(failed.value)
    rows = rows_of(options("--input", folder, on_bad_input="skip"))
    assert [type(r) for r in rows] == [dict, dict, Reject, dict, dict, dict]
    assert rows[2].source == f"{path}:2" and "bytes 1004 to 1256 passed over" in rows[2].reason
    assert [r["index"] for r in rows if isinstance(r, dict)] == [100, 101, 103, 104, 105]


def test_a_length_that_runs_over_the_next_record_is_named_or_skipped(tmp_path):
    """Record 0's length (bytes 4-7) made 256 bytes longer: its data would take record 1's
    header. Without the .idx only the header inside its data tells."""

    def longer_record_0(data):
        lrecord = struct.unpack_from("<I", data, 4)[0]
        struct.pack_into("<I", data, 4, lrecord + 256)
        return data

    folder, path = damaged(tmp_path, longer_record_0, "im2rec.rec")
    with pytest.raises(
        InputError, match=rf"{path}: record 0 at byte 0: its length \(\d+ bytes\) runs over"
    ):
        rows_of(options("--input", folder))
    rows = rows_of(options("--input", folder, on_bad_input="skip"))
    assert [type(r) for r in rows] == [Reject, dict, dict, dict, dict, dict]
    assert [r["index"] for r in rows[1:]] == [101, 102, 103, 104, 105]


def test_an_id_past_int64_is_named_or_skipped(tmp_path):
    def id_top_byte_flipped(data):
        data[8 + 8 + 7] ^= 0xFF  # record 0's IRHeader id (after magic, lrecord, flag, label)
        return data

    folder, path = damaged(tmp_path, id_top_byte_flipped, "im2rec.rec", "im2rec.idx")
    with pytest.raises(InputError, match=rf"{path}: record 0 at byte 0: its header's id \d+ is"):
        rows_of(options("--input", folder))
    rows = rows_of(options("--input", folder, on_bad_input="skip"))
    assert type(rows[0]) is Reject and [r["index"] for r in rows[1:]] == [101, 102, 103, 104, 105]


def test_a_truncated_file_is_named_or_skipped(tmp_path):
    folder, path = damaged(tmp_path, lambda d: d[:-5], "im2rec.rec", "im2rec.idx")
    common = ["--script", "recordio", "--input", folder, "--quiet"]
    failed = write_here(*common, "--output", tmp_path / "fail")
    assert failed.returncode == 1
    (line,) = [x for x in failed.stderr.splitlines() if x.startswith("recordmill: error:")]
    assert f"{path}: record 5 at byte 2292: the file ends inside the record" in line
    assert "truncated" in line and "Traceback" not in failed.stderr
    skipped = write_here(*common, "--output", tmp_path / "skip", "--on-bad-input", "skip")
    assert skipped.returncode == 0, skipped.stderr
    assert len(list(recordmill.open(str(tmp_path / "skip")))) == 5
    (reject,) = recordmill.read_rejects(tmp_path / "skip")
    assert reject["source"] == f"{path}:5" and "truncated" in reject["reason"]


def test_a_file_cut_inside_a_record_in_parts_names_the_part(tmp_path):
    folder, _ = damaged(tmp_path, lambda d: d[:1314], "im2rec.rec")
    with pytest.raises(
        InputError,
        match=r"record 3 at byte 1256: the file ends inside the record \(its part at byte 1304\)",
    ):
        rows_of(options("--input", folder))


def test_an_index_that_does_not_match_is_named(tmp_path):
    folder = copy(tmp_path, "multi.rec")
    (folder / "multi.idx").write_text("0\t0\n1\t264\n2\t530\n3\t796\n4\t1060\n")
    with pytest.raises(
        InputError,
        match=r"multi\.rec: record 2 at byte 528: the file has a record there, its index has byte 530",
    ):
        rows_of(options("--input", folder))
    assert len(rows_of(options("--input", folder, "--no-index"))) == 5
    folder = copy(tmp_path / "other", "multi.rec")  # another path: the plan is cached by path
    (folder / "multi.idx").write_text("0\t0\n1\tx\n")
    with pytest.raises(InputError, match=r"multi\.idx:2: '1\\tx' is not an index line"):
        plugin.task_number(options("--input", folder))


def test_the_demo_files_read_back(tmp_path):
    recordio.make_demo(tmp_path / "demo", np.random.default_rng(0))
    opts = options("--input", tmp_path / "demo", "--encode", "tensor", "--size", 24, 32)
    rows = rows_of(opts)
    assert plugin.schema(opts)["label"]["shape"] == [-1]  # widths 1 (train) and 2 (val)
    assert [r["index"] for r in rows] == [1000 + i for i in range(20)] + [
        2000 + i for i in range(20)
    ]
    assert [r["label"].tolist() for r in rows[:20]] == [[i % 4] for i in range(20)]
    assert [r["label"].tolist() for r in rows[20:]] == [[i % 4, i / 2] for i in range(20)]
    # The class colour survives: channel label % 3 is the brightest.
    colours = [int(r["image"].mean((0, 1)).argmax()) for r in rows]
    assert colours == [i % 4 % 3 for i in range(20)] * 2
    for name in ("train.rec", "val.rec"):  # record 7 holds the magic: written in parts
        data = (tmp_path / "demo" / name).read_bytes()
        flags = []
        pos = 0
        while pos < len(data):
            _, lrecord = struct.unpack_from("<II", data, pos)
            flags.append(lrecord >> 29)
            pos += 8 + recordio.padded(lrecord & recordio.LENGTH_MASK)
        assert flags.count(1) == 1 and flags.count(3) == 1
    assert sum(f.stat().st_size for f in (tmp_path / "demo").iterdir()) < 200_000


def test_an_index_given_as_input_is_pointed_to_its_rec(tmp_path):
    result = write_here(
        "--script", "recordio", "--input", DATA / "im2rec.idx", "--output", tmp_path / "o"
    )  # fmt: skip
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("recordmill: error:")]
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"give the .rec it indexes ({DATA / 'im2rec.rec'})" in line


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--no-image-header", "--label-width", "2"], "--label-width has no effect with"),
        (["--no-image-header", "--encode", "png"], "--encode has no effect with --no-image-header"),
        (["--size", "8"], "--size has no effect with --encode passthrough"),
        (["--pattern", "*.x"], "--pattern *.x has no effect: --input"),
    ],
)
def test_an_option_that_does_nothing_is_an_error(tmp_path, flags, said):
    result = write_here(
        *("--script", "recordio", "--input", DATA / "raw.rec", "--output", tmp_path / "o", *flags)
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert said in lines[0]
