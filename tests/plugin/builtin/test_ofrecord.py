"""The ofrecord plugin on part files written by Google's protobuf runtime with OneFlow's own
record.proto (tests/data/ofrecord/make.py; ``expected.json`` is what protobuf reads back)."""

from __future__ import annotations

import io
import json
import shutil
import struct

import numpy as np
import pytest
from PIL import Image

import recordmill
from recordmill.errors import InputError, RecordmillError
from recordmill.inputs import ofrecord
from recordmill.inputs.protobuf import ProtobufError
from tests.conftest import REPO, run_writer, write_here

DATA = REPO / "tests" / "data" / "ofrecord"
EXPECTED = json.loads((DATA / "expected.json").read_text())
COLUMNS = {"offset/ns": "offset_ns"}


def expected_rows(*files: str) -> list[dict]:
    """The rows the plugin should make of ``files``, from what protobuf read: one value where
    every record holds one, else the list; None for a feature a record lacks."""
    records = [record for f in files for record in EXPECTED[f]]
    names = {name for record in records for name in record}
    single = {n for n in names if all(len(r.get(n, [0, [0]])[1]) == 1 for r in records)}
    rows = []
    for record in records:
        row = {}
        for name in names:
            if name not in record:
                row[COLUMNS.get(name, name)] = None
                continue
            kind, values = record[name]
            if kind == "bytes_list":
                values = [bytes.fromhex(v) for v in values]
            row[COLUMNS.get(name, name)] = values[0] if name in single else values
        rows.append(row)
    return rows


def dataset_rows(out) -> list[dict]:
    return [
        {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in row.items()}
        for row in recordmill.open(str(out))
    ]


def write(*args, process=False):
    """``recordmill write --script ofrecord ARGS``, for what the command line shows (in this
    process, or with ``process`` as ``python writer.py``)."""
    run = run_writer if process else write_here
    return run("--script", "ofrecord", *map(str, args), "--quiet")


def convert(out, on_bad_input="fail", **options):
    """The same run in this process (faster): ``recordmill.write``."""
    options = {k: str(v) if k in ("input", "schema") else v for k, v in options.items()}
    return recordmill.write(
        "ofrecord", out, options=options, on_bad_input=on_bad_input, progress=False
    )


def test_the_reader_reads_what_protobuf_wrote_packed_and_unpacked():
    """part-0's number lists are packed (as OneFlow declares them), part-1's are not: the
    same values either way."""
    packed, unpacked = (DATA / "kinds" / p for p in ("part-0", "part-1"))
    assert packed.read_bytes() != unpacked.read_bytes()
    for name in ("kinds/part-0", "kinds/part-1", "mnist/part-0", "mnist/part-1"):
        got = []
        for _, _, data in ofrecord.records(DATA / name):
            got.append(
                {
                    feature: [
                        f"{kind}_list",
                        [v.hex() for v in values] if kind == "bytes" else values.tolist(),
                    ]
                    for feature, (kind, values) in ofrecord.parse_ofrecord(data).items()
                }
            )
        assert got == EXPECTED[name], name


def test_our_writer_writes_what_protobuf_writes():
    """Each packed record parsed and encoded again is the same bytes (the demo data's writer)."""
    for name in ("kinds/part-0", "mnist/part-0"):
        for _, _, data in ofrecord.records(DATA / name):
            assert ofrecord.encode_ofrecord(ofrecord.parse_ofrecord(data)) == data


def test_every_kind_becomes_a_column(tmp_path):
    out = tmp_path / "out"
    result = write("--input", DATA / "kinds", "--output", out, "--workers", "2", process=True)
    assert result.returncode == 0, result.stderr
    assert dataset_rows(out) == expected_rows("kinds/part-0", "kinds/part-1")
    fields = {f["name"]: f for f in recordmill.read_manifest(out)["schema"]["fields"]}
    kinds = {n: (f["type"], f.get("shape"), f["nullable"]) for n, f in fields.items()}
    assert kinds == {
        "name": ("bytes", None, False),
        "tokens": ("bytes", [-1], False),
        "score": ("float32", None, False),
        "bbox": ("float32", [-1], False),
        "weight": ("float64", [-1], False),  # one value in some records, two in others
        "label": ("int32", None, False),
        "ids": ("int32", [-1], False),
        "offset_ns": ("int64", [-1], False),
        "extra": ("int64", [-1], True),  # absent from most records
    }


