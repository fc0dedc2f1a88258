"""Phase 3 of a write: the staged task fragments merged into P balanced partition files: the
partition jobs, writing one (fragments.py reads the staged rows, writers.py writes the files), and
the records that mark a partition done for ``--resume``.

The rows form one global sequence: task 0's rows, then task 1's, and so on (or a seeded
permutation of it with ``--shuffle``). Partition p holds a consecutive slice of that sequence, and
partition sizes differ by at most one row. Each partition is written by one worker, independently.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from recordmill.dataset import layout
from recordmill.dataset.rows import bounds
from recordmill.dataset.schema import check_same_schema
from recordmill.dataset.storage import HashingSink, Store
from recordmill.engine.fragments import Fragments
from recordmill.engine.records import ChunkResult
from recordmill.engine.settings import WriteSettings
from recordmill.engine.writers import open_writer, row_groups

if TYPE_CHECKING:
    from recordmill.engine.output import OutputDir
    from recordmill.engine.plan import Run
    from recordmill.executors import Executor
from recordmill.errors import LeaseLost, writing

# Rows of 1 KiB and more (images, audio, tensors) go in Parquet row groups of about 1 MiB: a row
# read at random decodes its whole Parquet row group. Arrow IPC decodes nothing (its batches are
# mapped), so its batches of such rows hold about 4 MiB: a pass then opens, checks and cuts 4x
# fewer groups (a first pass over 30 KB images took 0.150 s instead of 0.167 s). Smaller rows keep
# groups of up to 64 MiB (at most 131,072 rows): small groups of small rows cost every column
# chunk's overhead again and again (1 MiB groups of 100-byte rows wrote 50% slower and 45%
# bigger). benchmarks/README.md has the measurements behind each.
LARGE_ROW_BYTES = 1 << 10
ROW_GROUP_BYTES = 1 << 20
ARROW_ROW_GROUP_BYTES = 4 << 20
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
    order: np.ndarray | None = None  # global row numbers, with --shuffle or --dedup-key
    version: int = 1  # the dataset version it belongs to: its file's name says it


@dataclass(frozen=True)
class PartitionInfo:
    file: str
    rows: int
    bytes: int
    checksum: str
    # Row groups of ``row_group_size`` rows, the last one smaller: readers find a row's group
    # without opening the file. None in the records of runs from before it was recorded.
    row_groups: int | None = None
    # Where each row group's bytes start in the file (and, last, where the footer starts), and
    # their CRC-32C: what readers check (see dataset/checksum.py).
    group_offsets: list[int] | None = None
    group_crc32c: list[int] | None = None
    # Arrow IPC, written before group_crc32c was: the CRC-32 of each column of each batch.
    batch_crc32: list[list[int]] | None = None
    # The ids each variable-length list of integers column holds in all (a text corpus's tokens).
    values: dict[str, int] | None = None

    def progress(self) -> tuple[int, int]:
        """(rows, bytes) done, for the progress bar."""
        return self.rows, self.bytes


def default_row_group_size(total_rows: int, total_bytes: int, fmt: str = "parquet") -> int:
    """Rows per row group (Parquet) or record batch (Arrow IPC, ``fmt="arrow"``) when the
    run gives none: about the bytes above for rows of this mean size."""
    per_row = max(1, total_bytes // max(1, total_rows))
    large = ARROW_ROW_GROUP_BYTES if fmt == "arrow" else ROW_GROUP_BYTES
    target = large if per_row >= LARGE_ROW_BYTES else SMALL_ROWS_GROUP_BYTES
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
    name = layout.partition_file(job.index, job.count, job.settings.format, job.version)
    staging = job.staging
    with writing(staging.path(name)):
        sink = HashingSink(staging.output(name))
        writer = open_writer(sink, job.schema, job.settings.format, job.settings.compression)
        groups, lost = 0, False
        values = dict.fromkeys(id_lists(job.schema), 0)
        sink.mark()
        try:
            for table in row_groups(chunks, job.row_group_size):
                writer.write(table)
                sink.mark()
                groups += 1
                for column in values:
                    values[column] += _list_values(table.column(column))
                report((table.num_rows, table.nbytes))
            staging.check()  # on object storage the partition appears when it is closed
        except LeaseLost:  # the staging folder is another run's now: nothing of ours appears
            lost = True
            Store.abandon(writer, sink)
            raise
        finally:
            if not lost:
                writer.close()
                sink.close()
        info = PartitionInfo(
            name,
            job.stop - job.start,
            sink.size,
            sink.checksum,
            groups,
            group_offsets=sink.offsets,
            group_crc32c=sink.crc32c,
            values=values or None,
        )
        staging.makedirs(layout.PARTS_DIR)
        staging.write_text(layout.partition_record_file(name), json.dumps(asdict(info)))
        # The file (flushed as it closed) and its record, by name, on the disk before the main
        # process deletes the fragments that it was made from.
        staging.flush_dir()
        staging.flush_dir(layout.PARTS_DIR)
    return info


def id_lists(schema: pa.Schema) -> list[str]:
    """The columns of variable-length lists of integers (token ids): their values are counted."""
    return [
        f.name
        for f in schema
        if (pa.types.is_list(f.type) or pa.types.is_large_list(f.type))
        and pa.types.is_integer(f.type.value_type)
    ]


def _list_values(column: pa.ChunkedArray) -> int:
    """The values a list column's rows hold, from its offsets (nothing read of the values)."""
    total = 0
    for chunk in column.chunks:
        if len(chunk):
            total += chunk.offsets[-1].as_py() - chunk.offsets[0].as_py()
    return total


