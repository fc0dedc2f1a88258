"""How a pass reads: consecutive rows group by group with read-ahead, or a seeded shuffle gathered
a window at a time."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import wait as wait_for

import pyarrow as pa

from recordmill.read.groups import READ_THREADS, Groups
from recordmill.read.machine.cache import every_part

# A shuffle over memory-mapped Arrow IPC gathers about this many bytes of rows at a time.
MAPPED_WINDOW_BYTES = 16 << 20
# An IterableDataset over mapped bytes gathers about this many bytes of rows at once, whole
# batches: a gather costs ~0.1 ms whatever its rows (a single row each, as torch's DataLoader
# batching rows of batch_size=1, was 3x the rows' copying), and more held a worker's memory.
MAPPED_GATHER_BYTES = 2 << 20


def in_order(
    groups: Groups, schema: pa.Schema, start: int, stop: int, row_bytes: int
) -> Iterator[pa.RecordBatch]:
    """Global rows ``start`` to ``stop``, group by group. Parquet groups are decoded ahead in
    threads (pyarrow releases the GIL), up to ``read_ahead_bytes``, and not cached; mapped
    Arrow IPC groups have their checksums checked ahead the same way."""
    files = groups.ready().files
    wanted = list(files.index.spans(start, stop))
    group_bytes = row_bytes * max(1, files.index.total // max(1, len(files.groups)))
    depth = max(1, min(len(wanted), groups.read_ahead_bytes // group_bytes))
    if groups.mapped:  # nothing to decode; the checksums are checked ahead, in threads
        depth = min(depth, 4 * READ_THREADS)
    through = groups.disk is not None and not groups.disk.implicit
    if through:  # parts fetched ahead: no more than the cache leaves room for
        depth = min(depth, max(1, groups.disk.capacity // 2) * _groups_per_part(groups))

    def read(g: int) -> pa.RecordBatch:
        # A cache made by default (not given as cache_dir) is for shuffles: a pass in order
        # reads each group once, as fast from the files themselves.
        return groups.group(g, schema, keep=False, cached=through)

    if groups.mapped and all(groups.is_checked(g) for g, _, _ in wanted):
        # Mapped and checked already (by this process or the machine): nothing to do ahead in
        # threads, which would only wait for the GIL beside the caller.
        for g, lo, hi in wanted:
            yield read(g).slice(lo, hi - lo)
        return
    ahead = [groups.pool.submit(read, g) for g, _, _ in wanted[:depth]]
    try:
        for n, (_, lo, hi) in enumerate(wanted):
            batch = ahead.pop(0).result()
            if n + depth < len(wanted):
                ahead.append(groups.pool.submit(read, wanted[n + depth][0]))
            yield batch.slice(lo, hi - lo)
    finally:  # a pass stopped early (an error, a break) leaves nothing reading behind it
        for future in ahead:
            future.cancel()
        wait_for(ahead)


def mapped(groups: Groups) -> bool:
    """Whether rows are taken from mapped bytes (local Arrow IPC, the disk cache's parts): no
    group is decoded, so gathering more rows at once saves nothing."""
    return groups.mapped or groups.disk is not None


def laid_out_once(groups: Groups) -> bool:
    """Whether a gather takes from columns laid out once for all gathers: local Arrow IPC, or a
    disk cache whose every part this process maps (``Gatherer._every_part``)."""
    return groups.mapped or (groups.disk is not None and every_part(groups.disk) is not None)


def window_rows(groups: Groups, batch_size: int, row_bytes: int) -> int:
    """Rows gathered at once by a shuffle, a whole number of batches. Memory-mapped Arrow IPC:
    about ``MAPPED_WINDOW_BYTES``, as nothing is decoded. Otherwise about the cache's size, since
    each window decodes every row group it touches (nearly all of them) and a larger window
    decodes less per row; the groups are kept for the next window only when all of them fit."""
    budget = MAPPED_WINDOW_BYTES if mapped(groups) else groups.cache_limit
    rows = _whole_batches(budget, batch_size, row_bytes)
    disk = groups.disk
    if disk is not None and disk.parts and disk.capacity < len(disk.parts):
        # A cache of fewer parts than the dataset's: a window of at most the block order's
        # (half the parts it holds), so that a gather touches no more parts than it holds.
        half = max(1, disk.capacity // 2) * min(len(part.rows) for part in disk.parts)
        rows = min(rows, batch_size * max(1, half // batch_size))
    return rows


def gather_rows(batch_size: int, row_bytes: int) -> int:
    """Rows an IterableDataset gathers at once from mapped bytes: whole batches of about
    ``MAPPED_GATHER_BYTES``, at least one."""
    return _whole_batches(MAPPED_GATHER_BYTES, batch_size, row_bytes)


def _whole_batches(budget: int, batch_size: int, row_bytes: int) -> int:
    """The rows of as many whole batches as fit ``budget`` bytes, at least one batch."""
    return batch_size * max(1, budget // max(1, row_bytes) // batch_size)


def _groups_per_part(groups: Groups) -> int:
    assert groups.disk is not None
    return min(len(part.groups) for part in groups.disk.parts) if groups.disk.parts else 1


def row_bytes(groups: Groups, schema: pa.Schema) -> int:
    """The bytes a row takes decoded, as the first row group holds them. Through a disk cache,
    from what the files say (a Parquet footer's sizes of those columns, an Arrow part's bytes),
    never by reading the group: fetched out of the epoch's order, its part would push out one
    that the order expects to find cached."""
    groups = groups.ready()
    if not groups.files.groups:
        return 1
    if groups.disk is None:
        first = groups.group(0, schema)
        return max(1, first.nbytes // max(1, first.num_rows))
    part = groups.disk.parts[0]
    if groups.files.arrow:
        return max(1, part.stored // max(1, len(part.rows)))
    group = groups.segments.footer(part.partition).row_group(part.first)
    names = set(schema.names)
    columns = [group.column(j) for j in range(group.num_columns)]
    size = sum(
        c.total_uncompressed_size for c in columns if c.path_in_schema.split(".")[0] in names
    )
    return max(1, size // max(1, group.num_rows))
