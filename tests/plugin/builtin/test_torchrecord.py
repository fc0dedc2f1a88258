"""The torchrecord plugin on LMDB databases written by TorchRecord's own Writer with caffe2's
protobuf classes (tests/data/torchrecord/make.py), read back value by value."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest
from PIL import Image

import recordmill
from recordmill.errors import RecordmillError
from recordmill.kit import Source
from tests.conftest import REPO, read_dataset, run_writer, write_here

lmdb = pytest.importorskip("lmdb", reason='pip install "recordmill[torchrecord]"')

from recordmill.inputs import protobuf  # noqa: E402
from recordmill.inputs import torchrecord as tr  # noqa: E402
from recordmill.plugin.manager import load_plugin  # noqa: E402
from recordmill.plugin.options import plugin_options  # noqa: E402

DATA = REPO / "tests" / "data" / "torchrecord"
EXPECTED = json.loads((DATA / "expected.json").read_text())


def pixels(i, width, height):
    """Image i of make.py, [height, width, 3]."""
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([(x * 40 + i) % 256, y * 60 + i, np.full_like(x, 20 * i)], -1).astype(np.uint8)


def writer_rows(name):
    """The rows the Writer's databases hold, in its order (key 0, 1, ... 10), from expected.json
    (read back with caffe2's classes)."""
    rows = []
    for db, records in sorted(EXPECTED[name].items()):
        for key, (image, label) in sorted(records, key=lambda r: int(r[0])):
            width, height = image["dims"]
            array = np.frombuffer(bytes.fromhex(image["values"]), np.uint8)
            rows.append((db, key, array.reshape(height, width, 3), label))
    return rows


def test_the_writers_databases_are_read_value_by_value(tmp_path):
    summary = recordmill.write(
        "torchrecord",
        tmp_path / "out",
        options={"input": str(DATA / "rgb"), "tasks": 5},
        partitions=3,
        workers=2,
    )
    assert summary.manifest["total_rows"] == 24
    assert "rows straight to partitions" in summary.phases  # task_rows and the schema declared
    fields = {f["name"]: f for f in recordmill.read_manifest(tmp_path / "out")["schema"]["fields"]}
    assert fields["image"]["shape"] == [4, 6, 3] and fields["image"]["type"] == "uint8"
    assert fields["label"]["type"] == "int64"
    rows = list(recordmill.open(str(tmp_path / "out")))
    expected = writer_rows("rgb")
    assert [(r["database"], r["key"]) for r in rows] == [(db, key) for db, key, _, _ in expected]
    assert [r["key"] for r in rows[:12]] == [str(i) for i in range(12)]  # 10 after 9, not after 1
    for row, (_, _, array, label) in zip(rows, expected, strict=True):
        assert row["label"] == int(bytes.fromhex(label["values"]))
        np.testing.assert_array_equal(row["image"], array)
        # and the pixels are those of the image file the Writer read: image i has label i
        np.testing.assert_array_equal(row["image"], pixels(row["label"], 6, 4))
        assert (row["height"], row["width"], row["channels"]) == (4, 6, 3)
    assert sorted(r["label"] for r in rows) == list(range(24))


def test_every_data_type_is_decoded_as_caffe2_wrote_it():
    with tr.Database(str(DATA / "dtypes" / "db0")) as db:
        ((_, value),) = db.values(db.keys())
    tensors = tr.parse_tensor_protos(value)
    (record,) = EXPECTED["dtypes"]["db0"]
    assert len(tensors) == len(record[1]) == 13
    for tensor, want in zip(tensors, record[1], strict=True):
        assert tensor.type_name == want["type"] and tensor.dims == want["dims"]
        array = tensor.array()
        assert array.shape == tuple(want["dims"])
        if want["type"] == "BYTE":
            assert array.dtype == np.uint8 and array.tobytes() == bytes.fromhex(want["values"])
        elif want["type"] == "STRING":
            assert list(array) == [bytes.fromhex(v) for v in want["values"]]
        elif want["type"] == "FLOAT16":  # caffe2 keeps the 16 bits in int32_data
            assert array.view(np.uint16).tolist() == want["values"]
            assert array.tolist() == [1.5, -2.0, 65504.0]
        else:
            dtype = tr.DATA_TYPES[tensor.data_type][2]
            assert array.dtype == np.dtype(dtype)
            assert array.reshape(-1).tolist() == np.array(want["values"], dtype).tolist()
    assert tensors[0].array().dtype == np.float32 and tensors[9].array().dtype == np.int64
    assert tensors[-1].array().shape == () and int(tensors[-1].array()) == 42


def test_unpacked_repeated_fields_read_as_packed_ones():
    """proto2 writes dims unpacked (the fixtures hold that); a writer may also send the packed
    fields value by value, which protobuf parsers must accept."""
    key = protobuf.encode_varint
    unpacked = b"".join(key(1 << 3) + key(d) for d in (2,))  # dims [2]
    unpacked += key(2 << 3) + key(2)  # INT32
    unpacked += b"".join(key(4 << 3) + key(v & (2**64 - 1)) for v in (-3, 5))
    floats = key(1 << 3) + key(2) + key(2 << 3) + key(1)
    floats += b"".join(key(3 << 3 | 5) + np.float32(v).tobytes() for v in (0.5, -2.0))
    assert tr.parse_tensor(unpacked).array().tolist() == [-3, 5]
    packed = tr.encode_tensor(np.array([-3, 5], "i4"))
    assert packed != unpacked and tr.parse_tensor(packed).int32_data == [-3, 5]
    assert tr.parse_tensor(floats).array().tolist() == [0.5, -2.0]


def test_our_encoder_writes_the_bytes_protobuf_wrote():
    """The demo writer's records are byte for byte what caffe2's classes serialized."""
    for db, records in EXPECTED["rgb"].items():
        with tr.Database(str(DATA / "rgb" / db)) as opened:
            stored = dict(opened.values(opened.keys()))
        for key, (image, label) in records:
            width, height = image["dims"]
            array = np.frombuffer(bytes.fromhex(image["values"]), np.uint8)
            label_value = int(bytes.fromhex(label["values"]))
            made = tr.encode_record(array.reshape(height, width, 3), label_value)
            assert made == stored[key.encode()]


def test_other_sizes_and_an_int64_label(tmp_path):
    """mixed/: images of several sizes, the label an INT64 tensor (a data_process_func of one's
    own). Passthrough keeps one size, and says what to do; png and tensor take any."""
    mixed = DATA / "mixed"
    sizes = [(5, 3), (7, 4), (4, 4), (3, 6), (8, 2)]
    failed = run_writer(
        *("--script", "torchrecord", "--input", mixed, "--output", tmp_path / "a", "--quiet")
    )
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert "key '1' (record 1): the image is 7 x 4 pixels" in failed.stderr
    assert "--encode tensor --size S (or --size H W), or --encode png" in failed.stderr

    result = recordmill.write(
        "torchrecord", tmp_path / "png", options={"input": str(mixed / "db0"), "encode": "png"}
    )
    assert result.manifest["total_rows"] == 5
    rows = list(recordmill.open(str(tmp_path / "png")))
    assert [r["label"] for r in rows] == [i - 5 for i in range(5)]
    assert {r["database"] for r in rows} == {"db0"}
    for i, row in enumerate(rows):
        decoded = np.asarray(Image.open(io.BytesIO(row["data"])))
        np.testing.assert_array_equal(decoded, pixels(i, *sizes[i]))
        assert (row["width"], row["height"]) == sizes[i]

    recordmill.write(
        "torchrecord",
        tmp_path / "t",
        options={"input": str(mixed), "encode": "tensor", "size": [4]},
    )
    rows = list(recordmill.open(str(tmp_path / "t")))
    assert all(r["image"].shape == (4, 4, 3) for r in rows)
    np.testing.assert_array_equal(rows[2]["image"], pixels(2, 4, 4))  # already 4 x 4: untouched
    for i in (0, 1, 3, 4):  # the pipeline's resize, as for files
        want = tr_fit(pixels(i, *sizes[i]), 4)
        np.testing.assert_array_equal(rows[i]["image"], want)


def tr_fit(array, side):
    from recordmill.inputs import images

    return np.asarray(images.fit(Image.fromarray(array), (side, side), "shorter-side+center-crop"))


def test_tasks_are_databases_or_key_ranges():
    plugin = load_plugin("torchrecord")
    for tasks, count in ((1, 2), (5, 10), (100, 24)):
        options = plugin_options(plugin, {"input": str(DATA / "rgb"), "tasks": tasks})
        assert plugin.task_number(options) == count
        sizes = [plugin.task_rows(t, options) for t in range(count)]
        assert sum(sizes) == 24 and min(sizes) >= 1
        rows = (r for t in range(count) for r in plugin.dict_data(t, options))
        keys = [r["key"] for r in rows if not isinstance(r, Source)]
        assert keys == [str(i) for i in range(12)] * 2


def test_a_label_keeps_the_first_records_kind(tmp_path):
    """The first label has two values, so the column is a list: a later one-value label is a
    list of one there, not a scalar that fails the row."""
    image = np.zeros((2, 3, 3), np.uint8)
    labels = [np.array([1.5, 2.5], np.float32), np.array([7.0], np.float32), np.float32(3)]
    records = [
        tr.encode_tensor_protos(
            [tr.encode_tensor(image.tobytes(), tr.BYTE, [3, 2]), tr.encode_tensor(label)]
        )
        for label in labels
    ]
    tr.write_database(tmp_path / "db", records)
    recordmill.write("torchrecord", tmp_path / "out", options={"input": str(tmp_path / "db")})
    got = [r["label"].tolist() for r in recordmill.open(str(tmp_path / "out"))]
    assert got == [[1.5, 2.5], [7.0], [3.0]]


@pytest.fixture
def copied(tmp_path):
    shutil.copytree(DATA / "rgb", tmp_path / "rgb")
    return tmp_path / "rgb"


def run(copied, out, *more):
    return write_here(
        *("--script", "torchrecord", "--input", copied, "--output", out, "--quiet", *more)
    )


def one_error_line(stderr):
    lines = [line for line in stderr.splitlines() if line.startswith("recordmill: error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_a_corrupted_byte_is_named_or_skipped(copied, tmp_path):
    """A byte of record 3 in db1 changed: its image's dims say 7 x 4, its data holds 6 x 4."""
    path = copied / "db1" / "data.mdb"
    data = bytearray(path.read_bytes())
    ((image, _),) = [r[1] for r in EXPECTED["rgb"]["db1"] if r[0] == "3"]
    at = data.index(bytes.fromhex(image["values"]))
    head = bytes([0x08, 6, 0x08, 4, 0x10, 3, 0x2A, 72])  # dims 6, dims 4, BYTE, byte_data of 72
    assert data[at - len(head) : at] == head
    data[at - len(head) + 1] = 7
    path.write_bytes(bytes(data))
    line = one_error_line(run(copied, tmp_path / "a").stderr)
    assert f"{copied / 'db1'}: key '3' (record 3)" in line
    assert "dims [width 7, height 4] holds 72 bytes, not 84" in line
    assert run(copied, tmp_path / "b", "--on-bad-input", "skip").returncode == 0
    (reject,) = recordmill.read_rejects(tmp_path / "b")
    assert reject["source"] == f"{copied / 'db1'}:3" and "holds 72 bytes" in reject["reason"]
    assert sorted(read_dataset(tmp_path / "b")["label"].to_pylist()) == sorted(
        int(bytes.fromhex(r[1][1]["values"]))
        for db in ("db0", "db1")
        for r in EXPECTED["rgb"][db]
        if (db, r[0]) != ("db1", "3")
    )


def test_a_value_that_does_not_parse_is_named(copied, tmp_path):
    path = copied / "db0" / "data.mdb"
    data = bytearray(path.read_bytes())
    ((image, _),) = [r[1] for r in EXPECTED["rgb"]["db0"] if r[0] == "10"]
    at = data.index(bytes.fromhex(image["values"]))
    data[at - 1] = 100  # byte_data's length: past the end of its message
    path.write_bytes(bytes(data))
    with pytest.raises(RecordmillError) as raised:
        recordmill.write("torchrecord", tmp_path / "a", options={"input": str(copied)})
    assert "key '10' (record 10): field 5 runs past the end of the message" in str(raised.value)


def test_a_truncated_database_is_named_or_skipped(copied, tmp_path):
    path = copied / "db0" / "data.mdb"
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[: size - 5000])
    line = one_error_line(run(copied, tmp_path / "a").stderr)
    assert f"{path}: the file ends at byte {size - 5000}" in line and "truncated" in line
    assert run(copied, tmp_path / "b", "--on-bad-input", "skip").returncode == 0
    (reject,) = recordmill.read_rejects(tmp_path / "b")
    assert reject["source"] == str(copied / "db0") and "truncated" in reject["reason"]
    assert read_dataset(tmp_path / "b")["database"].to_pylist() == ["db1"] * 12


def test_a_file_that_is_not_lmdb_is_named(copied, tmp_path):
    (copied / "db1" / "data.mdb").write_bytes(b"not a database at all" * 1000)
    with pytest.raises(RecordmillError) as raised:
        recordmill.write("torchrecord", tmp_path / "a", options={"input": str(copied)})
    assert f"{copied / 'db1' / 'data.mdb'}: not a readable LMDB database" in str(raised.value)


def test_without_lmdb_the_error_says_what_to_install(tmp_path):
    fake = tmp_path / "site" / "lmdb"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no lmdb here')\n")
    # Said first, also when the input is not there either (demo-data skips it without lmdb).
    for given in (DATA / "rgb", tmp_path / "nosuch"):
        result = run_writer(
            *("--script", "torchrecord", "--input", given, "--output", tmp_path / "o"),
            env={"PYTHONPATH": str(tmp_path / "site")},
        )
        line = one_error_line(result.stderr)
        assert result.returncode != 0 and 'pip install "recordmill[torchrecord]"' in line


def test_the_demo_databases_read_back_exactly(tmp_path):
    tr.make_demo(tmp_path / "demo", np.random.default_rng(0))
    assert sum(f.stat().st_size for f in (tmp_path / "demo").rglob("*")) < 200_000
    recordmill.write("torchrecord", tmp_path / "out", options={"input": str(tmp_path / "demo")})
    rows = list(recordmill.open(str(tmp_path / "out")))
    assert len(rows) == 32 and rows[0]["image"].shape == (16, 24, 3)
    env = lmdb.open(str(tmp_path / "demo" / "db1"), readonly=True, lock=False)
    with env.begin() as txn:
        for row in rows[16:]:
            assert tr.encode_record(row["image"], row["label"]) == txn.get(row["key"].encode())
    env.close()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--verify"], "--verify has no effect with --encode passthrough: these images are"),
        (["--encode", "tensor", "--size", "4", "--no-draft"], "--no-draft has no effect"),
        (["--size", "4"], "--size has no effect with --encode passthrough"),
    ],
)
def test_an_image_option_that_does_nothing_is_an_error(tmp_path, flags, said):
    result = write_here(
        *("--script", "torchrecord", "--input", DATA / "rgb", "--output", tmp_path / "o", *flags)
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert said in lines[0]