def finished_partition(staging: Store, job: PartitionJob) -> PartitionInfo | None:
    """The info of a partition an interrupted run finished (file and record both there)."""
    name = layout.partition_file(job.index, job.count, job.settings.format, job.version)
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


@dataclass(frozen=True)
class Written:
    """The partitions of a run: their infos in order, the schema and row group size used."""

    infos: list[PartitionInfo]
    schema: pa.Schema
    row_group_size: int


def write_partitions(
    run: Run,
    out: OutputDir,
    runner: Executor,
    results: list[ChunkResult],
    keep: np.ndarray | None = None,
) -> tuple[Written, float]:
    """Phase 3: the partitions not written yet, from the fragments, deleting each fragment once
    no partition needs it; and the seconds it took. ``keep``: the global rows to write (the
    others are duplicates, see dedup.py); all of them when None."""
    started = time.perf_counter()
    schema = run.declared or check_same_schema({r.schema_task: r.schema for r in results if r.rows})
    total = sum(r.rows for r in results) if keep is None else len(keep)
    rg_size = run.row_group_size or default_row_group_size(
        total, sum(r.nbytes for r in results), run.settings.format
    )
    jobs = _partition_jobs(results, out.staging, schema, run, rg_size, keep)
    finished, todo = unfinished(out, jobs)
    cleaner = _fragment_cleaner(jobs, out.staging, set(finished))
    written_now = runner.run(
        write_partition,
        todo,
        "partitions",
        "partition",
        run.settings.progress,
        on_result=lambda i, _: cleaner(todo[i].index),
    )
    finished.update((job.index, info) for job, info in zip(todo, written_now, strict=True))
    written = Written([finished[job.index] for job in jobs], schema, rg_size)
    return written, time.perf_counter() - started


def unfinished(out: OutputDir, jobs: list[Any]) -> tuple[dict[int, PartitionInfo], list[Any]]:
    """The partitions an interrupted run already wrote (by index), and the jobs left to do."""
    finished = {
        job.index: info
        for job in jobs
        if out.resumed and (info := finished_partition(out.staging, job)) is not None
    }
    return finished, [job for job in jobs if job.index not in finished]


def _partition_jobs(
    results: list[ChunkResult],
    staging: Store,
    schema: pa.Schema,
    run: Run,
    row_group_size: int,
    keep: np.ndarray | None,
) -> list[PartitionJob]:
    settings = run.settings
    total = sum(r.rows for r in results) if keep is None else len(keep)
    fragments = tuple((r.first, tuple(r.batch_rows)) for r in results if r.rows)
    order = np.random.default_rng(settings.seed).permutation(total) if settings.shuffle else None
    if keep is not None:  # the rows kept, in order or shuffled among themselves
        order = keep if order is None else keep[order]
    return [
        PartitionJob(
            index=p,
            count=settings.partitions,
            staging=staging,
            schema=schema,
            settings=settings,
            row_group_size=row_group_size,
            fragments=fragments,
            start=start,
            stop=stop,
            order=None if order is None else order[start:stop],
            version=run.version,
        )
        for p, (start, stop) in enumerate(bounds(total, settings.partitions))
    ]


def _fragment_cleaner(
    jobs: list[PartitionJob], staging: Store, done: set[int]
) -> Callable[[int], None]:
    """Delete each fragment as soon as every partition that reads it is written, so that the
    staged copy of the data shrinks while the partitions grow instead of doubling the disk use.
    (A finished task's record stays: --resume must not run it again.) On object storage there
    is no disk to spare: the fragments go with the staging folder, many keys to a request,
    where each one deleted here would cost three (pyarrow also checks for and writes the
    folder's marker)."""
    if not staging.local:
        return lambda index: None
    released = fragments_done_after(jobs)
    done = set(done)
    prefix = 0

    def partition_done(index: int) -> None:
        nonlocal prefix
        done.add(index)
        while prefix in done:
            for task_id in released.get(prefix, ()):
                staging.delete(layout.fragment_file(task_id))
            prefix += 1

    if done:
        partition_done(min(done))
    return partition_done
