"""Merging staged task fragments into P balanced partition files: the partition jobs, writing one
(fragments.py reads the staged rows, writers.py writes the files), and the records that mark a
partition done for ``--resume``.

The rows form one global sequence: task 0's rows, then task 1's, and so on (or a seeded
permutation of it with ``--shuffle``). Partition p holds a consecutive slice of that sequence, and
partition sizes differ by at most one row. Each partition is written by one worker, independently.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from recordmill.dataset import layout
from recordmill.dataset.storage import HashingSink, Store
from recordmill.engine.fragments import Fragments
from recordmill.engine.settings import WriteSettings
from recordmill.engine.writers import open_writer, row_groups
from recordmill.errors import writing

# Rows of 1 KiB and more (images, audio, tensors) go in row groups of about 1 MiB: a row read at
# random decodes its whole Parquet row group. Smaller rows keep groups of up to 64 MiB (at most
# 131,072 rows): small groups of small rows cost every column chunk's overhead again and again
# (1 MiB groups of 100-byte rows wrote 50% slower and 45% bigger). benchmarks/README.md has the
# measurements behind both.
LARGE_ROW_BYTES = 1 << 10
ROW_GROUP_BYTES = 1 << 20
SMALL_ROWS_GROUP_BYTES = 64 << 20
MAX_ROW_GROUP_ROWS = 1 << 17


@dataclass(frozen=True)
class PartitionJob:
    index: int
    count: int
    staging: Store
    schema: pa.Schema
    settings: WriteSettings
    row_group_size: int  # the settings' or, without one, chosen for the rows
    # (task_id, batch row counts) of every non-empty task, in task order.
    fragments: tuple[tuple[int, tuple[int, ...]], ...]
    start: int
    stop: int
    order: np.ndarray | None = None  # global row numbers, with --shuffle


@dataclass(frozen=True)
class PartitionInfo:
    file: str
    rows: int
    bytes: int
    checksum: str
    # Row groups of ``row_group_size`` rows, the last one smaller: readers find a row's group
    # without opening the file. None in the records of runs from before it was recorded.
    row_groups: int | None = None
    # Arrow IPC: the CRC-32 of each column of each record batch (see checksum.py).
    batch_crc32: list[list[int]] | None = None

    def progress(self) -> tuple[int, int]:
        """(rows, bytes) done, for the progress bar."""
        return self.rows, self.bytes


def default_row_group_size(total_rows: int, total_bytes: int) -> int:
    per_row = max(1, total_bytes // max(1, total_rows))
    target = ROW_GROUP_BYTES if per_row >= LARGE_ROW_BYTES else SMALL_ROWS_GROUP_BYTES
    return max(1, min(MAX_ROW_GROUP_ROWS, target // per_row))


def write_partition(
    job: PartitionJob, report: Callable[[Any], None] = lambda _: None
) -> PartitionInfo:
    """Write one partition file from the staged fragments, then the record that marks it done."""
    source = Fragments(job.staging, job.fragments, job.schema)
    if job.order is None:
        chunks: Iterator[Any] = source.sequential(job.start, job.stop)
    else:
        chunks = source.shuffled(job.order, job.row_group_size)
    return write_file(job, chunks, report)


def write_file(job: Any, chunks: Iterator[Any], report: Callable[[Any], None]) -> PartitionInfo:
    """Write partition ``job.index`` of ``job.count`` from ``chunks`` (Arrow batches or tables
    holding its rows in order) in row groups of ``job.row_group_size``, its checksum computed
    on the way; then the record that marks it done."""
    name = layout.partition_file(job.index, job.count, job.settings.format)
    staging = job.staging
    with writing(staging.path(name)):
        sink = HashingSink(staging.output(name))
        writer = open_writer(sink, job.schema, job.settings.format, job.settings.compression)
        groups = 0
        try:
            for table in row_groups(chunks, job.row_group_size):
                writer.write(table)
                groups += 1
                report((table.num_rows, table.nbytes))
        finally:
            writer.close()
            sink.close()
        info = PartitionInfo(
            name, job.stop - job.start, sink.size, sink.checksum, groups, writer.batch_crc32
        )
        staging.makedirs(layout.PARTS_DIR)
        staging.write_text(layout.partition_record_file(name), json.dumps(asdict(info)))
    return info


def finished_partition(staging: Store, job: PartitionJob) -> PartitionInfo | None:
    """The info of a partition an interrupted run finished (file and record both there)."""
    name = layout.partition_file(job.index, job.count, job.settings.format)
    record = layout.partition_record_file(name)
    if not (staging.is_file(record) and staging.is_file(name)):
        return None
    info = PartitionInfo(**json.loads(staging.read_text(record)))
    return info if info.rows == job.stop - job.start else None


def fragments_done_after(jobs: list[PartitionJob]) -> dict[int, list[int]]:
    """For each partition, the tasks whose fragments no partition needs once it and all the
    partitions before it are written (in-order writing only; a shuffle needs every fragment)."""
    if not jobs or jobs[0].order is not None:
        return {}
    released: dict[int, list[int]] = {job.index: [] for job in jobs}
    task_start = 0
    last_partition = 0
    for task_id, batch_rows in jobs[0].fragments:
        task_stop = task_start + sum(batch_rows)
        while jobs[last_partition].stop < task_stop:
            last_partition += 1
        released[last_partition].append(task_id)
        task_start = task_stop
    return released
