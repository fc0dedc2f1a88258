"""Every run script works as it is, on the demo data it makes on first use."""

from __future__ import annotations

import os
import subprocess

import pytest

import recordmill
import recordmill.formats.demo
from tests.conftest import REPO

SCRIPTS = {
    "template": 400,
    "imagenet": 24,
    "filelist": 18,
    "mnist": 300,
    "csv": 200,
    "tfrecord": 100,
    "mindrecord": 40,
    "recordio": 40,
    "ofrecord": 40,
    "torchrecord": 32,
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo") / "data"
    recordmill.formats.demo.make_demo_data(folder)
    return folder


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_run_script(name, demo, tmp_path):
    if name == "torchrecord":
        pytest.importorskip("lmdb", reason="the torchrecord plugin needs recordmill[torchrecord]")
    out = tmp_path / name
    result = subprocess.run(
        ["bash", str(REPO / "run_scripts" / f"run_{name}.sh"), "--quiet"],
        env={**os.environ, "DEMO": str(demo), "OUTPUT": str(out)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert recordmill.read_manifest(out)["total_rows"] == SCRIPTS[name]
    _source_check(name, demo, out)


def _rows(out):
    return list(recordmill.open(str(out)))


def _source_check(name, demo, out):
    """The dataset holds what the demo inputs hold, value by value, read with other code."""
    import csv
    import gzip

    import numpy as np

    rows = _rows(out)
    if name == "imagenet":
        for row in rows:
            assert row["data"] == (demo / "images" / row["file_name"]).read_bytes()
            assert row["synset"] == row["file_name"].split("/")[0]
        synsets = sorted({r["synset"] for r in rows})
        assert all(r["label"] == synsets.index(r["synset"]) for r in rows)
    elif name == "filelist":
        listed = {}
        for lst in demo.glob("images_*.lst"):
            for line in lst.read_text().splitlines():
                _, label, path = line.split("\t")
                listed[path] = int(float(label))
        assert {r["file_name"]: r["label"] for r in rows}.items() <= listed.items()
    elif name == "mnist":
        labels = gzip.decompress((demo / "mnist" / "train-labels-idx1-ubyte.gz").read_bytes())[8:]
        pixels = gzip.decompress((demo / "mnist" / "train-images-idx3-ubyte.gz").read_bytes())
        images = np.frombuffer(pixels[16:], np.uint8).reshape(-1, 28, 28)
        assert [r["label"] for r in rows] == list(labels[: len(rows)])
        assert all((r["image"] == images[i]).all() for i, r in enumerate(rows))
    elif name == "csv":
        with open(demo / "table.csv", newline="") as f:
            source = list(csv.DictReader(f))
        assert [(r["id"], r["text"], r["label"]) for r in rows] == [
            (int(s["id"]), s["text"], int(s["label"])) for s in source
        ]
        assert all(
            abs(r["score"] - float(s["score"])) < 1e-6 for r, s in zip(rows, source, strict=True)
        )
    elif name == "tfrecord":
        from tfrecord.reader import tfrecord_loader  # the independent reader

        source = [
            record
            for path in sorted((demo / "tfrecord").glob("*.tfrecord"))
            for record in tfrecord_loader(str(path), None)
        ]
        assert [r["image_class_label"] for r in rows] == [
            int(s["image/class/label"][0]) for s in source
        ]
        assert [r["image_encoded"] for r in rows] == [bytes(s["image/encoded"]) for s in source]
        assert all(
            np.allclose(r["image_bbox"], s["image/bbox"]) for r, s in zip(rows, source, strict=True)
        )
    elif name == "mindrecord":
        from recordmill.formats.mindrecord import demo_rows

        # The demo's rows as generated (demo.py seeds them with 1), in any shard order.
        made = {r["id"]: r for r in demo_rows(np.random.default_rng(1))}
        assert sorted(r["id"] for r in rows) == sorted(made)
        for row in rows:
            source = made[row["id"]]
            assert row["data"] == source["data"] and row["label"] == source["label"]
            assert np.array_equal(row["mask"], source["mask"])
            assert np.array_equal(row["tokens"], source["tokens"])
    elif name == "recordio":
        import struct

        # Read with struct straight from the files: each record's IRHeader (flag, label, id, id2).
        ids = []
        for rec in ("train.rec", "val.rec"):
            data, pos = (demo / "recordio" / rec).read_bytes(), 0
            while pos < len(data):
                magic, lrecord = struct.unpack_from("<II", data, pos)
                assert magic == 0xCED7230A
                length, flag = lrecord & ((1 << 29) - 1), lrecord >> 29
                if flag in (0, 1):  # a whole record, or the first of its parts: the header
                    ids.append(struct.unpack_from("<IfQQ", data, pos + 8)[2])
                pos += 8 + length + (-length % 4)
        assert [r["index"] for r in rows] == ids
        assert [list(r["label"]) for r in rows[:20]] == [[i % 4] for i in range(20)]
    elif name == "ofrecord":
        import struct

        records = []
        for part in sorted((demo / "ofrecord").glob("part-*")):
            data, pos = part.read_bytes(), 0
            while pos < len(data):
                (length,) = struct.unpack_from("<q", data, pos)
                records.append(data[pos + 8 : pos + 8 + length])
                pos += 8 + length
        assert len(rows) == len(records)
        # Every image's bytes are in their record's protobuf, as they were written.
        assert all(r["images"] in record for r, record in zip(rows, records, strict=True))
    elif name == "torchrecord":
        import lmdb

        from recordmill.formats.torchrecord import encode_record

        for row in rows:
            env = lmdb.open(str(demo / "torchrecord" / row["database"]), readonly=True, lock=False)
            with env.begin() as txn:
                raw = txn.get(row["key"].encode())
            env.close()
            assert encode_record(row["image"], row["label"]) == raw
