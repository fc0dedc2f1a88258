"""The write pipeline: plugin tasks -> staged fragments (in parallel) -> P partitions -> manifest.

The engine knows nothing of argparse; the CLI turns flags into a call to :func:`write`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa

from recordmill import executors, layout, rejects
from recordmill import manifest as manifest_file
from recordmill.errors import (
    ConfigError,
    OutputError,
    PluginError,
    RecordmillError,
    writing,
)
from recordmill.options import Options, plugin_options
from recordmill.output import OutputDir
from recordmill.partitions import (
    COMPRESSIONS,
    PartitionInfo,
    PartitionJob,
    default_row_group_size,
    finished_partition,
    fragments_done_after,
    write_partition,
)
from recordmill.plugins import DatasetPlugin, PluginRef, load_plugin
from recordmill.progress import human_size
from recordmill.rows import bounds
from recordmill.schema import check_same_schema, to_arrow_schema
from recordmill.storage import Store
from recordmill.tasks import TaskJob, TaskResult, load_record, run_task


@dataclass
class Summary:
    output: str
    rows: int
    partitions: int
    bytes: int
    seconds: float
    manifest: dict[str, Any]
    phases: dict[str, float]

    def line(self) -> str:
        phases = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.phases.items())
        rejected = self.manifest["rejects"]["count"]
        skipped = (
            f"; {rejected:,} inputs rejected, listed by: recordmill rejects {self.output}"
            if rejected
            else ""
        )
        return (
            f"recordmill: wrote {self.rows:,} rows in {self.partitions} partitions "
            f"({human_size(self.bytes)}, {self.manifest['format']}) to {self.output} "
            f"in {self.seconds:.1f} s ({phases}){skipped}"
        )


def write(
    plugin: str | os.PathLike[str] | PluginRef | ModuleType | DatasetPlugin,
    output: str | os.PathLike[str],
    *,
    options: Options | Mapping[str, Any] | None = None,
    partitions: int = 1,
    workers: int | None = None,
    format: str = "parquet",
    shuffle: bool = False,
    seed: int = 0,
    compression: str = "auto",
    row_group_size: int | None = None,
    overwrite: bool = False,
    resume: bool = False,
    retries: int = 2,
    retries_on_error: bool = False,
    on_bad_row: str = "fail",
    max_rejects: int | None = None,
    executor: str = "process",
    executor_options: Mapping[str, Any] | None = None,
    progress: bool = True,
) -> Summary:
    """Run ``plugin`` and write its rows to ``output`` as ``partitions`` files plus a manifest.

    ``plugin`` is a ``--script`` value (entry-point name, built-in name, folder or .py path), a
    :class:`PluginRef`, or an imported module. ``options`` are the plugin's own options; the ones
    not given take the defaults its ``add_options`` declares. ``resume`` finishes an interrupted
    run on the same output (only its unfinished tasks and partitions are done again); a task
    whose worker process dies is run again up to ``retries`` times, and a task whose plugin code
    raised too when ``retries_on_error``. ``on_bad_row="skip"`` records rows that do not fit the
    schema in the rejects list instead of failing; more than ``max_rejects`` rejected inputs fail the
    run. ``executor`` names where tasks run (``"process"``, ``"dask"``, or an installed one), with
    ``executor_options`` such as ``{"dask_address": "tcp://host:8786"}``.
    """
    started = time.perf_counter()
    if not isinstance(plugin, DatasetPlugin):
        plugin = load_plugin(plugin)
    if not isinstance(options, Options):
        options = plugin_options(plugin, options)
    _check_settings(partitions, workers, format, compression, row_group_size, retries, on_bad_row)
    workers = workers or os.cpu_count() or 1

    n_tasks = plugin.task_number(options)
    declared = _declared_schema(plugin, options)
    settings = {
        "partitions": partitions,
        "format": format,
        "shuffle": shuffle,
        "seed": seed if shuffle else None,
        "compression": compression,
        "row_group_size": row_group_size,
        "on_bad_row": on_bad_row,
    }
    out = OutputDir(output, overwrite=overwrite, resume=resume)
    out.lock()
    try:
        staging = out.prepare()
        _check_run(staging, plugin, options, n_tasks, settings, out.resumed)
        try:
            with executors.create(
                executor,
                workers=min(workers, max(n_tasks, partitions, 1)),
                retries=retries,
                retries_on_error=retries_on_error,
                **(executor_options or {}),
            ) as runner:
                runner.check(plugin, staging)
                done = _finished_tasks(staging, n_tasks) if out.resumed else {}
                jobs = [
                    TaskJob(plugin.ref, options, t, declared, staging, on_bad_row)
                    for t in range(n_tasks)
                    if t not in done
                ]
                tasks_started = time.perf_counter()
                new = runner.run(
                    run_task,
                    jobs,
                    f"{plugin.name}: tasks",
                    "task",
                    progress,
                    on_result=_reject_counter(max_rejects, done.values()),
                )
                results = sorted([*done.values(), *new], key=lambda r: r.task_id)
                partitions_started = time.perf_counter()
                total = sum(r.rows for r in results)
                rejected = [rejects.as_record(r.task_id, j) for r in results for j in r.rejects]
                if total == 0:
                    raise PluginError(
                        f"plugin {plugin.name} produced no rows in any of its {n_tasks} tasks"
                        + (f" ({len(rejected)} inputs rejected)" if rejected else "")
                    )
                schema = declared or check_same_schema(
                    {r.task_id: r.schema for r in results if r.rows}
                )
                rg_size = row_group_size or default_row_group_size(
                    total, sum(r.nbytes for r in results)
                )
                part_jobs = _partition_jobs(
                    results,
                    staging,
                    schema,
                    partitions,
                    format,
                    compression,
                    rg_size,
                    shuffle,
                    seed,
                )
                finished = {
                    job.index: info
                    for job in part_jobs
                    if out.resumed and (info := finished_partition(staging, job)) is not None
                }
                todo = [job for job in part_jobs if job.index not in finished]
                cleaner = _fragment_cleaner(part_jobs, staging, set(finished))
                written_now = runner.run(
                    write_partition,
                    todo,
                    "partitions",
                    "partition",
                    progress,
                    on_result=lambda i, _: cleaner(todo[i].index),
                )
                finished.update(
                    (job.index, info) for job, info in zip(todo, written_now, strict=True)
                )
                infos = [finished[job.index] for job in part_jobs]
                partitions_done = time.perf_counter()
            written = manifest_file.build(
                fmt=format,
                schema=schema,
                partitions=[vars(i) for i in infos],
                tasks=[{"task_id": r.task_id, "rows": r.rows} for r in results],
                rejects={
                    "count": len(rejected),
                    "file": layout.rejects_file(format) if rejected else None,
                },
                plugin={
                    "name": plugin.name,
                    "source": plugin.ref.source,
                    "target": plugin.ref.target,
                    "options": options.to_dict(),
                },
                settings={**settings, "row_group_size": rg_size},
            )
            with writing(staging):
                if rejected:
                    rejects.write(staging, rejected, schema, format)
                for scratch in layout.SCRATCH_DIRS:
                    staging.delete_tree(scratch)
                staging.delete(layout.RUN_FILE)
                out.commit(layout.manifest_file(format), manifest_file.to_bytes(written, schema))
        except KeyboardInterrupt:
            raise  # finished tasks stay in the staging folder, for --resume
        except BaseException:
            out.abort()
            raise
    finally:
        out.release()
    return Summary(
        str(out.final),
        total,
        partitions,
        sum(i.bytes for i in infos),
        time.perf_counter() - started,
        written,
        phases={
            "tasks": partitions_started - tasks_started,
            "partitions": partitions_done - partitions_started,
        },
    )


def _reject_counter(
    limit: int | None, earlier: Iterable[TaskResult]
) -> Callable[[int, TaskResult], None]:
    """Fail the run as soon as more than ``limit`` inputs were rejected."""
    count = sum(len(r.rejects) for r in earlier)

    def task_done(_: int, result: TaskResult) -> None:
        nonlocal count
        count += len(result.rejects)
        if limit is not None and count > limit:
            last = result.rejects[-1]
            raise RecordmillError(
                f"{count} inputs rejected, more than --max-rejects {limit}; "
                f"the last: {last.source}: {last.reason}"
            )

    return task_done


def _check_run(
    staging: Store,
    plugin: DatasetPlugin,
    options: Options,
    n_tasks: int,
    settings: dict[str, Any],
    resumed: bool,
) -> None:
    """Record what this run is; when resuming, refuse a run that is not the same one."""
    run = {
        "plugin": plugin.name,
        "options": options.to_dict(),
        "task_number": n_tasks,
        "settings": settings,
    }
    if resumed and staging.is_file(layout.RUN_FILE):
        before = json.loads(staging.read_text(layout.RUN_FILE))
        changed = [
            f"{key}: {before.get(key)!r} then, {value!r} now"
            for key, value in run.items()
            if before.get(key) != value
        ]
        if changed:
            raise OutputError(
                "cannot --resume: this run differs from the interrupted one ("
                + "; ".join(changed)
                + "). Run it as before, or pass --overwrite to start over"
            )
        return
    staging.write_text(layout.RUN_FILE, json.dumps(run))


def _finished_tasks(staging: Store, n_tasks: int) -> dict[int, TaskResult]:
    return {t: r for t in range(n_tasks) if (r := load_record(staging, t)) is not None}


def _check_settings(
    partitions: int,
    workers: int | None,
    fmt: str,
    compression: str,
    row_group_size: int | None,
    retries: int,
    on_bad_row: str,
) -> None:
    if partitions < 1:
        raise ConfigError(f"--partitions must be at least 1, got {partitions}")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    if fmt not in layout.FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(layout.FORMATS)}, got {fmt!r}")
    if compression not in COMPRESSIONS:
        raise ConfigError(
            f"--compression must be one of {', '.join(COMPRESSIONS)}, got {compression!r}"
        )
    if on_bad_row not in ("fail", "skip"):
        raise ConfigError(f"--on-bad-row must be fail or skip, got {on_bad_row!r}")
    if retries < 0:
        raise ConfigError(f"--retries must be at least 0, got {retries}")
    if row_group_size is not None and row_group_size < 1:
        raise ConfigError(f"--row-group-size must be at least 1, got {row_group_size}")


def _declared_schema(plugin: DatasetPlugin, options: Options) -> pa.Schema | None:
    try:
        declared = plugin.schema(options)
    except RecordmillError:
        raise
    except Exception as e:
        raise PluginError(f"plugin {plugin.name}: schema() raised {type(e).__name__}: {e}") from e
    return None if declared is None else to_arrow_schema(declared)


def _partition_jobs(
    results: list[TaskResult],
    staging: Store,
    schema: pa.Schema,
    count: int,
    fmt: str,
    compression: str,
    row_group_size: int,
    shuffle: bool,
    seed: int,
) -> list[PartitionJob]:
    total = sum(r.rows for r in results)
    fragments = tuple((r.task_id, tuple(r.batch_rows)) for r in results if r.rows)
    order = np.random.default_rng(seed).permutation(total) if shuffle else None
    return [
        PartitionJob(
            index=p,
            count=count,
            staging=staging,
            schema=schema,
            format=fmt,
            compression=compression,
            row_group_size=row_group_size,
            fragments=fragments,
            start=start,
            stop=stop,
            order=None if order is None else order[start:stop],
        )
        for p, (start, stop) in enumerate(bounds(total, count))
    ]


def _fragment_cleaner(
    jobs: list[PartitionJob], staging: Store, done: set[int]
) -> Callable[[int], None]:
    """Delete each fragment as soon as every partition that reads it is written, so that the
    staged copy of the data shrinks while the partitions grow instead of doubling the disk use.
    (A finished task's record stays: --resume must not run it again.)"""
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


__all__ = ["PartitionInfo", "Summary", "write"]
