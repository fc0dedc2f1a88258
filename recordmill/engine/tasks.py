"""Running tasks in a worker: the plugin's rows -> checked Arrow batches -> a staged fragment.

Tasks go to the workers in chunks of consecutive tasks (one task each while there are at most
``CHUNKS`` tasks; more, a million empty ones say, cost a message, a file and a record per chunk,
not per task). A chunk writes the rows of its tasks, in task order, to one Arrow IPC file in the
staging folder (``task-000007.arrow``, named by its first task), then a small record
(``task-000007.json``) that marks all its tasks done.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from itertools import islice
from typing import Any

import pyarrow as pa

from recordmill.dataset import layout
from recordmill.dataset.rejects import Reject, too_many
from recordmill.dataset.schema import check_same_schema, infer_schema
from recordmill.dataset.storage import Store
from recordmill.engine.convert import RowConverter
from recordmill.engine.settings import WriteSettings
from recordmill.errors import RecordmillError, RowError, TaskError, writing
from recordmill.plugin.manager import DatasetPlugin, PluginRef
from recordmill.plugin.options import Options

# Batches aim at this many bytes; the first batch is small and measures the row size.
BATCH_BYTES = 8 << 20
FIRST_BATCH_ROWS = 64
MAX_BATCH_ROWS = 65536
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
class TaskJob:
    """One task, as :func:`task_batches` runs it."""

    plugin: PluginRef
    options: Any
    task_id: int
    schema: pa.Schema | None  # None: infer from the task's first row
    staging: Store
    settings: WriteSettings


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


@dataclass
class TaskResult:
    """What one task produced besides its batches: rows, rejects, and the schema (inferred from
    its first row when none was declared)."""

    task_id: int
    rows: int = 0
    schema: pa.Schema | None = None
    rejects: list[Reject] = field(default_factory=list)


@dataclass
class ChunkResult:
    """What a chunk of tasks produced: each task's row count (as runs ``[rows, tasks]``), the
    batches of its fragment, and its rejects with their task ids."""

    first: int  # the chunk's first task: it names the fragment and the record
    task_rows: list[list[int]] = field(default_factory=list)
    batch_rows: list[int] = field(default_factory=list)
    nbytes: int = 0
    schema: pa.Schema | None = None
    schema_task: int | None = None  # the task whose rows gave the schema
    rejects: list[tuple[int, Reject]] = field(default_factory=list)

    @property
    def tasks(self) -> range:
        return range(self.first, self.first + sum(count for _, count in self.task_rows))

    @property
    def rows(self) -> int:
        return sum(rows * count for rows, count in self.task_rows)

    def progress(self) -> tuple[int, int]:
        """(rows, bytes) done, for the progress bar."""
        return self.rows, self.nbytes


def add_run(runs: list[list[int]], rows: int, count: int = 1) -> None:
    """Append ``count`` tasks of ``rows`` rows to run-length counts ``runs``."""
    if runs and runs[-1][0] == rows:
        runs[-1][1] += count
    else:
        runs.append([rows, count])


def save_record(staging: Store, result: ChunkResult) -> None:
    """Record a finished chunk (after its fragment is complete): what ``--resume`` reads."""
    record = {
        "first": result.first,
        "task_rows": result.task_rows,
        "batch_rows": result.batch_rows,
        "nbytes": result.nbytes,
        "schema": None
        if result.schema is None
        else base64.b64encode(result.schema.serialize().to_pybytes()).decode("ascii"),
        "schema_task": result.schema_task,
        "rejects": [[task_id, asdict(r)] for task_id, r in result.rejects],
    }
    staging.write_text(layout.task_record_file(result.first), json.dumps(record))


def load_records(staging: Store) -> list[ChunkResult]:
    """The finished chunks of an interrupted run, in task order."""
    found = []
    for name in staging.listdir(layout.TASKS_DIR):
        match = layout.TASK_RECORD.match(name)
        if match is None:
            continue
        record = json.loads(staging.read_text(layout.TASKS_DIR, name))
        if "first" not in record:  # one task's record, as recordmill 0.1.0 wrote them
            task_id = record["task_id"]
            record |= {
                "first": task_id,
                "task_rows": [[record["rows"], 1]],
                "schema_task": task_id,
                "rejects": [[task_id, r] for r in record["rejects"]],
            }
        schema = record["schema"]
        found.append(
            ChunkResult(
                record["first"],
                task_rows=record["task_rows"],
                batch_rows=record["batch_rows"],
                nbytes=record["nbytes"],
                schema=None
                if schema is None
                else pa.ipc.read_schema(pa.py_buffer(base64.b64decode(schema))),
                schema_task=record["schema_task"],
                rejects=[(task_id, Reject(**r)) for task_id, r in record["rejects"]],
            )
        )
    return sorted(found, key=lambda r: r.first)


_plugins: dict[PluginRef, DatasetPlugin] = {}


def _plugin(ref: PluginRef) -> DatasetPlugin:
    if ref not in _plugins:
        _plugins[ref] = DatasetPlugin(ref)
    return _plugins[ref]


def task_batches(job: TaskJob, result: TaskResult) -> Iterator[pa.RecordBatch]:
    """The rows of one task as checked Arrow batches. Rejected inputs go to ``result.rejects``;
    with no schema declared, ``result.schema`` is the one inferred from the first row."""
    with quieted(job.settings):
        yield from _task_batches(job, result)


@contextlib.contextmanager
def quieted(settings: WriteSettings) -> Iterator[None]:
    """With ``--quiet``, nor the warnings of the plugin or its libraries, nor what C libraries
    print themselves, while tasks run."""
    with warnings.catch_warnings(), contextlib.ExitStack() as quiet:
        if not settings.progress:
            warnings.simplefilter("ignore")
            quiet.enter_context(_silent_stderr())
        yield


_silenced = {"count": 0, "saved": -1}  # tasks running silenced (threads of a Dask worker)
_silenced_lock = threading.Lock()


@contextlib.contextmanager
def _silent_stderr() -> Iterator[None]:
    """Standard error (file descriptor 2) sent to the null device: what C libraries print there
    themselves (libtiff's warnings), which Python's warnings filter never sees. Errors still
    reach the user: the worker sends them to the main process, which prints them. The first
    task in redirects, the last out restores, for tasks that run in threads of one process."""
    with _silenced_lock:
        if not _silenced["count"]:
            sys.stderr.flush()
            _silenced["saved"] = os.dup(2)
            with open(os.devnull, "wb") as null:
                os.dup2(null.fileno(), 2)
        _silenced["count"] += 1
    try:
        yield
    finally:
        with _silenced_lock:
            _silenced["count"] -= 1
            if not _silenced["count"]:
                sys.stderr.flush()
                os.dup2(_silenced["saved"], 2)
                os.close(_silenced["saved"])


def _task_batches(job: TaskJob, result: TaskResult) -> Iterator[pa.RecordBatch]:
    task_id = job.task_id
    try:
        # The bad-input policy reaches the plugin as an option (see README: images), also under
        # its old names for plugins that still read them (until the next release).
        policy = job.settings.on_bad_input
        old = dict.fromkeys(("on_bad_file", "on_bad_record"), policy)
        options = Options({**old, **vars(job.options), "on_bad_input": policy})
        rows = _plugin(job.plugin).dict_data(task_id, options)
        if rows is None:
            raise TaskError(task_id, "dict_data() returned None; it must yield (or return) rows")
        rows = iter(rows)
    except RecordmillError:
        raise
    except Exception as e:
        raise _plugin_failed(task_id, e) from e
    converter = None  # made for the first rows: an empty task (there may be millions) needs none
    limit = FIRST_BATCH_ROWS
    position = 0  # rows the plugin yielded so far: the row numbers errors and rejects give
    while True:
        chunk: list[Any] = []
        try:
            # extend() keeps the rows taken before a plugin error, so its position is exact.
            chunk.extend(islice(rows, limit))
        except Exception as e:
            raise _plugin_failed(task_id, e, row=position + len(chunk)) from e
        if not chunk:
            return
        if Reject in set(map(type, chunk)):
            result.rejects += [r for r in chunk if type(r) is Reject]
            chunk = [r for r in chunk if type(r) is not Reject]
            if not chunk:
                continue
        if converter is None and job.schema is not None:
            converter = RowConverter(job.schema)
        elif converter is None:
            try:
                converter = RowConverter(infer_schema(chunk[0]))
            except RowError as e:
                raise e.located(task_id, position) from None
            result.schema = converter.schema
        batch = _convert(converter, chunk, position, job, result)
        position += len(chunk)
        if batch is None:
            continue
        if limit == FIRST_BATCH_ROWS:  # the first batch measured the rows' size
            per_row = max(1, batch.nbytes // batch.num_rows)
            limit = max(FIRST_BATCH_ROWS, min(MAX_BATCH_ROWS, BATCH_BYTES // per_row))
        yield batch


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
                writer.close()
                sink.close()
                writer = None
            staging.makedirs(layout.TASKS_DIR)
            # The record, written last, is what marks the tasks done: a fragment without one is
            # from a run that died, and is written again.
            save_record(staging, result)
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
            raise too_many(len(result.rejects), limit, result.rejects[-1][1])
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


def _convert(
    converter: RowConverter, chunk: list[Any], position: int, job: TaskJob, result: TaskResult
) -> pa.RecordBatch | None:
    """The chunk as a batch; with ``on_bad_input="skip"``, without the rows that do not fit, each
    recorded as a reject (None when no row is left). ``position`` numbers the chunk's first row."""
    numbers: list[int] | None = None  # the rows' own numbers, once some were taken out
    while chunk:
        try:
            return converter.to_batch(chunk)
        except RowError as e:
            if e.row is None:
                raise e.located(job.task_id) from None
            index = e.row
            if numbers is None:
                numbers = list(range(position, position + len(chunk)))
            error = RowError(
                e.reason, row=numbers[index], field=e.field, expected=e.expected, got=e.got
            ).located(job.task_id)
            if job.settings.on_bad_input != "skip":
                if job.schema is None and e.field is not None:
                    error.reason += (
                        " (the schema was inferred from the task's first row; "
                        "a schema() hook sets it)"
                    )
                raise error.located(job.task_id) from None
            # Take the bad row out and convert the rest again: cheap while bad rows are rare.
            row = chunk[index]
            value = row.get(e.field) if isinstance(row, Mapping) and e.field else None
            result.rejects.append(
                Reject(
                    f"task {job.task_id} row {numbers[index]}",
                    str(error),
                    row=numbers[index],
                    field=e.field,
                    value=None if value is None else repr(value)[:200],
                )
            )
            del chunk[index]
            del numbers[index]
    return None


def _plugin_failed(task_id: int, error: Exception, row: int | None = None) -> TaskError:
    where = f" at row {row}" if row is not None else ""
    if isinstance(error, RecordmillError):
        # Raised by a recordmill helper the plugin uses: its message says it all, no traceback.
        return TaskError(task_id, f"{error}{where}")
    return TaskError(
        task_id,
        f"dict_data() raised {type(error).__name__}: {error}{where}",
        "".join(traceback.format_exception(error)),
    )
