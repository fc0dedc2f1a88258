"""Locating rows in groups of known sizes: consecutive spans and gathers in any order."""

from __future__ import annotations

import numpy as np
import pytest

from recordmill.dataset.rows import RowIndex, bounds

SIZES = [3, 0, 4, 1, 0, 2]  # empty groups too


def rows_of(sizes):
    """Each global row as (group, number in the group)."""
    return [(g, i) for g, n in enumerate(sizes) for i in range(n)]


@pytest.mark.parametrize(("start", "stop"), [(0, 10), (2, 8), (3, 7), (7, 8), (5, 5), (9, 10)])
def test_spans_cover_exactly_the_rows_between(start, stop):
    index = RowIndex(SIZES)
    got = [(g, i) for g, lo, hi in index.spans(start, stop) for i in range(lo, hi)]
    assert got == rows_of(SIZES)[start:stop]
    assert all(hi > lo for _, lo, hi in index.spans(start, stop))


def test_a_gather_reads_each_group_once_and_restores_the_order():
    index = RowIndex(SIZES)
    rows = np.array([9, 0, 4, 4, 2, 7, 3])
    plan = index.gather(rows)
    assert plan.groups == sorted(set(plan.groups)) and len(plan.groups) == 4
    by_group = [
        (g, int(i))
        for g, part in zip(plan.groups, plan.parts, strict=True)
        for i in plan.local[part]
    ]
    assert [by_group[k] for k in plan.inverse] == [rows_of(SIZES)[r] for r in rows]
    assert index.gather(np.array([], dtype=np.int64)).groups == []


def test_bounds_are_balanced_and_consecutive():
    parts = bounds(10, 4)
    assert parts == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert bounds(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]


def test_recut_makes_runs_of_exactly_the_size_asked():
    import pyarrow as pa

    from recordmill.dataset.rows import recut

    batches = [pa.record_batch({"x": list(range(a, b))}) for a, b in [(0, 3), (3, 3), (3, 10)]]
    runs = list(recut(batches, 4))
    assert [sum(p.num_rows for p in parts) for parts in runs] == [4, 4, 2]
    assert [x for parts in runs for p in parts for x in p["x"].to_pylist()] == list(range(10))


def test_an_index_counts_its_groups_and_its_rows():
    index = RowIndex([2, 0, 3])
    assert len(index) == 3 and index.total == 5
    assert RowIndex([]).total == 0
