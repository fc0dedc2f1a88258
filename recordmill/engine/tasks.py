"""Phase 2 of a write: running the tasks in the workers, each chunk's rows into a staged fragment.

Tasks go to the workers in chunks of consecutive tasks (one task each while there are at most
``CHUNKS`` tasks; more, a million empty ones say, cost a message, a file and a record per chunk,
not per task). A chunk writes the rows of its tasks (``batches``), in task order, to one Arrow IPC
file in the staging folder (``task-000007.arrow``, named by its first task), then a small record
(``task-000007.json``, see ``records``) that marks all its tasks done.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from recordmill.dataset import layout, rejects
from recordmill.dataset.schema import check_same_schema
from recordmill.dataset.storage import Store
from recordmill.engine.batches import TaskJob, TaskResult, _task_batches
from recordmill.engine.quiet import quieted
from recordmill.engine.records import ChunkResult, add_run, load_records, save_record
from recordmill.engine.settings import WriteSettings
from recordmill.errors import InputError, LeaseLost, PluginError, counted, writing
from recordmill.plugin.manager import PluginRef

if TYPE_CHECKING:
    from recordmill.engine.output import OutputDir
    from recordmill.engine.plan import Run
    from recordmill.executors import Executor


# Past this many tasks, tasks are sent in chunks: about this many chunks, of at most MAX_CHUNK.
CHUNKS = 2048


MAX_CHUNK = 10_000


# Batches smaller than this (the rows of small tasks) are joined before they are staged.
SMALL_BATCH_BYTES = 1 << 20


# A worker reports the rows it made at most this often (a message each for a million small tasks
# would cost more than the tasks).
REPORT_SECONDS = 0.1


def chunks(tasks: int, done: Iterable[range] = (), single: bool = False) -> list[range]:
    """The chunks that run the tasks not ``done`` (finished chunks of an interrupted run):
    consecutive task ids, one task each with ``single`` (``--task-timeout`` times each task)."""
    size = 1 if single or tasks <= CHUNKS else min(MAX_CHUNK, -(-tasks // CHUNKS))
    todo, start = [], 0
    for finished in [*sorted(done, key=lambda r: r.start), range(tasks, tasks)]:
        todo += [
            range(t, min(t + size, finished.start)) for t in range(start, finished.start, size)
        ]
        start = finished.stop
    return todo


@dataclass(frozen=True)
class ChunkJob:
    """Consecutive tasks, run one after the other by one worker into one fragment."""

    plugin: PluginRef
    options: Any
    tasks: range
    schema: pa.Schema | None  # None: infer from each task's first row
    staging: Store
    settings: WriteSettings

    @property
    def name(self) -> str:
        """How messages name the job: ``task 7`` or ``tasks 7-22``."""
        if len(self.tasks) == 1:
            return f"task {self.tasks.start}"
        return f"tasks {self.tasks.start}-{self.tasks.stop - 1}"

    @property
    def size(self) -> int:
        return len(self.tasks)


def run_chunk(job: ChunkJob, report: Callable[[Any], None] = lambda _: None) -> ChunkResult:
    """Produce, check and stage the rows of a chunk of tasks; ``report`` receives ``(rows,
    bytes)``, at most every ``REPORT_SECONDS``."""
    result = ChunkResult(job.tasks.start, schema=job.schema)
    staging = job.staging
    fragment = layout.fragment_file(job.tasks.start)
    sink = writer = None
    unreported = [0, 0]
    reported = time.monotonic()
    try:
        with quieted(job.settings):  # once for the chunk: it costs a file to open
            for batch in _chunk_batches(job, result):
                with writing(staging.path(fragment)):
                    if writer is None:
                        staging.makedirs(layout.TASKS_DIR)
                        sink = staging.output(fragment)
                        writer = pa.ipc.new_file(sink, batch.schema)
                    writer.write_batch(batch)
                result.batch_rows.append(batch.num_rows)
                unreported = [unreported[0] + batch.num_rows, unreported[1] + batch.nbytes]
                if time.monotonic() - reported >= REPORT_SECONDS:
                    report(tuple(unreported))
                    unreported, reported = [0, 0], time.monotonic()
        if unreported[0]:
            report(tuple(unreported))
        with writing(staging.path(fragment)):
            if writer is not None:
                staging.check()  # on object storage the fragment appears when it is closed
                writer.close()
                sink.close()  # flushed as it closes, when the staging folder is
                writer = None
                staging.flush_dir(layout.TASKS_DIR)  # its name too, before the record's
            staging.makedirs(layout.TASKS_DIR)
            # The record, written last, is what marks the tasks done: a fragment without one is
            # from a run that died, and is written again.
            save_record(staging, result)
    except LeaseLost:  # the staging folder is another run's now: nothing of ours appears there
        if writer is not None:
            Store.abandon(writer, sink)
            writer = None
        raise
    finally:
        if writer is not None:
            with contextlib.suppress(OSError):  # already failing: the first error is the one
                writer.close()
                sink.close()
            staging.delete(fragment)
    return result


def _chunk_batches(job: ChunkJob, result: ChunkResult) -> Iterator[pa.RecordBatch]:
    """The batches of the chunk's tasks, in order, batches smaller than ``SMALL_BATCH_BYTES``
    (small tasks) joined; each task's rows and rejects counted in ``result``. Inferred schemas
    must agree from task to task, as across chunks."""
    small: list[pa.RecordBatch] = []
    small_bytes = 0
    for task_id in job.tasks:
        task = TaskJob(job.plugin, job.options, task_id, job.schema, job.staging, job.settings)
        done = TaskResult(task_id, schema=job.schema)
        for batch in _task_batches(task, done):
            if job.schema is None:
                _same_schema(result, task_id, done.schema)
            done.rows += batch.num_rows
            result.nbytes += batch.nbytes
            if not small and batch.nbytes >= SMALL_BATCH_BYTES:
                yield batch
                continue
            small.append(batch)
            small_bytes += batch.nbytes
            if small_bytes >= SMALL_BATCH_BYTES:
                yield _joined(small)
                small, small_bytes = [], 0
        add_run(result.task_rows, done.rows)
        result.rejects += [(task_id, r) for r in done.rejects]
        limit = job.settings.max_rejects
        if limit is not None and len(result.rejects) > limit:  # no need to finish the chunk
            raise rejects.too_many(len(result.rejects), limit, result.rejects[-1][1])
    if small:
        yield _joined(small)


def _same_schema(result: ChunkResult, task_id: int, schema: pa.Schema | None) -> None:
    """Take the first task's inferred schema for the chunk; later tasks must agree with it."""
    if result.schema is None:
        result.schema, result.schema_task = schema, task_id
    elif result.schema_task != task_id and schema is not None:
        check_same_schema({result.schema_task: result.schema, task_id: schema})


