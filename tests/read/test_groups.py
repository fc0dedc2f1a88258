"""read/groups.py: decoded Parquet row groups kept in a cache bounded by bytes, least recently
used first out, and each decode counted."""

from __future__ import annotations

import recordmill
from tests.read.test_passes import even  # noqa: F401 (a fixture: 60 rows, groups of 10)


def _read(path, cache_bytes: int, order: list[int]):
    """The groups read in ``order``; then the groups kept, oldest first, and the stats."""
    ds = recordmill.open(path, cache_bytes=cache_bytes, cache_dir=False)
    groups = ds._groups.ready()
    for g in order:
        assert groups.group(g, ds.schema).column(0).to_pylist() == list(range(g * 10, g * 10 + 10))
    return [key[0] for key in groups._cache], groups


def test_decoded_groups_are_kept_up_to_cache_bytes_the_least_recently_used_out_first(
    even,  # noqa: F811
):
    ds = recordmill.open(even, cache_dir=False)
    size = ds._groups.ready().group(0, ds.schema).nbytes
    kept, groups = _read(even, size * 5 // 2, [0, 1, 2, 1, 3])
    assert kept == [1, 3]  # 0 out for 2, then 2 (not 1, read again since) for 3
    assert (groups.stats.groups_read, groups.stats.rows_read) == (4, 40)  # 1 again: no decode
    assert groups._cache_bytes == 2 * size
    kept, _ = _read(even, size * 2, [0, 1])
    assert kept == [0, 1]  # as many bytes as the limit: both stay
    kept, groups = _read(even, 1, [0, 1, 2])
    assert kept == [2]  # a limit under one group: the last group read stays
    assert groups._cache_bytes == size
