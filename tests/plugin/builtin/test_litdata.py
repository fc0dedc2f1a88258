"""The litdata plugin on datasets written by ``litdata.optimize`` (tests/data/litdata, made by its
make.py), read back value for value as litdata's own StreamingDataset gives them
(``expected.json`` beside each), without litdata or torch."""

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

DATA = Path(__file__).resolve().parents[2] / "data" / "litdata"


def convert(folder, out, *options):
    result = write_here(
        "--script", "litdata", "--input", folder, "--output", out, "--quiet", *options
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return read_dataset(out)


def flat(value, prefix=""):
    """An item of expected.json as columns: nested dicts and tuples by their paths."""
    wrapped = (
        isinstance(value, dict) and len(value) == 1 and {"array", "image", "bytes"} >= set(value)
    )
    if isinstance(value, dict) and not wrapped:
        return {k: v for key, v0 in value.items() for k, v in flat(v0, _join(prefix, key)).items()}
    if isinstance(value, list):
        return {k: v for i, v0 in enumerate(value) for k, v in flat(v0, _join(prefix, i)).items()}
    return {prefix: value}


def _join(prefix, key):
    return f"{prefix}_{key}" if prefix else str(key)


def as_theirs(column, value, arrow_type):
    if column == "image":  # a PIL image: its pixels as PNG
        return plain(Image.open(io.BytesIO(value)))
    if column == "photo":  # a JPEG: litdata gives the decoded RGB pixels, channels first
        return plain(np.asarray(Image.open(io.BytesIO(value)).convert("RGB")).transpose(2, 0, 1))
    if pa_list(arrow_type):
        while hasattr(arrow_type, "value_type"):
            arrow_type = arrow_type.value_type
        return plain(np.array(value, numpy_dtype(arrow_type)))  # (no pandas in the oldest CI)
    return plain(value)


def pa_list(arrow_type):
    return hasattr(arrow_type, "value_type")


@pytest.mark.parametrize("name", ["every_format", "zstd_batch", "zstd_chunk"])
def test_items_become_rows_equal_to_litdata_s_own_reader(tmp_path, name):
    folder = DATA / name
    table = convert(folder, tmp_path / "out", "--workers", "2", "--partitions", "2")
    theirs = json.loads((folder / "expected.json").read_text())
    assert table.num_rows == len(theirs) > 0
    for ours, item in zip(table.to_pylist(), theirs, strict=True):
        expected = flat(item)
        assert set(ours) == set(expected)
        for column, value in ours.items():
            found = as_theirs(column, value, table.schema.field(column).type)
            assert found == expected[column], (column, found, expected[column])


def test_a_token_dataset_keeps_each_written_array_and_every_token(tmp_path):
    table = convert(DATA / "tokens", tmp_path / "out")
    ours = table.column("tokens").to_pylist()
    assert [len(t) for t in ours] == [8 + i % 3 * 8 for i in range(12)]  # as make.py wrote them
    blocks = [
        block["array"][2] for block in json.loads((DATA / "tokens" / "expected.json").read_text())
    ]
    assert np.concatenate(ours).tolist() == np.concatenate(blocks).tolist()  # TokensLoader's blocks
    assert str(table.schema.field("tokens").type) in ("list<item: int32>", "list<element: int32>")


def test_pickles_are_refused_unless_asked_for_and_then_as_asked(tmp_path):
    folder = DATA / "pickled"
    each_refused(
        "litdata",
        [(["--input", folder], "column obj holds pickled values, which run code when loaded")],
        tmp_path,
    )
    kept = convert(folder, tmp_path / "bytes", "--pickles", "bytes").column("obj").to_pylist()
    assert all(b.startswith(b"\x80") and b"Opaque" in b for b in kept)  # the pickles' bytes
    assert len(kept) == 5
    with pytest.raises((ModuleNotFoundError, AttributeError)):
        pickle.loads(kept[0])  # (its class is make.py's __main__'s: not here, as intended)
    result = write_here(
        "--script", "litdata", "--input", folder, "--output", tmp_path / "load", "--quiet",
        "--pickles", "load", "--on-bad-input", "skip",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    reasons = [r["reason"] for r in recordmill.read_rejects(tmp_path / "load")]
    assert len(reasons) == 5 and all("column 'obj': does not unpickle (" in r for r in reasons)


def damaged(tmp_path, name, change):
    folder = tmp_path / name
    shutil.copytree(DATA / name, folder)
    change(folder)
    return folder


@pytest.mark.parametrize("name", ["every_format", "zstd_batch", "zstd_chunk"])
def test_a_chunk_cut_short_fails_naming_it_or_is_one_reject(tmp_path, name):
    index = json.loads((DATA / name / "index.json").read_text())
    second = index["chunks"][1]["filename"]

    def cut(folder):
        chunk = folder / second
        chunk.write_bytes(chunk.read_bytes()[: chunk.stat().st_size // 2])

    folder = damaged(tmp_path, name, cut)
    each_refused("litdata", [(["--input", folder], f"{second}: ")], tmp_path)
    table = convert(folder, tmp_path / "skipped", "--on-bad-input", "skip")
    assert (
        table.num_rows
        == sum(c["chunk_size"] for c in index["chunks"]) - index["chunks"][1]["chunk_size"]
    )
    (reject,) = recordmill.read_rejects(tmp_path / "skipped")
    assert (
        reject["source"].endswith(second) and "expected a whole LitData chunk" in reject["reason"]
    )


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda i: i["chunks"][0].update(chunk_size=99), "holds 2 samples, its index says 99"),
        (
            lambda i: i["chunks"][0].update(filename="../x.bin"),
            "chunk name '../x.bin' leads out of the dataset's folder",
        ),
        (lambda i: i["config"].update(encryption="fernet"), "its chunks are encrypted (fernet)"),
        (
            lambda i: i["config"].update(item_loader="ParquetLoader"),
            "item loader 'ParquetLoader' is not read (expected one of",
        ),
        (
            lambda i: i["config"]["data_format"].__setitem__(0, "video"),
            "column 'id': format 'video' is not read (expected int, float, bool, str, text, bytes, "
            "jpeg, pil, image:EXT, numpy, tensor, their no_header forms, or pickle)",
        ),
    ],
)
def test_an_index_that_does_not_fit_its_chunks_is_one_line(tmp_path, change, said):
    def edit(folder):
        index = json.loads((folder / "index.json").read_text())
        change(index)
        (folder / "index.json").write_text(json.dumps(index))

    each_refused(
        "litdata", [(["--input", damaged(tmp_path, "every_format", edit)], said)], tmp_path
    )


def test_a_folder_without_an_index_is_one_line(tmp_path):
    each_refused(
        "litdata",
        [(["--input", tmp_path], "no index.json (expected a LitData optimized dataset)")],
        tmp_path,
    )


@pytest.mark.parametrize(
    ("plugin", "name", "said"),
    [
        ("litdata", "every_format", "chunk-0-0.bin: its first item gives no array types ("),
        ("mds", "every_encoding", "shard.00000.mds: its first sample gives no array types ("),
    ],
)
def test_arrays_typed_by_a_damaged_first_chunk_are_one_line(tmp_path, plugin, name, said):
    """An array column's type comes from the first item: a first chunk cut short says so."""
    folder = tmp_path / name
    shutil.copytree(DATA.parent / plugin / name, folder)
    first = sorted(folder.glob("chunk-0-0.bin")) or sorted(folder.glob("shard.00000.mds"))
    first[0].write_bytes(first[0].read_bytes()[:30])
    each_refused(plugin, [(["--input", folder], said)], tmp_path)
