"""Every run script works as it is, on the demo data it makes on first use."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import recordmill
import recordmill.inputs.demo
from tests.conftest import REPO

SCRIPTS = {
    "template": 400,
    "imagenet": 24,
    "filelist": 18,
    "mnist": 300,
    "csv": 200,
    "text": 60,
    "tfrecord": 100,
    "mindrecord": 40,
    "recordio": 40,
    "ofrecord": 40,
    "torchrecord": 32,
    "webdataset": 24,
    "huggingface": 24,
    "mds": 24,
    "litdata": 24,
    "derive": 200,
    "audio": 12,
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo") / "data"
    recordmill.inputs.demo.make_demo_data(folder)
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
    elif name == "text":
        import json

        lines = (demo / "text" / "corpus.jsonl").read_text().splitlines()
        source = [json.loads(line) for line in lines]
        assert [(r["id"], r["text"]) for r in rows] == [(s["id"], s["text"]) for s in source]
        assert [r["length"] for r in rows] == [len(s["text"]) for s in source]
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
        from recordmill.inputs.mindrecord_writer import demo_rows

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

        # Read with struct straight from the files: each record's parts joined with the magic
        # between them, then its IRHeader (flag, label, id, id2), labels and image bytes.
        magic, records, split = 0xCED7230A, [], 0
        for rec in ("train.rec", "val.rec"):
            data, pos, parts = (demo / "recordio" / rec).read_bytes(), 0, []
            while pos < len(data):
                found, lrecord = struct.unpack_from("<II", data, pos)
                assert found == magic
                length, cflag = lrecord & ((1 << 29) - 1), lrecord >> 29
                assert cflag in ((0, 1) if not parts else (2, 3))
                parts.append(data[pos + 8 : pos + 8 + length])
                pos += 8 + length + (-length % 4)
                if cflag in (0, 3):  # the record's last part
                    split += len(parts) > 1
                    payload = struct.pack("<I", magic).join(parts)
                    flag, label, index, _ = struct.unpack_from("<IfQQ", payload)
                    labels = list(struct.unpack_from(f"<{flag}f", payload, 24)) if flag else [label]
                    records.append((index, labels, payload[24 + 4 * flag :]))
                    parts = []
            assert not parts
        assert split == 2  # record 7 of each file holds the magic: written in parts on purpose
        assert [r["index"] for r in rows] == [index for index, _, _ in records]
        assert [r["label"].tolist() for r in rows] == [labels for _, labels, _ in records]
        assert [r["data"] for r in rows] == [image for _, _, image in records]
        assert [list(r["label"]) for r in rows[:20]] == [[i % 4] for i in range(20)]
    elif name == "ofrecord":
        from recordmill.inputs.ofrecord import demo_rows

        made = demo_rows(np.random.default_rng(3))  # demo.py seeds the ofrecord inputs with 3
        assert [r["id"] for r in rows] == [m["id"] for m in made]
        assert [r["labels"] for r in rows] == [m["labels"] for m in made]
        assert all(
            np.array_equal(r["scores"], m["scores"]) for r, m in zip(rows, made, strict=True)
        )
        assert [r["images"] for r in rows] == [m["images"] for m in made]
    elif name == "torchrecord":
        from recordmill.inputs.torchrecord import demo_rows

        # The generator's values (demo.py seeds the torchrecord inputs with 4), not a re-encoding.
        made = {(m["database"], m["key"]): m for m in demo_rows(np.random.default_rng(4))}
        assert sorted((r["database"], r["key"]) for r in rows) == sorted(made)
        for row in rows:
            source = made[row["database"], row["key"]]
            assert row["label"] == source["label"]
            assert np.array_equal(row["image"], source["image"])
    elif name in ("mds", "litdata"):
        from recordmill.inputs.demo import _pairs

        # the demo's pairs (each shard or chunk every second one), read back as they were made
        made = _pairs(demo / "images")
        made = made[0::2] + made[1::2]
        assert [(r["image"], r["caption"], r["label"]) for r in rows] == made


def test_a_copy_of_the_template_script_runs_any_plugin(tmp_path):
    """run_template.sh copied to run_xyz.sh, as its comment says, runs a plugin of one's own
    (whatever its options), and a fresh `recordmill new` plugin given as SCRIPT."""
    import shutil

    from tests.conftest import COUNTING_PLUGIN, make_plugin

    clone = tmp_path / "clone"
    (clone / "run_scripts").mkdir(parents=True)
    shutil.copy(REPO / "writer.py", clone)
    template = (REPO / "run_scripts" / "run_template.sh").read_text()
    copy = clone / "run_scripts" / "run_xyz.sh"
    copy.write_text(template.replace("templates/template", "xyz"))
    make_plugin(clone / "xyz", COUNTING_PLUGIN)  # the user's own options: --sizes, no --tasks
    env = {**os.environ, "OUTPUT": str(tmp_path / "xyz")}
    result = subprocess.run(
        ["bash", str(copy), "--quiet"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert recordmill.read_manifest(tmp_path / "xyz")["total_rows"] == 25
    made = subprocess.run(
        [sys.executable, "-m", "recordmill", "new", "fresh"], cwd=tmp_path, capture_output=True
    )
    assert made.returncode == 0
    env = {**os.environ, "SCRIPT": "fresh", "OUTPUT": str(tmp_path / "out-fresh")}
    result = subprocess.run(
        ["bash", str(copy), "--quiet"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    manifest = recordmill.read_manifest(tmp_path / "out-fresh")
    assert manifest["plugin"]["name"] == "fresh" and manifest["total_rows"] == 400


def test_the_scripts_run_in_the_callers_folder_and_never_replace_a_dataset(demo, tmp_path):
    """INPUT and OUTPUT relative to where the script is run (it once ran in the clone), and no
    --overwrite of its own: a copy kept for a grown dataset must not wipe its history."""
    import shutil

    (tmp_path / "in").mkdir()
    shutil.copy(demo / "table.csv", tmp_path / "in" / "table.csv")
    shutil.copy(demo / "table.schema.yaml", tmp_path / "in" / "table.schema.yaml")
    env = {**os.environ, "INPUT": "in/table.csv", "SCHEMA": "in/table.schema.yaml"}

    def run(*flags):
        return subprocess.run(
            ["bash", str(REPO / "run_scripts" / "run_csv.sh"), "--quiet", *flags],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert run().returncode == 0
    out = tmp_path / "out" / "csv"  # the caller's out/, not the clone's
    before = recordmill.read_manifest(out)
    again = run()
    assert again.returncode == 1 and "pass --overwrite to replace it" in again.stderr
    assert recordmill.read_manifest(out) == before
    assert run("--append").returncode == 0
    assert recordmill.read_manifest(out)["version"] == 2
