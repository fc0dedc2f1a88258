"""``--dedup-key FIELD[,FIELD...]``: a row whose key is already in the dataset (any version) or
earlier in the same run becomes a reject, not a row.

Duplicates are found in the main process between the tasks phase and the partitions phase, from
the key columns alone: the dataset's, read from its partitions in order, then the staged rows',
read from the fragments in global order (task by task). The first row with a key is the one kept,
so what is kept depends on the tasks and the dataset only, never on ``--workers``. The partitions
phase then writes the rows kept (``keep``, see partitions.py) and each duplicate is a reject of
its task: "duplicate of version 2, row 1,234" (the dataset's row with that key) or "duplicate of
task 3, row 17 of this run". Without the flag nothing is compared.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from recordmill.dataset import layout, versions
from recordmill.dataset import manifest as manifest_file
from recordmill.dataset.rejects import Reject, too_many
from recordmill.dataset.schema import check_same_schema
from recordmill.dataset.storage import Store
from recordmill.engine.records import ChunkResult, add_run
from recordmill.errors import ConfigError

if TYPE_CHECKING:
    from recordmill.engine.output import OutputDir
    from recordmill.engine.plan import Run


@dataclass
class Duplicates:
    """What :func:`find` found: the global rows of this run to keep, the duplicates as rejects
    of their tasks (in global order), each task's rows kept (run-length ``[rows, tasks]``)."""

    keep: np.ndarray
    rejects: list[tuple[int, Reject]]
    task_rows: list[list[int]]
    seconds: float


def find(run: Run, out: OutputDir, results: list[ChunkResult]) -> Duplicates:
    """The duplicates among this run's staged rows, by the key fields ``--dedup-key`` names."""
    started = time.perf_counter()
    fields = key_fields(run.settings.dedup_key)
    schema = run.declared or check_same_schema({r.schema_task: r.schema for r in results if r.rows})
    check_fields(fields, schema)
    seen: dict[Any, str] = {}
    if run.base is not None:
        row = 0
        for version, table in _dataset_keys(out.final, run.base, fields):
            for key in _keys(table, fields):
                seen.setdefault(key, f"duplicate of version {version}, row {row:,}")
                row += 1
    task_of, row_of = _task_positions(results)
    dropped: list[tuple[int, Reject]] = []
    keep = np.ones(len(task_of), dtype=bool)
    g = 0
    for table in _staged_keys(out.staging, results, fields):
        for key in _keys(table, fields):
            task, row = int(task_of[g]), int(row_of[g])
            where = seen.get(key)
            if where is None:
                seen[key] = f"duplicate of task {task}, row {row} of this run"
            else:
                keep[g] = False
                dropped.append((task, _reject(task, row, where, fields, key)))
            g += 1
    limit = run.settings.max_rejects
    rejected = sum(len(r.rejects) for r in results) + len(dropped)
    if limit is not None and rejected > limit and dropped:
        raise too_many(rejected, limit, dropped[-1][1])
    kept = np.bincount(task_of[keep], minlength=run.tasks) if len(task_of) else [0] * run.tasks
    task_rows: list[list[int]] = []
    for rows in kept:
        add_run(task_rows, int(rows))
    return Duplicates(np.flatnonzero(keep), dropped, task_rows, time.perf_counter() - started)


def check_early(run: Run) -> None:
    """Refuse bad key fields before any task runs, where the schema is known by then (declared,
    or the dataset's that the rows are appended to)."""
    if run.settings.dedup_key is None:
        return
    fields = key_fields(run.settings.dedup_key)
    if not fields:
        raise ConfigError(f"--dedup-key must name fields, got {run.settings.dedup_key!r}")
    if run.declared is not None:
        check_fields(fields, run.declared)
    elif run.base is not None:
        check_fields(fields, manifest_file.arrow_schema(run.base))


def key_fields(dedup_key: str | None) -> list[str]:
    """The fields ``--dedup-key`` names."""
    return [f.strip() for f in (dedup_key or "").split(",") if f.strip()]


def check_fields(fields: list[str], schema: pa.Schema) -> None:
    """Refuse a key field the rows do not have, or one whose values are not plain values."""
    for name in fields:
        if name not in schema.names:
            raise ConfigError(
                f"--dedup-key names field {name!r}, which the rows do not have "
                f"(fields: {', '.join(schema.names)})"
            )
        kind = schema.field(name).type
        if pa.types.is_nested(kind) or isinstance(kind, pa.BaseExtensionType):
            raise ConfigError(
                f"--dedup-key field {name!r} is {kind}; a key is numbers, strings or bytes"
            )


def _keys(table: pa.Table | pa.RecordBatch, fields: list[str]) -> Iterator[Any]:
    """Each row's key: its one key value, or the tuple of them."""
    columns = [table.column(name).to_pylist() for name in fields]
    return iter(columns[0]) if len(columns) == 1 else zip(*columns, strict=True)


def _reject(task: int, row: int, where: str, fields: list[str], key: Any) -> Reject:
    value = repr(key)
    return Reject(
        f"row {row} of task {task}",
        where,
        row=row,
        field=",".join(fields),
        value=value if len(value) <= 200 else value[:197] + "...",
    )


def _task_positions(results: list[ChunkResult]) -> tuple[np.ndarray, np.ndarray]:
    """For each staged row in global order, its task and its number in the task."""
    tasks, sizes = [], []
    for result in results:
        task = result.first
        for rows, count in result.task_rows:
            tasks += range(task, task + count)
            sizes += [rows] * count
            task += count
    sizes_array = np.asarray(sizes, dtype=np.int64)
    task_of = np.repeat(np.asarray(tasks, dtype=np.int64), sizes_array)
    starts = np.repeat(np.cumsum(sizes_array) - sizes_array, sizes_array)
    return task_of, np.arange(len(task_of), dtype=np.int64) - starts


def _staged_keys(
    staging: Store, results: list[ChunkResult], fields: list[str]
) -> Iterator[pa.RecordBatch]:
    """The key columns of the staged rows, in global order."""
    for result in results:
        if not result.rows:
            continue
        reader = pa.ipc.open_file(staging.input_file(layout.fragment_file(result.first)))
        for b in range(reader.num_record_batches):
            yield reader.get_batch(b).select(fields)


def _dataset_keys(
    final: Store, base: dict[str, Any], fields: list[str]
) -> Iterator[tuple[int, pa.Table]]:
    """The key columns of the dataset's partitions, in order, with the version of each."""
    for entry in base["partitions"]:
        if base["format"] == "arrow":
            table = pa.ipc.open_file(final.input_file(entry["file"])).read_all().select(fields)
        else:
            # ParquetFile reads just the key columns' chunks; read_table() (the datasets API)
            # took ten times as long here, reading more of each file.
            with final.opened(final.fs.open_input_file, entry["file"]) as f:
                table = pq.ParquetFile(f).read(columns=fields)
        yield versions.version_of(entry), table
