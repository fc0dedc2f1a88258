"""The tfrecord plugin on files written by an independent writer (the ``tfrecord`` package)."""

from __future__ import annotations

import numpy as np
import pytest

import recordmill
from recordmill.inputs import tfrecord as ours
from tests.conftest import REPO, read_dataset, run_writer, write_here

tfrecord = pytest.importorskip("tfrecord", reason="the independent writer: pip install tfrecord")


def write_file(path, start, count):
    writer = tfrecord.TFRecordWriter(str(path))
    for i in range(start, start + count):
        writer.write(
            {
                "image/encoded": (bytes([i % 256]) * (i + 1), "byte"),
                "image_class_label": (i - 3, "int"),
                "bbox": ([i * 0.5, -i * 0.25, 1.0], "float"),
            }
        )
    writer.close()


@pytest.fixture
def tfrecord_dir(tmp_path):
    folder = tmp_path / "tfr"
    folder.mkdir()
    write_file(folder / "train-0.tfrecord", 0, 5)
    write_file(folder / "train-1.tfrecord", 5, 4)
    (folder / "README.txt").write_text("not a record file")
    return folder


def test_features_become_columns(tfrecord_dir, tmp_path):
    out = tmp_path / "out"
    result = run_writer(
        "--script",
        "tfrecord",
        "--input",
        tfrecord_dir,
        "--output",
        out,
        "--workers",
        "2",
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    table = read_dataset(out)
    assert table["image_class_label"].to_pylist() == [i - 3 for i in range(9)]
    assert table["image_encoded"].to_pylist() == [bytes([i]) * (i + 1) for i in range(9)]
    assert np.allclose(table["bbox"].to_pylist()[4], [2.0, -1.0, 1.0])
    fields = {f["name"]: f for f in recordmill.read_manifest(out)["schema"]["fields"]}
    assert fields["bbox"] == {
        "name": "bbox",
        "type": "float32",
        "shape": [-1],
        "layout": "list",
        "nullable": False,
    }
    assert fields["image_class_label"]["type"] == "int64"


def test_our_crc_matches_the_reference(tfrecord_dir):
    data = (tfrecord_dir / "train-0.tfrecord").read_bytes()
    assert ours.masked_crc(data[:8]) == int.from_bytes(data[8:12], "little")
    assert ours.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value


def test_a_damaged_record_is_named_or_skipped(tfrecord_dir, tmp_path):
    path = tfrecord_dir / "train-1.tfrecord"
    data = bytearray(path.read_bytes())
    data[16 + 2] ^= 0xFF  # a byte inside the first record's data
    path.write_bytes(bytes(data))
    result = write_here(
        "--script", "tfrecord", "--input", tfrecord_dir, "--output", tmp_path / "o", "--quiet"
    )
    assert result.returncode == 1
    assert "train-1.tfrecord: record 0 at byte 0: the data's CRC does not match" in result.stderr
    result = write_here(
        "--script",
        "tfrecord",
        "--input",
        tfrecord_dir,
        "--output",
        tmp_path / "o",
        "--on-bad-input",
        "skip",
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    assert read_dataset(tmp_path / "o")["image_class_label"].to_pylist() == [
        i - 3 for i in range(9) if i != 5
    ]
    (reject,) = recordmill.read_rejects(tmp_path / "o")
    assert reject["source"].endswith("train-1.tfrecord:0")


def test_a_record_that_does_not_parse_is_named_or_skipped(tmp_path):
    """Valid CRCs around bytes that are no tf.train.Example (field 1 announces 255 bytes, none
    follow): one line naming file, record and offset, or a reject (it was a traceback)."""
    path = tmp_path / "bad.tfrecord"
    good = ours.encode_example({"label": 7})
    ours.write_records(path, [b"\x0a\xff", good])
    common = ["--script", "tfrecord", "--input", path, "--quiet"]
    failed = write_here(*common, "--output", tmp_path / "fail")
    assert failed.returncode == 1
    assert "Traceback" not in failed.stderr
    (line,) = [x for x in failed.stderr.splitlines() if x.startswith("recordmill: error:")]
    assert f"{path}: record 0 at byte 0: not a tf.train.Example message" in line
    assert "--on-bad-input skip" in line
    skipped = write_here(*common, "--output", tmp_path / "skip", "--on-bad-input", "skip")
    assert skipped.returncode == 0, skipped.stderr
    (reject,) = recordmill.read_rejects(tmp_path / "skip")
    assert reject["source"] == f"{path}:0"
    assert "record 0 at byte 0: not a tf.train.Example message" in reject["reason"]
    assert read_dataset(tmp_path / "skip")["label"].to_pylist() == [7]


def test_a_truncated_file_is_named(tfrecord_dir, tmp_path):
    path = tfrecord_dir / "train-0.tfrecord"
    path.write_bytes(path.read_bytes()[:-7])
    result = write_here(
        "--script", "tfrecord", "--input", path, "--output", tmp_path / "o", "--quiet"
    )
    assert result.returncode == 1
    assert "record 4 at byte" in result.stderr and "truncated" in result.stderr


def test_the_pure_python_crc_is_the_same(monkeypatch):
    data = bytes(range(256)) * 3
    fast = ours.crc32c(data)
    monkeypatch.setattr(ours, "_crc32c", None)
    assert ours.crc32c(data) == fast


TF_FILES = REPO / "tests" / "data" / "tfrecord"  # written by TensorFlow itself: see make.py there


def expected_tf_rows():
    return [
        {
            "label": i,
            "image_encoded": bytes([i]) * i,
            "score": [0.0] if i == 0 else [i / 2, -float(i)],
            "extra": None if i < 3 else [7, i],
        }
        for i in range(12)
    ]


@pytest.mark.parametrize("kind", ["none", "gzip", "zlib"])
def test_files_tensorflow_wrote_are_read_value_by_value(tmp_path, kind):
    """No .gz in the names: the compression is told from the bytes. The schema is inferred from
    more than the first record: score has one value in record 0 and two after (a list column);
    extra is missing from the first records (nullable)."""
    out = tmp_path / "out"
    result = write_here(
        *("--script", "tfrecord", "--input", TF_FILES / f"tf-{kind}.tfrecord", "--output", out),
        *("--partitions", "1", "--quiet"),
    )
    assert result.returncode == 0, result.stderr
    rows = [
        {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in row.items()}
        for row in recordmill.open(str(out))
    ]
    assert rows == expected_tf_rows()


def test_a_compressed_file_read_as_plain_says_how_to_read_it(tmp_path):
    result = write_here(
        *("--script", "tfrecord", "--input", TF_FILES / "tf-gzip.tfrecord"),
        *("--output", tmp_path / "out", "--compression-type", "none", "--quiet"),
    )
    assert result.returncode == 1
    assert "--compression-type gzip or zlib" in result.stderr


@pytest.mark.parametrize("kind", ["gzip", "zlib"])
def test_a_damaged_compressed_file_is_a_reject_with_skip(tmp_path, kind):
    """Damage inside a compressed stream is an error naming the file, or a reject with skip
    (it was an unhandled BadGzipFile)."""
    data = bytearray((TF_FILES / f"tf-{kind}.tfrecord").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.tfrecord").write_bytes(bytes(data))
    (tmp_path / "in" / "b.tfrecord").write_bytes((TF_FILES / "tf-none.tfrecord").read_bytes())
    common = ["--script", "tfrecord", "--input", tmp_path / "in", "--quiet"]
    failed = write_here(*common, "--output", tmp_path / "fail")
    assert failed.returncode == 1
    # The stream's own check, or (a flip that still inflates) the record's CRC, catches it.
    assert "damaged" in failed.stderr and "a.tfrecord" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert failed.stderr.count("--on-bad-input skip") == 1
    skipped = write_here(*common, "--output", tmp_path / "skip", "--on-bad-input", "skip")
    assert skipped.returncode == 0, skipped.stderr
    rejects = recordmill.read_rejects(tmp_path / "skip")
    assert rejects and all("damaged" in r["reason"] for r in rejects)
    labels = recordmill.open(str(tmp_path / "skip")).to_arrow()["label"].to_pylist()
    assert labels.count(11) == 1 and len(labels) >= 12  # b whole, a up to the damage


def test_a_list_where_the_schema_has_one_value_names_the_fix(tmp_path):
    schema = tmp_path / "schema.yaml"
    schema.write_text(
        "label: int64\nimage/encoded: bytes\nscore: float32\nextra:\n  type: int64\n  shape: [-1]\n  nullable: true\n"
    )
    result = write_here(
        *("--script", "tfrecord", "--input", TF_FILES / "tf-none.tfrecord", "--schema", schema),
        *("--output", tmp_path / "out", "--quiet"),
    )
    assert result.returncode == 1
    assert "record 1" in result.stderr and "holds 2 values for feature 'score'" in result.stderr
    assert "score: {type: float32, shape: [-1]}" in result.stderr


def test_an_empty_file_is_one_error_line_naming_schema(tmp_path):
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    result = write_here(
        "--script", "tfrecord", "--input", tmp_path / "empty.tfrecord", "--output", tmp_path / "o"
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("recordmill: error:")]
    assert "holds no records to take the schema from; pass --schema" in line


def test_a_pattern_for_a_file_input_is_an_error(tfrecord_dir, tmp_path):
    file = next(tfrecord_dir.iterdir())
    result = write_here(
        *("--script", "tfrecord", "--input", file, "--pattern", "*.rec", "--output", tmp_path / "o")
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert f"--pattern *.rec has no effect: --input {file} is a file" in lines[0]