def test_mnist_images_and_labels(tmp_path):
    out = tmp_path / "out"
    convert(out, input=DATA / "mnist")
    rows = dataset_rows(out)
    assert rows == expected_rows("mnist/part-0", "mnist/part-1")
    assert [r["labels"] for r in rows] == [(i * 7) % 10 for i in range(7)]
    fields = {f["name"]: f["type"] for f in recordmill.read_manifest(out)["schema"]["fields"]}
    assert fields == {"images": "bytes", "labels": "int32"}


def test_an_image_field_goes_through_the_image_pipeline(tmp_path):
    out = tmp_path / "out"
    convert(out, input=DATA / "mnist", image_field="images", encode="tensor", size=[28])
    rows = list(recordmill.open(str(out)))
    assert set(rows[0]) == {"labels", "image", "height", "width", "channels"}
    for row, want in zip(rows, expected_rows("mnist/part-0", "mnist/part-1"), strict=True):
        pixels = np.asarray(Image.open(io.BytesIO(want["images"])).convert("RGB"))
        assert np.array_equal(row["image"], pixels) and row["labels"] == want["labels"]


def test_a_bad_image_is_named_or_a_reject(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    good = ofrecord.parse_ofrecord(next(ofrecord.records(DATA / "mnist" / "part-0"))[2])
    bad = {"images": ("bytes", [b"not an image"]), "labels": ("int32", [3])}
    ofrecord.write_records(
        folder / "part-0", [ofrecord.encode_ofrecord(r) for r in (good, bad, good)]
    )
    common = ("--input", folder, "--image-field", "images", "--encode", "png")
    failed = write(*common, "--output", tmp_path / "fail")
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert "bad image file" in failed.stderr and "part-0:1" in failed.stderr
    convert(tmp_path / "skip", "skip", input=folder, image_field="images", encode="png")
    assert [r["labels"] for r in recordmill.open(str(tmp_path / "skip"))] == [0, 0]
    (reject,) = recordmill.read_rejects(tmp_path / "skip")
    assert reject["source"].endswith("part-0:1")


def damaged_copy(tmp_path, name: str, damage) -> tuple:
    """A copy of a fixture folder whose ``name`` file is changed by ``damage(bytearray)``."""
    folder = tmp_path / "in"
    shutil.copytree(DATA / name.split("/")[0], folder)
    path = folder / name.split("/")[1]
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(damage(data)))
    return folder, path


def offsets(path) -> list[int]:
    return [offset for _, offset, _ in ofrecord.records(path)]


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith("recordmill: error:")]
    return line


@pytest.mark.parametrize("cut", ["data", "length"])
def test_a_truncated_file_is_named_or_a_reject(tmp_path, cut):
    third = offsets(DATA / "mnist" / "part-1")[2]
    end = -10 if cut == "data" else third + 3  # inside the last record, or inside its length
    folder, path = damaged_copy(tmp_path, "mnist/part-1", lambda d: d[:end])
    failed = write("--input", folder, "--output", tmp_path / "fail")
    assert failed.returncode == 1
    line = one_error_line(failed.stderr)
    assert f"{path}: record 2 at byte {third}: " in line and "truncated" in line
    convert(tmp_path / "skip", "skip", input=folder)
    labels = [r["labels"] for r in recordmill.open(str(tmp_path / "skip"))]
    assert labels == [(i * 7) % 10 for i in range(6)]  # all but the cut record
    (reject,) = recordmill.read_rejects(tmp_path / "skip")
    assert reject["source"] == str(path) and f"record 2 at byte {third}" in reject["reason"]


def test_a_damaged_length_is_named(tmp_path):
    second = offsets(DATA / "kinds" / "part-0")[1]

    def damage(data):
        data[second + 5] = 0x7F  # a length of terabytes: not read, not allocated
        return data

    folder, path = damaged_copy(tmp_path, "kinds/part-0", damage)
    failed = write("--input", folder, "--output", tmp_path / "fail")
    assert failed.returncode == 1
    line = one_error_line(failed.stderr)
    assert f"{path}: record 1 at byte {second}: the record's length is" in line


def test_a_record_that_does_not_parse_is_named_or_a_reject(tmp_path):
    """The record's first byte becomes 0x0f (field 1, wire type 7): protobuf refuses it too
    (make.py checks). The length is intact, so the records after it are read."""
    second = offsets(DATA / "kinds" / "part-0")[1]

    def damage(data):
        data[second + 8] = 0x0F
        return data

    folder, path = damaged_copy(tmp_path, "kinds/part-0", damage)
    failed = write("--input", folder, "--output", tmp_path / "fail")
    assert failed.returncode == 1
    line = one_error_line(failed.stderr)
    assert f"{path}: record 1 at byte {second}: not an OFRecord message" in line
    convert(tmp_path / "skip", "skip", input=folder)
    want = expected_rows("kinds/part-0", "kinds/part-1")
    assert dataset_rows(tmp_path / "skip") == want[:1] + want[2:]
    (reject,) = recordmill.read_rejects(tmp_path / "skip")
    assert reject["source"] == f"{path}:1" and "wire type 7" in reject["reason"]


