"""Running one task in a worker: the plugin's rows -> checked Arrow batches -> a staged fragment.

Each task writes its rows to its own Arrow IPC file in the staging folder (``task-000007.arrow``),
then a small record (``task-000007.json``) that marks the task as done.
"""

from __future__ import annotations

import base64
import contextlib
import json
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from itertools import islice
from typing import Any

import pyarrow as pa

from recordmill import layout
from recordmill.convert import RowConverter
from recordmill.errors import RecordmillError, RowError, TaskError, writing
from recordmill.options import Options
from recordmill.plugins import DatasetPlugin, PluginRef
from recordmill.rejects import Reject
from recordmill.schema import infer_schema
from recordmill.settings import WriteSettings
from recordmill.storage import Store

# Batches aim at this many bytes; the first batch is small and measures the row size.
BATCH_BYTES = 8 << 20
FIRST_BATCH_ROWS = 64
MAX_BATCH_ROWS = 65536


@dataclass(frozen=True)
class TaskJob:
    plugin: PluginRef
    options: Any
    task_id: int
    schema: pa.Schema | None  # None: infer from the task's first row
    staging: Store
    settings: WriteSettings


@dataclass
class TaskResult:
    task_id: int
    rows: int
    batch_rows: list[int] = field(default_factory=list)
    nbytes: int = 0
    schema: pa.Schema | None = None
    rejects: list[Reject] = field(default_factory=list)

    def progress(self) -> tuple[int, int]:
        """(rows, bytes) done, for the progress bar."""
        return self.rows, self.nbytes


def save_record(staging: Store, result: TaskResult) -> None:
    """Record a finished task (after its fragment is complete): what ``--resume`` reads."""
    record = {
        "task_id": result.task_id,
        "rows": result.rows,
        "batch_rows": result.batch_rows,
        "nbytes": result.nbytes,
        "schema": None
        if result.schema is None
        else base64.b64encode(result.schema.serialize().to_pybytes()).decode("ascii"),
        "rejects": [asdict(r) for r in result.rejects],
    }
    staging.write_text(layout.task_record_file(result.task_id), json.dumps(record))


def load_record(staging: Store, task_id: int) -> TaskResult | None:
    """A finished task's result, or None when the task did not finish."""
    if not staging.is_file(layout.task_record_file(task_id)):
        return None
    record = json.loads(staging.read_text(layout.task_record_file(task_id)))
    schema = record["schema"]
    return TaskResult(
        task_id,
        rows=record["rows"],
        batch_rows=record["batch_rows"],
        nbytes=record["nbytes"],
        schema=None
        if schema is None
        else pa.ipc.read_schema(pa.py_buffer(base64.b64decode(schema))),
        rejects=[Reject(**r) for r in record["rejects"]],
    )


_plugins: dict[PluginRef, DatasetPlugin] = {}


def _plugin(ref: PluginRef) -> DatasetPlugin:
    if ref not in _plugins:
        _plugins[ref] = DatasetPlugin(ref)
    return _plugins[ref]


def task_batches(job: TaskJob, result: TaskResult) -> Iterator[pa.RecordBatch]:
    """The rows of one task as checked Arrow batches. Rejected inputs go to ``result.rejects``;
    with no schema declared, ``result.schema`` is the one inferred from the first row."""
    with warnings.catch_warnings():
        if not job.settings.progress:  # --quiet: nor the plugin's or its libraries' warnings
            warnings.simplefilter("ignore")
        yield from _task_batches(job, result)


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
    converter = RowConverter(job.schema) if job.schema is not None else None
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
        if converter is None:
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


def run_task(job: TaskJob, report: Callable[[Any], None] = lambda _: None) -> TaskResult:
    """Produce, check and stage the rows of one task; ``report`` receives ``(rows, bytes)``."""
    result = TaskResult(job.task_id, rows=0, schema=job.schema)
    staging = job.staging
    fragment = layout.fragment_file(job.task_id)
    sink = None
    writer = None
    try:
        for batch in task_batches(job, result):
            with writing(staging.path(fragment)):
                if writer is None:
                    staging.makedirs(layout.TASKS_DIR)
                    sink = staging.output(fragment)
                    writer = pa.ipc.new_file(sink, batch.schema)
                writer.write_batch(batch)
            result.rows += batch.num_rows
            result.batch_rows.append(batch.num_rows)
            result.nbytes += batch.nbytes
            report((batch.num_rows, batch.nbytes))
        with writing(staging.path(fragment)):
            if writer is not None:
                writer.close()
                sink.close()
                writer = None
            staging.makedirs(layout.TASKS_DIR)
            # The record, written last, is what marks the task done: a fragment without one is
            # from a run that died, and is written again.
            save_record(staging, result)
    finally:
        if writer is not None:
            with contextlib.suppress(OSError):  # already failing: the first error is the one
                writer.close()
                sink.close()
            staging.delete(fragment)
    return result


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
