"""read/iteration.py: a view's passes, each row's decode told its global row number, across
groups, batches and pieces of several groups."""

from __future__ import annotations

import pytest
import recordmill.decode

import recordmill
from tests.conftest import each_format
from tests.read.damaged_jpegs import BAD, PLUGIN

DECODE = {"data": recordmill.decode.image}


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    """The 100 JPEG rows (4 that do not decode) in 2 partitions of row groups of 10."""
    root = tmp_path_factory.mktemp("iteration")
    return each_format(root, PLUGIN, partitions=2, row_group_size=10)


def _skipping(path):
    return recordmill.open(path, decode=DECODE, on_error="skip")


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
@pytest.mark.parametrize(
    "rank, world, lo, hi", [(0, 1, 0, 100), (1, 4, 25, 50), (1, 3, 34, 67), (2, 3, 67, 100)]
)
def test_each_pass_names_each_bad_row_by_its_number_in_the_dataset(paths, fmt, rank, world, lo, hi):
    """Batches of 16 over groups of 10: most batches are pieces of two groups, and most groups
    are cut by a batch's edge; a shard starts mid-dataset, so its rows are not its offsets."""
    bad = sorted(r for r in BAD if lo <= r < hi)
    good = [i for i in range(lo, hi) if i not in BAD]
    passes = {
        "iter_rows": lambda v: [row["id"] for row in v.iter_rows(batch_size=16)],
        "numpy": lambda v: [i for b in v.iter_batches(16) for i in b["id"].tolist()],
        "numpy, each batch in one group": lambda v: [
            i for b in v.iter_batches(5) for i in b["id"].tolist()
        ],
        "shuffled": lambda v: sorted(
            i for b in v.iter_batches(16, shuffle=True, seed=3) for i in b["id"].tolist()
        ),
    }
    for name, read in passes.items():
        ds = _skipping(paths[fmt])
        assert read(ds.shard(rank, world)) == good, name
        found = [r.row for r in ds.read_rejects]
        assert (sorted(found) if name == "shuffled" else found) == bad, name


@pytest.mark.parametrize("fmt", ["numpy", "arrow"])
def test_a_shuffled_pass_checks_the_mapped_bytes_it_gathers(paths, tmp_path, fmt):
    """A shuffle gathers rows from every group of a mapped Arrow file at once: each group's
    bytes are checked against the manifest before a row of it is given, as a pass in order
    does, so a changed byte in an image is a refusal, never a changed image in training."""
    import shutil

    from recordmill.errors import OutputError

    shutil.copytree(paths["arrow"], tmp_path / "ds")
    entry = recordmill.read_manifest(tmp_path / "ds")["partitions"][1]
    start, stop = entry["group_offsets"][2], entry["group_offsets"][3]
    path = tmp_path / "ds" / entry["file"]
    data = bytearray(path.read_bytes())
    data[start + (stop - start) * 3 // 4] ^= 0xFF  # in the images' bytes, not their offsets
    path.write_bytes(bytes(data))
    ds = recordmill.open(tmp_path / "ds").select(["data"])
    with pytest.raises(OutputError, match="do not match its checksum"):
        list(ds.iter_batches(16, shuffle=True, seed=1, format=fmt))
