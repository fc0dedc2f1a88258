"""read/passes.py: how many rows a pass gathers at once, and the rows a pass in order gives."""

from __future__ import annotations

import pytest

import recordmill
from recordmill.read import passes
from tests.conftest import COUNTING_PLUGIN, each_format


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("passes")
    return each_format(root, COUNTING_PLUGIN, partitions=3, row_group_size=7)


def test_gathers_are_whole_batches_of_the_budget_and_at_least_one(monkeypatch):
    monkeypatch.setattr(passes, "MAPPED_GATHER_BYTES", 1000)
    assert passes.gather_rows(8, 10) == 96  # 100 rows of 10 bytes: 12 whole batches of 8
    assert passes.gather_rows(8, 125) == 8
    assert passes.gather_rows(8, 126) == 8  # fewer rows than a batch fit: still one batch
    assert passes.gather_rows(1, 0) == 1000  # a row of no bytes counts as one
    assert passes.gather_rows(3, 1) == 999


def test_a_shuffle_window_is_whole_batches_of_its_budget(paths, monkeypatch):
    arrow = recordmill.open(paths["arrow"])
    row = arrow._row_bytes()
    monkeypatch.setattr(passes, "MAPPED_WINDOW_BYTES", 25 * row)
    assert passes.mapped(arrow._groups.ready())
    assert passes.window_rows(arrow._groups, 4, row) == 24
    assert passes.window_rows(arrow._groups, 40, row) == 40
    parquet = recordmill.open(paths["parquet"], cache_dir=False)
    groups = parquet._groups.ready()
    assert not passes.mapped(groups) and not passes.laid_out_once(groups)
    groups.cache_limit = 13 * row  # decoded groups: the cache's size, not the mapped budget
    assert passes.window_rows(groups, 4, row) == 12


def test_a_pass_in_order_gives_the_rows_of_any_range_across_groups(paths):
    for fmt, path in paths.items():
        ds = recordmill.open(path)
        every = ds.to_arrow().column("task").to_pylist()
        for start, stop in [(0, len(ds)), (3, 4), (5, 23), (6, 7), (7, 14), (len(ds) - 1, len(ds))]:
            groups = ds._groups.ready()
            batches = passes.in_order(groups, ds.schema, start, stop, ds._row_bytes())
            got = [v for b in batches for v in b.column("task").to_pylist()]
            assert got == every[start:stop], (fmt, start, stop)


def test_row_bytes_are_the_first_groups_bytes_a_row(paths):
    ds = recordmill.open(paths["arrow"])
    first = ds._groups.ready().group(0, ds.schema)
    assert passes.row_bytes(ds._groups, ds.schema) == first.nbytes // first.num_rows
