"""Datasets of earlier layouts (tests/data/layouts, each written by the recordmill of its time:
make.sh) read on every path, and checked where their layout records checksums: a reader that
took an older dataset for a newer one, or skipped its checks, gives other rows or damaged ones.

- ``before-batch-crc``: no checksum of any row group or batch (only each file's SHA-256);
- ``before-group-crc``: a CRC-32 per column of each Arrow batch (``batch_crc32``), no
  ``group_offsets``/``group_crc32c``.
"""

from __future__ import annotations

import importlib.util
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

import recordmill
from recordmill.read.verify import verify

DATA = Path(__file__).resolve().parents[1] / "data" / "layouts"
LAYOUTS = [
    f"{name}/{fmt}"
    for name in ("before-batch-crc", "before-group-crc")
    for fmt in ("parquet", "arrow")
]


def written(n: int) -> dict:
    """Row ``n`` as tests/data/layouts/plugin wrote it."""
    return {"id": n, "name": f"row {n}", "v": (np.arange(n % 4, dtype=np.float32) + n).tolist()}


def plain(row: dict) -> dict:
    return {"id": int(row["id"]), "name": row["name"], "v": np.asarray(row["v"]).tolist()}


@pytest.fixture(params=LAYOUTS)
def old(request, tmp_path):
    return str(shutil.copytree(DATA / request.param, tmp_path / "ds"))


def test_every_read_path_gives_the_rows_written(old, tmp_path):
    everything = [written(n) for n in range(60)]
    ds = recordmill.open(old)
    assert len(ds) == 60 and [plain(ds[i]) for i in range(60)] == everything
    assert ds.version == 1  # (no version recorded then: one write, the first)
    assert pickle.loads(pickle.dumps(ds)).version == 1
    assert [plain(r) for r in ds.iter_rows()] == everything
    assert [plain(r) for r in ds.to_arrow().to_pylist()] == everything
    order = np.random.default_rng(3).permutation(60)
    assert [plain(r) for r in ds.take(order).to_pylist()] == [everything[i] for i in order]
    for source in (ds, recordmill.open(old, cache_dir=tmp_path / "cache")):
        batches = source.iter_batches(8, shuffle=True, seed=2, format="arrow")
        rows = [plain(r) for b in batches for r in b.to_pylist()]
        assert sorted(rows, key=lambda r: r["id"]) == everything
        assert [r["id"] for r in rows] == source.shuffled(2).tolist()  # the order it says
    halves = [recordmill.open(old).shard(k, 2) for k in range(2)]
    assert sorted(int(r["id"]) for h in halves for r in h.iter_rows()) == list(range(60))
    assert verify(old) == []


@pytest.mark.skipif(not importlib.util.find_spec("torch"), reason="PyTorch is not installed")
def test_the_torch_loaders_read_every_row_once(old):
    import recordmill.torch as rt

    for data in (rt.MapDataset(old), rt.IterableDataset(old)):
        loader = rt.DataLoader(data, batch_size=7, shuffle=True, seed=1, collate_fn=list)
        ids = sorted(int(row["id"]) for batch in loader for row in batch)
        assert ids == list(range(60))


def flip_a_name(path: str) -> None:
    """'row 25' made 'row 2X' in its partition: the file stays well formed, a value changes."""
    part = Path(path) / f"part-00001-of-00003.{Path(path).name}"
    data = part.read_bytes()
    at = data.index(b"row 25")
    part.write_bytes(data[: at + 5] + b"X" + data[at + 6 :])


def refused_on_every_read(location: str) -> None:
    """``flip_a_name``'s dataset refused by a row, a pass in order, a shuffle and a gather."""
    said = r"record batch \d+, column 'name': its checksum does not match the manifest"
    reads = [
        lambda ds: ds[25],
        lambda ds: list(ds.iter_batches(8, format="arrow")),
        lambda ds: list(ds.iter_batches(8, shuffle=True, seed=2, format="arrow")),
        lambda ds: ds.take([59, 25, 0]),
    ]
    for read in reads:
        with pytest.raises(recordmill.OutputError, match=said):
            read(recordmill.open(location))


def test_a_changed_value_in_a_layout_with_batch_checksums_is_refused_on_every_path(tmp_path):
    path = str(shutil.copytree(DATA / "before-group-crc" / "arrow", tmp_path / "arrow"))
    flip_a_name(path)
    refused_on_every_read(path)
    assert any("part-00001-of-00003.arrow" in problem for problem in verify(path))


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_a_changed_file_of_the_oldest_layout_is_found_by_verify(tmp_path, fmt):
    path = str(shutil.copytree(DATA / "before-batch-crc" / fmt, tmp_path / fmt))
    part = Path(path) / f"part-00001-of-00003.{fmt}"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 1
    part.write_bytes(bytes(data))
    assert any(f"part-00001-of-00003.{fmt}" in problem for problem in verify(path))


def test_a_changed_value_in_a_layout_with_batch_checksums_is_refused_from_object_storage(
    s3, tmp_path
):
    """Read from S3, an older Arrow dataset's batches are not mapped but fetched: each is
    checked against its columns' checksums every time it is read, as on a local disk."""
    import pyarrow.fs as pafs

    path = str(shutil.copytree(DATA / "before-group-crc" / "arrow", tmp_path / "arrow"))
    flip_a_name(path)
    uri = s3("layouts/before-group-crc")
    fs, root = pafs.FileSystem.from_uri(uri)
    pafs.copy_files(path, root, pafs.LocalFileSystem(), fs)
    refused_on_every_read(uri)


def test_an_older_arrow_batch_fetched_again_is_checked_again(s3, tmp_path):
    """A batch of an older Arrow dataset read from S3, checked, let go and fetched again after
    its object was replaced with a changed value: refused, not taken as checked already."""
    import pyarrow.fs as pafs

    path = str(shutil.copytree(DATA / "before-group-crc" / "arrow", tmp_path / "arrow"))
    uri = s3("layouts/fetched-again")
    fs, root = pafs.FileSystem.from_uri(uri)
    pafs.copy_files(path, root, pafs.LocalFileSystem(), fs)
    ds = recordmill.open(uri, cache_bytes=1, cache_dir=False)  # nothing kept between reads
    assert ds[25]["name"] == "row 25"
    flip_a_name(path)
    pafs.copy_files(path, root, pafs.LocalFileSystem(), fs)
    assert ds[0]["name"] == "row 0"  # another group kept in its place (one is kept at least)
    with pytest.raises(recordmill.OutputError, match=r"column 'name': its checksum does not"):
        ds[25]