def test_a_feature_of_the_wrong_wire_type_does_not_parse():
    with pytest.raises(ProtobufError, match="wire type 0"):
        ofrecord.parse_ofrecord(b"\x08\x01")  # field 1 as a varint, not a map entry
    record = ofrecord.encode_ofrecord({"x": ("float", [1.0, 2.0])})
    with pytest.raises(ProtobufError):
        ofrecord.parse_ofrecord(record[:-3])  # cut inside the packed floats


def test_a_schema_file_sets_the_types(tmp_path):
    schema = tmp_path / "schema.yaml"
    schema.write_text("images: bytes\nlabels: int64\n")
    out = tmp_path / "out"
    convert(out, input=DATA / "mnist", schema=schema)
    fields = {f["name"]: f["type"] for f in recordmill.read_manifest(out)["schema"]["fields"]}
    assert fields == {"images": "bytes", "labels": "int64"}
    assert dataset_rows(out) == expected_rows("mnist/part-0", "mnist/part-1")
    schema.write_text("images: bytes\n")
    with pytest.raises(RecordmillError, match="has feature 'labels', which the schema lacks"):
        convert(tmp_path / "o2", input=DATA / "mnist", schema=schema)


def test_the_demo_data_reads_back(tmp_path):
    ofrecord.make_demo(tmp_path / "demo", np.random.default_rng(0))
    assert sum(f.stat().st_size for f in (tmp_path / "demo").iterdir()) < 200_000
    out = tmp_path / "out"
    convert(out, input=tmp_path / "demo")
    rows = list(recordmill.open(str(out)))
    assert [r["id"] for r in rows] == list(range(40))
    for row in rows:
        image = np.asarray(Image.open(io.BytesIO(row["images"])))
        assert int(np.argmax(image[14])) in range(1 + 2 * row["labels"], 6 + 2 * row["labels"])
        assert row["scores"].dtype == np.float32 and row["scores"].shape == (10,)


def test_a_negative_length_is_refused_with_its_name(tmp_path):
    (tmp_path / "part-0").write_bytes(struct.pack("<q", -1))
    with pytest.raises(InputError, match="part-0: record 0 at byte 0: the record's length is -1"):
        convert(tmp_path / "out", input=tmp_path / "part-0")


def test_zeroed_bytes_make_no_rows(tmp_path):
    """512 zero bytes from the second record on: a length of 0 (OneFlow writes none) is damage,
    not an empty record to make a row of None values from."""
    second = offsets(DATA / "mnist" / "part-1")[1]

    def damage(data):
        data[second : second + 512] = bytes(512)
        return data

    folder, path = damaged_copy(tmp_path, "mnist/part-1", damage)
    failed = write("--input", folder, "--output", tmp_path / "fail")
    line = one_error_line(failed.stderr)
    assert failed.returncode == 1 and f"{path}: record 1 at byte {second}: " in line
    convert(tmp_path / "skip", "skip", input=folder)
    rows = dataset_rows(tmp_path / "skip")
    assert len(rows) == len(offsets(DATA / "mnist" / "part-0")) + 1  # part-0, then record 0
    assert all(value is not None for row in rows for value in row.values())
    (reject,) = recordmill.read_rejects(tmp_path / "skip")
    assert f"record 1 at byte {second}: the record's length is 0" in reject["reason"]


def test_a_message_of_zeroed_fields_does_not_parse():
    with pytest.raises(ProtobufError, match="field numbered 0"):
        ofrecord.parse_ofrecord(b"\x0a\x00" + bytes(6))  # an empty feature entry, then zeros
    with pytest.raises(ProtobufError, match="holds no feature"):
        ofrecord.parse_ofrecord(b"")


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--size", "8"], "--size has no effect without --image-field FEATURE"),
        (["--image-field", "images", "--size", "8"], "--size has no effect with --encode"),
    ],
)
def test_an_image_option_that_does_nothing_is_an_error(tmp_path, flags, said):
    result = write_here(
        *("--script", "ofrecord", "--input", DATA / "mnist", "--output", tmp_path / "o", *flags)
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert said in lines[0]
