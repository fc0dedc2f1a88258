"""Writing each byte once: partitions made straight from the plugin's rows.

When every task says how many rows it yields (the ``task_rows`` hook), where each row lands is
known before any row is made: partition p holds global rows ``bounds(total, P)[p]``, which are a
run of whole tasks plus, at its ends, part of a task it shares with its neighbour. A worker then
writes partition p itself, running those tasks in order and keeping only its rows, with no
staged fragment in between: each payload byte is written once, and the checksum is computed on
the way. A shared task is run by both partitions (each keeps its part): its rows are made again,
never written twice; when that would make more than 1.5 rows per row written (tasks much larger
than partitions), the run takes the staged path instead.

Every count is checked as the rows come: a task that yields more or fewer rows than it announced
fails the run, naming the task, the count announced and the count yielded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from recordmill.dataset.rows import bounds
from recordmill.dataset.storage import Store
from recordmill.engine.batches import TaskJob, TaskResult, task_batches
from recordmill.engine.partitions import (
    PartitionInfo,
    Written,
    default_row_group_size,
    unfinished,
    write_file,
)
from recordmill.engine.records import ChunkResult, add_run
from recordmill.engine.settings import WriteSettings
from recordmill.engine.tasks import CHUNKS
from recordmill.errors import PluginError, TaskError
from recordmill.plugin.manager import PluginRef

if TYPE_CHECKING:
    from recordmill.engine.output import OutputDir
    from recordmill.engine.plan import Run
    from recordmill.executors import Executor

# At most this many rows made for each row written, else the staged path is taken.
MAX_REMADE = 1.5


@dataclass(frozen=True)
class Segment:
    """Rows ``first`` to ``end`` of task ``task_id``, which announced ``announced`` rows."""

    task_id: int
    first: int
    end: int
    announced: int


@dataclass(frozen=True)
class DirectJob:
    """Partition ``index`` of ``count``: global rows ``start`` to ``stop``, made from
    ``segments`` of tasks by the plugin itself."""

    index: int
    count: int
    start: int
    stop: int
    segments: tuple[Segment, ...]
    plugin: PluginRef
    options: Any
    schema: pa.Schema
    staging: Store
    settings: WriteSettings
    row_group_size: int
    version: int = 1  # the dataset version it belongs to: its file's name says it


def plan(counts: Sequence[int], partitions: int) -> list[tuple[int, int, tuple[Segment, ...]]]:
    """(start, stop, segments) of each partition: sizes differing by at most one row."""
    starts = [0]
    for n in counts:
        starts.append(starts[-1] + n)
    out = []
    for lo, hi in bounds(starts[-1], partitions):
        segments = tuple(
            Segment(t, max(lo, a) - a, min(hi, b) - a, n)
            for t, (a, b, n) in enumerate(zip(starts, starts[1:], counts, strict=False))
            if n and max(lo, a) < min(hi, b)
        )
        out.append((lo, hi, segments))
    return out


def pays(counts: Sequence[int], partitions: int) -> bool:
    """Whether writing straight from the rows costs little extra making of rows: a partition
    that starts inside a task makes that task's rows from its first one, so tasks much larger
    than partitions would be made several times over (then the staged path is cheaper)."""
    total = sum(counts)
    made = sum(s.end for _, _, segments in plan(counts, partitions) for s in segments)
    return made <= total * MAX_REMADE


def default_group_size(
    plugin: PluginRef,
    options: Any,
    schema: pa.Schema,
    staging: Store,
    settings: WriteSettings,
    counts: Sequence[int],
) -> int:
    """The row group size for rows not made yet: from the schema where each row has the same
    size (numbers and bools only), else from the size of the first rows of the first task with
    any (made here, in the main process, and thrown away)."""
    total = sum(counts)
    width = _fixed_width(schema)
    if width is not None:  # no row to make: a CSV task of numbers is read once, not twice
        return default_row_group_size(total, total * max(1, width), settings.format)
    task_id = next(t for t, n in enumerate(counts) if n)
    job = TaskJob(plugin, options, task_id, schema, staging, settings)
    batches = task_batches(job, TaskResult(task_id, rows=0, schema=schema))
    try:
        first = next(batches, None)
    finally:
        batches.close()
    if first is None:
        raise TaskError(
            task_id, f"task_rows() announced {counts[task_id]} rows, dict_data() yielded 0"
        )
    per_row = first.nbytes // max(1, first.num_rows)
    return default_row_group_size(total, total * max(1, per_row), settings.format)


def _fixed_width(schema: pa.Schema) -> int | None:
    """The bytes of a row in Arrow when every field is a number or a bool (a bool is a bit; as
    ``nbytes`` of a batch without nulls counts them), else None."""
    fixed = (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean)
    if not all(any(kind(field.type) for kind in fixed) for field in schema):
        return None
    return sum(field.type.bit_width for field in schema) // 8  # floored, as measured


def write_direct_partition(
    job: DirectJob, report: Callable[[Any], None] = lambda _: None
) -> PartitionInfo:
    """Make this partition's rows with the plugin and write them, checking every task's count."""
    return write_file(job, _rows(job), report)


def _rows(job: DirectJob) -> Iterator[pa.RecordBatch]:
    for segment in job.segments:
        task = TaskJob(
            job.plugin, job.options, segment.task_id, job.schema, job.staging, job.settings
        )
        result = TaskResult(segment.task_id, rows=0, schema=job.schema)
        seen = 0
        batches = task_batches(task, result)
        try:
            # A Reject cannot come here: this path runs under --on-bad-input fail, where
            # task_batches fails the task on a Reject (the rows announced stay exact).
            for batch in batches:
                lo, hi = max(segment.first - seen, 0), min(segment.end - seen, batch.num_rows)
                if lo < hi:
                    yield batch.slice(lo, hi - lo)
                seen += batch.num_rows
                if seen > segment.announced:
                    break
                if seen >= segment.end and segment.end < segment.announced:
                    break  # the rest of this task belongs to the next partition
        finally:
            batches.close()
        if seen > segment.announced or seen < segment.end:
            got = f"more than {segment.announced}" if seen > segment.announced else str(seen)
            raise TaskError(
                segment.task_id,
                f"task_rows() announced {segment.announced} rows, dict_data() yielded {got}",
            )


def announced_rows(run: Run) -> list[int] | None:
    """Every task's row count, when the run can write each byte once (see recordmill.engine.direct):
    all tasks announce theirs, the schema is declared, no shuffle, bad input fails the run, the
    tasks are not too many to run one by one, and not much larger than the partitions."""
    settings = run.settings
    if settings.shuffle or run.declared is None or settings.on_bad_input != "fail":
        return None
    if settings.dedup_key:
        return None  # duplicates are found among the staged rows (dedup.py), then left out
    if run.tasks > CHUNKS:
        return None  # tasks too many to run one by one: the staged path runs them in chunks
    counts = []
    for task_id in range(run.tasks):
        n = run.plugin.task_rows(task_id, run.options)
        if n is None:
            return None
        counts.append(n)
    if not sum(counts) or not pays(counts, settings.partitions):
        return None  # an empty dataset takes the staged path, which writes it
    return counts


def write_direct(
    run: Run, out: OutputDir, runner: Executor, counts: list[int]
) -> tuple[list[ChunkResult], Written, float]:
    """Phases 2 and 3 in one: each partition made straight from the plugin's rows."""
    started = time.perf_counter()
    if not sum(counts):
        raise PluginError(
            f"plugin {run.plugin.name} announced no rows in any of its {run.tasks} tasks"
        )
    schema = run.declared
    rg_size = run.row_group_size or default_group_size(
        run.plugin.ref, run.options, schema, out.staging, run.settings, counts
    )
    jobs = [
        DirectJob(
            index,
            run.settings.partitions,
            lo,
            hi,
            segments,
            run.plugin.ref,
            run.options,
            schema,
            out.staging,
            run.settings,
            rg_size,
            run.version,
        )
        for index, (lo, hi, segments) in enumerate(plan(counts, run.settings.partitions))
    ]
    finished, todo = unfinished(out, jobs)
    written_now = runner.run(
        write_direct_partition,
        todo,
        f"{run.plugin.name}: partitions",
        "partition",
        run.settings.progress,
    )
    finished.update((job.index, info) for job, info in zip(todo, written_now, strict=True))
    results = [ChunkResult(0)]
    for n in counts:
        add_run(results[0].task_rows, n)
    written = Written([finished[job.index] for job in jobs], schema, rg_size)
    return results, written, time.perf_counter() - started
