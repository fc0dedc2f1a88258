"""The mds plugin on datasets written by mosaicml-streaming's own MDSWriter (tests/data/mds, made
by its make.py), read back value for value as its own StreamingDataset gives them
(``expected.json`` beside each), without the package installed."""

from __future__ import annotations

import io
import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import recordmill
from recordmill.dataset.schema import numpy_dtype
from tests.conftest import each_refused, read_dataset, write_here
from tests.data.mds.make import plain

DATA = Path(__file__).resolve().parents[2] / "data" / "mds"
IMAGES = {"jpeg", "png", "pil"}


def convert(folder, out, *options):
    result = write_here("--script", "mds", "--input", folder, "--output", out, "--quiet", *options)
    assert result.returncode == 0, result.stderr
    return read_dataset(out)


def as_theirs(name, value, arrow_type):
    """One of our values as make.py's ``plain`` puts the peer's: images decoded, arrays typed."""
    if name in IMAGES:
        return plain(Image.open(io.BytesIO(value)))
    if name == "jpegs":
        return [plain(Image.open(io.BytesIO(v))) for v in value]
    if name == "meta":
        return json.loads(value)
    if name.startswith("arr"):
        while hasattr(arrow_type, "value_type"):
            arrow_type = arrow_type.value_type
        return plain(np.array(value, numpy_dtype(arrow_type)))  # (no pandas in the oldest CI)
    return plain(value)


@pytest.mark.parametrize("name", ["every_encoding", "zstd", "gz"])
def test_samples_become_rows_equal_to_streaming_s_own_reader(tmp_path, name):
    folder = DATA / name
    table = convert(folder, tmp_path / "out", "--workers", "2", "--partitions", "2")
    theirs = json.loads((folder / "expected.json").read_text())
    index = json.loads((folder / "index.json").read_text())
    assert table.num_rows == len(theirs) == sum(s["samples"] for s in index["shards"])
    for ours, sample in zip(table.to_pylist(), theirs, strict=True):
        assert set(ours) == set(sample)
        for column, value in ours.items():
            found = as_theirs(column, value, table.schema.field(column).type)
            assert found == sample[column], (column, found, sample[column])


def test_each_encoding_keeps_its_type(tmp_path):
    schema = convert(DATA / "every_encoding", tmp_path / "out").schema
    types = {f.name: str(f.type).replace("element:", "item:") for f in schema}  # (Parquet's)
    assert types["u8"] == "uint8" and types["f16"] == "halffloat" and types["u32"] == "uint32"
    assert types["id"] == types["i64"] == types["si"] == "int64" and types["sf"] == "double"
    assert types["arr_fixed"] == "fixed_size_list<item: fixed_size_list<item: float>[3]>[2]"
    assert types["arr"] == "list<item: list<item: double>>"  # 2 dimensions, of any length
    assert types["arr_typed"] == "list<item: int16>" and types["jpegs"] == "list<item: binary>"
    assert types["sd"] == types["meta"] == "string"  # a decimal's exact text, JSON text


def test_pickles_are_refused_unless_asked_for_and_then_as_asked(tmp_path):
    folder = DATA / "pickled"
    each_refused(
        "mds",
        [(["--input", folder], "column obj holds pickled values, which run code when loaded")],
        tmp_path,
    )
    theirs = [row["obj"] for row in json.loads((folder / "expected.json").read_text())]
    kept = convert(folder, tmp_path / "bytes", "--pickles", "bytes").column("obj").to_pylist()
    assert [pickle.loads(b) for b in kept] == theirs  # the pickles' own bytes, not loaded
    loaded = convert(folder, tmp_path / "load", "--pickles", "load").column("obj").to_pylist()
    assert [json.loads(text) for text in loaded] == theirs


def damaged(tmp_path, change):
    folder = tmp_path / "mds"
    shutil.copytree(DATA / "zstd", folder)
    change(folder)
    return folder


def test_a_damaged_shard_fails_the_run_naming_it_or_is_one_reject(tmp_path):
    def cut(folder):
        shard = folder / "shard.00001.mds.zstd"
        shard.write_bytes(shard.read_bytes()[:100])

    folder = damaged(tmp_path, cut)
    each_refused(
        "mds", [(["--input", folder], "shard.00001.mds.zstd: does not decompress")], tmp_path
    )
    out = tmp_path / "skipped"
    table = convert(folder, out, "--on-bad-input", "skip")
    index = json.loads((folder / "index.json").read_text())
    kept = [s["samples"] for i, s in enumerate(index["shards"]) if i != 1]
    assert table.num_rows == sum(kept)
    (reject,) = recordmill.read_rejects(out)
    assert (
        reject["source"].endswith("shard.00001.mds.zstd") and "whole MDS shard" in reject["reason"]
    )


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda e: e["shards"][0].update(samples=99), "holds 14 samples, its index says 99"),
        (
            lambda e: e["shards"][0]["zip_data"].update(basename="../../etc/passwd"),
            "shard name '../../etc/passwd' leads out of the dataset's folder",
        ),
        (lambda e: e["shards"][2].update(column_names=["a", "b", "c"]), "the first shard's are"),
        (lambda e: e["shards"][0].update(compression="lz9"), "compression 'lz9' is not read"),
        (lambda e: e.update(shards=[]), "lists no shard"),
    ],
)
def test_an_index_that_does_not_fit_its_shards_is_one_line(tmp_path, change, said):
    def edit(folder):
        index = json.loads((folder / "index.json").read_text())
        change(index)
        (folder / "index.json").write_text(json.dumps(index))

    each_refused("mds", [(["--input", damaged(tmp_path, edit)], said)], tmp_path)


def test_a_folder_without_an_index_is_one_line(tmp_path):
    each_refused(
        "mds", [(["--input", tmp_path], "no index.json (expected an MDS dataset")], tmp_path
    )