def _joined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


def run_tasks(run: Run, out: OutputDir, runner: Executor) -> tuple[list[ChunkResult], float]:
    """Phase 2: every task not finished yet, in chunks, each into its staged fragment; the
    results of all chunks in task order, and the seconds it took."""
    started = time.perf_counter()
    done = load_records(out.staging) if out.resumed else []
    jobs = [
        ChunkJob(run.plugin.ref, run.options, tasks, run.declared, out.staging, run.settings)
        for tasks in chunks(
            run.tasks, [r.tasks for r in done], single=run.settings.task_timeout is not None
        )
    ]
    new = runner.run(
        run_chunk,
        jobs,
        f"{run.plugin.name}: tasks",
        "task",
        run.settings.progress,
        on_result=_reject_counter(run.settings.max_rejects, done),
    )
    results = sorted([*done, *new], key=lambda r: r.first)
    rejected = sum(len(r.rejects) for r in results)
    if not sum(r.rows for r in results) and not rejected and run.plugin.ref.source == "builtin":
        # Every input ends up as a row or a reject: an input that gives neither is a mistake.
        raise InputError(
            f"plugin {run.plugin.name}: {_input_of(run)} gave no row (and no bad input) in "
            f"{counted(run.tasks, 'task')}: nothing to write"
        )
    if not sum(r.rows for r in results) and run.declared is None:
        raise PluginError(
            f"plugin {run.plugin.name} produced no rows in any of its {run.tasks} tasks"
            + (f" ({counted(rejected, 'input')} rejected)" if rejected else "")
            + "; an empty dataset needs its schema declared (a schema() hook)"
        )
    return results, time.perf_counter() - started


def _input_of(run: Run) -> str:
    """How a built-in plugin's input was given: ``--input x.rec``, or all its options."""
    values = run.options.to_dict()
    for name in ("input", "image_dir", "list", "data_dir"):
        if values.get(name) is not None:
            return f"--{name.replace('_', '-')} {values[name]}"
    return f"its input ({values})"


def _reject_counter(
    limit: int | None, earlier: Iterable[ChunkResult]
) -> Callable[[int, ChunkResult], None]:
    """Fail the run as soon as more than ``limit`` inputs were rejected."""
    count = sum(len(r.rejects) for r in earlier)

    def task_done(_: int, result: ChunkResult) -> None:
        nonlocal count
        count += len(result.rejects)
        if limit is not None and count > limit:
            raise rejects.too_many(count, limit, result.rejects[-1][1])

    return task_done
