"""One task's rows as checked Arrow batches, in the worker that runs it: the plugin's ``dict_data``
called, its rows taken a batch at a time (the first batch small, to measure the rows' size), each
batch checked against the schema and converted (``convert``), rejects set aside, and every error
named by its task and row."""

from __future__ import annotations

import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import pyarrow as pa

from recordmill.dataset.rejects import Reject
from recordmill.dataset.schema import infer_schema
from recordmill.dataset.storage import Store
from recordmill.engine.convert import RowConverter
from recordmill.engine.quiet import quieted
from recordmill.engine.settings import WriteSettings
from recordmill.errors import SKIP_HINT, RecordmillError, RowError, TaskError
from recordmill.kit import Source
from recordmill.plugin.manager import DatasetPlugin, PluginRef
from recordmill.plugin.options import Options

# Batches aim at this many bytes; the first batch is small and measures the row size.
BATCH_BYTES = 8 << 20


FIRST_BATCH_ROWS = 64


MAX_BATCH_ROWS = 65536


@dataclass(frozen=True)
class TaskJob:
    """One task, as :func:`task_batches` runs it."""

    plugin: PluginRef
    options: Any
    task_id: int
    schema: pa.Schema | None  # None: infer from the task's first row
    staging: Store
    settings: WriteSettings


@dataclass
class TaskResult:
    """What one task produced besides its batches: rows, rejects, and the schema (inferred from
    its first row when none was declared)."""

    task_id: int
    rows: int = 0
    schema: pa.Schema | None = None
    rejects: list[Reject] = field(default_factory=list)


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


