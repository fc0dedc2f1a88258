"""Partition planning: balanced bounds, file names, and when staged fragments can go."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest

from recordmill.dataset.layout import partition_file
from recordmill.dataset.rows import bounds
from recordmill.engine.partitions import (
    PartitionJob,
    default_row_group_size,
    fragments_done_after,
)
from recordmill.engine.settings import WriteSettings
from tests.conftest import make_plugin, write_both_ways


@pytest.mark.parametrize(
    ("total", "count"), [(0, 3), (1, 4), (10, 3), (1003, 7), (5, 5), (2**20 + 3, 16)]
)
def test_bounds_are_consecutive_covering_and_balanced(total, count):
    parts = bounds(total, count)
    assert len(parts) == count
    assert parts[0][0] == 0 and parts[-1][1] == total
    assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))
    sizes = [stop - start for start, stop in parts]
    assert max(sizes) - min(sizes) <= 1


def test_file_names_sort_in_partition_order():
    assert partition_file(3, 8, "parquet") == "part-00003-of-00008.parquet"
    assert partition_file(7, 8, "arrow") == "part-00007-of-00008.arrow"
    names = [partition_file(i, 123456, "parquet") for i in range(0, 123456, 9999)]
    assert names == sorted(names) and names[0] == "part-000000-of-123456.parquet"


def test_row_groups_aim_at_1_mb_for_large_rows_and_64_mb_for_small_ones():
    assert default_row_group_size(20_000, 600_000_000) == 34  # 30 KB rows: about 1 MB
    assert default_row_group_size(4_000, 4_000 * 49_152) == 21  # 128x128x3 uint8 tensors
    assert default_row_group_size(10**6, 10**8) == 131072  # 100-byte rows: capped
    assert default_row_group_size(10**6, 10**9) == 67108  # 1,000-byte rows: about 64 MB
    assert default_row_group_size(10, 10**10) == 1  # rows bigger than the target


def test_arrow_batches_of_large_rows_aim_at_4_mb_and_of_small_ones_at_64_mb():
    assert default_row_group_size(20_000, 600_000_000, "arrow") == 139  # 30 KB rows: 4 MB
    assert default_row_group_size(20_000, 600_000_000, "parquet") == 34
    assert default_row_group_size(10**6, 10**9, "arrow") == 67108  # as Parquet's


LARGE_ROWS = """
def task_number():
    return 2


def task_rows(task_id):
    return 80


def schema():
    return {"blob": {"type": "bytes"}}


def dict_data(task_id):
    for i in range(80):
        yield {"blob": bytes([i]) * 65536}
"""


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_a_write_groups_rows_of_64_kb_by_its_format_straight_or_staged(tmp_path, fmt):
    plugin = make_plugin(tmp_path / "plugin", LARGE_ROWS)
    direct = write_both_ways(str(plugin), tmp_path, {}, format=fmt, progress=False)
    # 1 MiB or 4 MiB over 65,540 bytes a row (its value and its offset in Arrow)
    rows = {"parquet": 15, "arrow": 63}[fmt]
    assert direct.manifest["settings"]["row_group_size"] == rows
    assert [p["row_groups"] for p in direct.manifest["partitions"]] == [-(-160 // rows)]


def jobs_for(task_sizes: list[int], count: int, shuffle: bool = False) -> list[PartitionJob]:
    fragments = tuple((t, (n,)) for t, n in enumerate(task_sizes) if n)
    total = sum(task_sizes)
    return [
        PartitionJob(
            index=p,
            count=count,
            staging="",
            schema=pa.schema([]),
            settings=WriteSettings(partitions=count, shuffle=shuffle),
            row_group_size=10,
            fragments=fragments,
            start=start,
            stop=stop,
            order=np.arange(start, stop) if shuffle else None,
        )
        for p, (start, stop) in enumerate(bounds(total, count))
    ]


def test_each_fragment_is_released_after_the_last_partition_that_reads_it():
    # Tasks of 4, 0, 9, 1 rows in 3 partitions of 5, 5, 4 rows: rows 0-4, 5-9, 10-13.
    released = fragments_done_after(jobs_for([4, 0, 9, 1], 3))
    assert released == {0: [0], 1: [], 2: [2, 3]}


def test_every_fragment_is_released_exactly_once():
    sizes = [3, 0, 17, 1, 1, 40, 0, 2]
    released = fragments_done_after(jobs_for(sizes, 11))
    tasks = sorted(t for ids in released.values() for t in ids)
    assert tasks == [t for t, n in enumerate(sizes) if n]


def test_a_shuffle_keeps_every_fragment_to_the_end():
    assert fragments_done_after(jobs_for([4, 9], 3, shuffle=True)) == {}
