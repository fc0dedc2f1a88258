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