def _task_batches(job: TaskJob, result: TaskResult) -> Iterator[pa.RecordBatch]:
    task_id = job.task_id
    try:
        # The bad-input policy reaches the plugin as an option (see README: images), also under
        # its old names for plugins that still read them (until the next release).
        policy = job.settings.on_bad_input
        old = dict.fromkeys(("on_bad_file", "on_bad_record"), policy)
        options = Options({**old, **vars(job.options), "on_bad_input": policy})
        rows = _rows(_plugin(job.plugin).dict_data(task_id, options), task_id)
    except RecordmillError:
        raise
    except Exception as e:
        raise _plugin_failed(task_id, e) from e
    converter = None  # made for the first rows: an empty task (there may be millions) needs none
    # The input of the rows (kit.Source), and the task's row number of the input's row 0.
    source: tuple[str, int] | None = None
    limit = FIRST_BATCH_ROWS
    position = 0  # rows the plugin yielded so far: the row numbers errors and rejects give
    while True:
        chunk: list[Any] = []
        try:
            # extend() keeps the rows taken before a plugin error, so its position is exact.
            chunk.extend(islice(rows, limit))
        except Exception as e:
            raise _plugin_failed(task_id, e, row=position + _rows_in(chunk)) from e
        if not chunk:
            return
        for part in _parts(chunk, result, job):
            if isinstance(part, Source):  # the rows after it are of this input
                source = (part.name, position - part.first)
                continue
            if converter is None:
                converter = _first_converter(job, part, position, result)
            try:
                if isinstance(part, list):
                    yielded = len(part)  # _convert takes the rows it rejects out of part
                    batch = _convert(converter, part, position, job, result, source)
                    position += yielded
                else:
                    batch = _from_arrow(part, converter.schema, task_id, position)
                    position += batch.num_rows
            except RowError as e:
                raise e.located(task_id, source=source) from None
            if batch is None or not batch.num_rows:
                continue
            if limit == FIRST_BATCH_ROWS:  # the first batch measured the rows' size
                per_row = max(1, batch.nbytes // batch.num_rows)
                limit = max(FIRST_BATCH_ROWS, min(MAX_BATCH_ROWS, BATCH_BYTES // per_row))
            yield batch


_ARROW = (pa.RecordBatch, pa.Table)


def _parts(chunk: list[Any], result: TaskResult, job: TaskJob) -> Iterator[Any]:
    """A chunk of what ``dict_data`` yielded without its Rejects (set aside in ``result``): runs
    of row dicts (lists), the Arrow batches or tables a plugin yields whole, and the
    ``kit.Source`` markers that say which input the rows after them come from."""
    kinds = set(map(type, chunk))
    if Reject in kinds:
        rejects = [r for r in chunk if type(r) is Reject]
        if job.settings.on_bad_input != "skip":
            # A Reject is bad input, as the docs say of bad input: it fails the run unless skip.
            raise _rejected(job.task_id, rejects[0])
        result.rejects += rejects
        chunk = [r for r in chunk if type(r) is not Reject]
    if not kinds & {*_ARROW, Source}:
        if chunk:
            yield chunk
        return
    run: list[Any] = []
    for item in chunk:
        if isinstance(item, (*_ARROW, Source)):
            if run:
                yield run
            run = []
            yield item
        else:
            run.append(item)
    if run:
        yield run


def _first_converter(job: TaskJob, part: Any, position: int, result: TaskResult) -> RowConverter:
    """The declared schema's converter, or one of the schema inferred from the first rows (an
    Arrow batch's own schema, when the plugin yields them)."""
    if job.schema is not None:
        return RowConverter(job.schema)
    try:
        schema = part.schema if isinstance(part, _ARROW) else infer_schema(part[0], part[1:])
    except RowError as e:
        raise e.located(job.task_id, position) from None
    result.schema = schema.remove_metadata() if isinstance(part, _ARROW) else schema
    return RowConverter(result.schema)


def _from_arrow(
    item: pa.RecordBatch | pa.Table, schema: pa.Schema, task_id: int, position: int
) -> pa.RecordBatch:
    """A batch or table the plugin yielded whole, as one batch of the schema: its columns by
    name, cast where that loses nothing (else one line naming the column), no null where the
    field takes none."""
    where = (
        f"rows {position:,} to {position + item.num_rows - 1:,} (a pyarrow {type(item).__name__})"
    )
    missing = [name for name in schema.names if name not in item.schema.names]
    extra = [name for name in item.schema.names if name not in schema.names]
    if missing or extra:
        said = f"no column {missing[0]!r}" if missing else f"a column {extra[0]!r} not in it"
        raise RowError(f"{where}: has {said} of the schema").located(task_id)
    columns = []
    for wanted in schema:
        column = item.column(wanted.name)
        try:
            column = column.cast(wanted.type) if column.type != wanted.type else column
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            said = f"column {wanted.name!r} is {column.type}, cannot be {wanted.type}: {e}"
            raise RowError(f"{where}: {said}").located(task_id) from None
        if column.null_count and not wanted.nullable:
            raise RowError(f"{where}: column {wanted.name!r} holds nulls").located(task_id)
        columns.append(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _rows(returned: Any, task_id: int) -> Iterator[Any]:
    """An iterator over what ``dict_data`` returned; anything that is not rows (None, a number,
    a single dict, a string) is the plugin's mistake, said in one line."""
    if not isinstance(returned, (Mapping, str, bytes)):
        try:
            return iter(returned)
        except TypeError:
            pass
    shown = repr(returned)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    if returned is not None:
        shown = f"{type(returned).__name__} {shown}"
    raise TaskError(
        task_id,
        f"dict_data() must yield dicts (return an iterable or use yield), it returned {shown}",
    )


def _convert(
    converter: RowConverter,
    chunk: list[Any],
    position: int,
    job: TaskJob,
    result: TaskResult,
    source: tuple[str, int] | None = None,
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
            ).located(job.task_id, source=source)
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
            where = f"task {job.task_id} row {numbers[index]}"
            if source is not None:
                where = f"{source[0]} row {numbers[index] - source[1]} ({where})"
            result.rejects.append(
                Reject(
                    where,
                    str(error),
                    row=numbers[index],
                    field=e.field,
                    value=None if value is None else repr(value)[:200],
                )
            )
            del chunk[index]
            del numbers[index]
    return None


def _rejected(task_id: int, reject: Reject) -> TaskError:
    """A Reject the plugin yielded under ``--on-bad-input fail``: the run fails, naming it."""
    return TaskError(task_id, f"the plugin rejected {reject.source}: {reject.reason} {SKIP_HINT}")


def _rows_in(chunk: list[Any]) -> int:
    """The rows among what the plugin yielded (not its Source markers or Rejects)."""
    return sum(
        item.num_rows
        if isinstance(item, _ARROW)
        else 0
        if isinstance(item, (Source, Reject))
        else 1
        for item in chunk
    )


def _plugin_failed(task_id: int, error: Exception, row: int | None = None) -> TaskError:
    # Raised before the task's first row: about the task, not a row of it.
    where = f" at row {row}" if row else ""
    if isinstance(error, RecordmillError):
        # Raised by a recordmill helper the plugin uses: its message says it all, no traceback.
        # The row goes with what it locates, before the advice that ends a bad-input message.
        text = str(error)
        if where and text.endswith(SKIP_HINT):
            text = f"{text[: -len(SKIP_HINT)].rstrip()}{where} {SKIP_HINT}"
            where = ""
        return TaskError(task_id, f"{text}{where}")
    return TaskError(
        task_id,
        f"dict_data() raised {type(error).__name__}: {error}{where}",
        "".join(traceback.format_exception(error)),
    )
