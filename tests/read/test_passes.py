"""read/passes.py: how many rows a pass gathers at once, and the rows a pass in order gives."""

from __future__ import annotations

import pytest

import recordmill
from recordmill.read import passes
from tests.conftest import COUNTING_PLUGIN, each_format, written


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


class _Recording:
    """A thread pool that counts what was handed to it."""

    def __init__(self, pool):
        self.pool, self.submitted = pool, []

    def submit(self, fn, g):
        self.submitted.append(g)
        return self.pool.submit(fn, g)


def _ahead(ds) -> list[int]:
    """How many groups had been handed to the read threads when each batch of a whole pass in
    order came out (each group handed over once, in order, if any is)."""
    from concurrent.futures import ThreadPoolExecutor

    groups = ds._groups.ready()
    groups._pool = recording = _Recording(ThreadPoolExecutor(2))
    seen = []
    for _ in passes.in_order(groups, ds.schema, 0, len(ds), ds._row_bytes()):
        seen.append(len(recording.submitted))
    assert recording.submitted in ([], list(range(len(groups.files.groups))))
    return seen


def test_a_pass_in_order_reads_ahead_what_read_ahead_bytes_holds(paths):
    """Decoded groups are read ahead in threads up to ``read_ahead_bytes``: a group's bytes are
    a row's times the dataset's rows a group (25 rows in 6 groups: 4), so 2.5 groups' bytes
    keep two groups ahead of the one handed out; less than one group still reads one ahead."""
    ds = recordmill.open(paths["parquet"], cache_dir=False)
    group = ds._row_bytes() * 4
    budgets = [(group * 5 // 2, 2), (group * 3, 3), (group * 3 - 1, 2), (group, 1)]
    for budget, depth in [*budgets, (group // 3, 1), (group * 100, 6)]:
        ds = recordmill.open(paths["parquet"], cache_dir=False, read_ahead_bytes=budget)
        assert _ahead(ds) == [min(6, depth + n + 1) for n in range(6)], budget


def test_mapped_groups_are_checked_ahead_by_the_threads_and_then_never_again(
    paths, tmp_path, monkeypatch
):
    """Mapped Arrow groups are not decoded: the threads check their bytes ahead, four groups a
    thread at most, and a pass over groups already checked hands nothing to them."""
    import shutil

    shutil.copytree(paths["arrow"], tmp_path / "arrow")  # checked by no process yet
    monkeypatch.setattr(passes, "READ_THREADS", 1)
    ds = recordmill.open(tmp_path / "arrow", read_ahead_bytes=1 << 30)
    assert _ahead(ds) == [min(6, 4 + n + 1) for n in range(6)]
    assert _ahead(ds) == [0] * 6  # checked by this process (the machine's: test_checked.py)


def test_a_pass_in_order_through_a_cache_reads_ahead_half_the_parts_it_holds(paths, tmp_path):
    """Through a cache_dir, no more parts are fetched ahead than half of what the cache holds
    (one group a part here), whatever ``read_ahead_bytes`` allows: the rest is the order's."""
    ds = recordmill.open(paths["parquet"], cache_dir=tmp_path / "sizes")
    part = ds._groups.ready().disk.largest
    for parts, depth in [(5, 2), (4, 2), (3, 1), (2, 1)]:
        ds = recordmill.open(
            paths["parquet"], cache_dir=tmp_path / str(parts), cache_limit=parts * part
        )
        assert ds._groups.ready().disk.capacity == parts
        assert _ahead(ds) == [min(6, depth + n + 1) for n in range(6)], parts


SIXTY = """
    def task_number():
        return 2

    def dict_data(task_id):
        for i in range(30):
            yield {"n": task_id * 30 + i, "pad": "x" * 40}
"""


@pytest.fixture(scope="module")
def even(tmp_path_factory):
    """60 rows in 2 partitions of 3 row groups of 10: Parquet, for a disk cache of 6 parts."""
    return written(tmp_path_factory.mktemp("even"), SIXTY, partitions=2, row_group_size=10)


def _cached(even, tmp_path, parts: int | None):
    ds = recordmill.open(even, cache_dir=tmp_path / "sizes")
    part = ds._groups.ready().disk.largest
    limit = {} if parts is None else {"cache_limit": parts * part}
    ds = recordmill.open(even, cache_dir=tmp_path / str(parts), **limit)
    assert [len(p.rows) for p in ds._groups.ready().disk.parts] == [10] * 6
    capacity = ds._groups.disk.capacity
    assert capacity == parts if parts is not None else capacity >= 6
    return ds


def test_a_shuffle_through_a_smaller_cache_gathers_half_the_parts_it_holds(even, tmp_path):
    """A window touches no more parts than half of what the cache holds (the block order's),
    in whole batches, at least one; a cache of every part leaves the window to its budget."""
    for parts, batch, window in [(4, 8, 16), (5, 8, 16), (3, 8, 8), (2, 3, 9), (4, 30, 30)]:
        ds = _cached(even, tmp_path, parts)
        assert passes.window_rows(ds._groups, batch, ds._row_bytes()) == window, (parts, batch)
    for parts in (6, None):  # every part held: no cap
        ds = _cached(even, tmp_path, parts)
        row = ds._row_bytes()
        assert passes.window_rows(ds._groups, 8, row) == passes._whole_batches(
            passes.MAPPED_WINDOW_BYTES, 8, row
        )


def test_rows_are_laid_out_once_when_this_process_maps_every_part(even, tmp_path):
    ds = _cached(even, tmp_path, None)
    assert passes.mapped(ds._groups) and not passes.laid_out_once(ds._groups)
    ds.to_arrow()  # every part fetched and mapped
    assert passes.laid_out_once(ds._groups)
    assert not passes.laid_out_once(recordmill.open(even, cache_dir=False)._groups.ready())


def test_a_rows_bytes_through_a_cache_are_what_the_files_say_of_its_columns(even, tmp_path):
    """Through a cache, a row's bytes come from the footer (the columns asked for, as
    uncompressed) or an Arrow part's size, never from reading a group out of the order."""
    ds = _cached(even, tmp_path, None)
    groups = ds._groups
    footer = groups.segments.footer(0).row_group(0)
    sizes = {footer.column(j).path_in_schema: footer.column(j).total_uncompressed_size
             for j in range(footer.num_columns)}  # fmt: skip
    both = passes.row_bytes(groups, ds.schema)
    assert both == (sizes["n"] + sizes["pad"]) // 10
    assert passes.row_bytes(groups, ds.select(["n"]).schema) == sizes["n"] // 10 < both
    assert groups.disk.fetched_parts == 0


def test_a_pass_in_order_keeps_no_decoded_group(even):
    """Each group of a pass in order is decoded once and let go (the first, read to size the
    read-ahead, is kept for the shuffles it is also for)."""
    ds = recordmill.open(even, cache_dir=False)
    ds._row_bytes()
    kept = list(ds._groups._cache)
    assert len(kept) == 1
    assert sum(len(b["n"]) for b in ds.iter_batches(7)) == 60
    assert list(ds._groups._cache) == kept
