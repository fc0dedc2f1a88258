"""The write pipeline, in four phases: :func:`plan` (the plugin, its options and tasks),
:func:`run_tasks` (each task's rows into a staged fragment, in parallel), :func:`write_partitions`
(the fragments into P balanced partition files) and :func:`publish` (rejects, manifest, and the
staging folder becomes the output), inside the output folder's life (:class:`OutputDir`).

The engine knows nothing of argparse; the CLI turns flags into a call to :func:`write`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa

from recordmill import executors
from recordmill.dataset import layout, rejects
from recordmill.dataset import manifest as manifest_file
from recordmill.dataset.rows import bounds
from recordmill.dataset.schema import check_same_schema, to_arrow_schema
from recordmill.dataset.storage import Store
from recordmill.engine import direct
from recordmill.engine.output import OutputDir, describe_changes, step
from recordmill.engine.partitions import (
    PartitionInfo,
    PartitionJob,
    default_row_group_size,
    finished_partition,
    fragments_done_after,
    write_partition,
)
from recordmill.engine.settings import OLD_PLUGIN_POLICY_NAMES, WriteSettings, old_policy_keys
from recordmill.engine.tasks import (
    CHUNKS,
    ChunkJob,
    ChunkResult,
    add_run,
    chunks,
    load_records,
    run_chunk,
)
from recordmill.errors import (
    OutputError,
    PluginError,
    RecordmillError,
    writing,
)
from recordmill.executors.progress import human_size
from recordmill.plugin.manager import DatasetPlugin, PluginRef, load_plugin
from recordmill.plugin.options import Options, option_dests, plugin_options


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
            f"recordmill: wrote {self.rows:,} rows in {self.partitions} "
            f"partition{'s' if self.partitions != 1 else ''} "
            f"({human_size(self.bytes)}, {self.manifest['format']}) to {self.output} "
            f"in {self.seconds:.1f} s ({phases}){skipped}"
        )


def write(
    plugin: str | os.PathLike[str] | PluginRef | ModuleType | DatasetPlugin,
    output: str | os.PathLike[str],
    *,
    options: Options | Mapping[str, Any] | None = None,
    settings: WriteSettings | None = None,
    **values: Any,
) -> Summary:
    """Run ``plugin`` and write its rows to ``output`` as partition files plus a manifest.

    ``plugin`` is a ``--script`` value (entry-point name, built-in name, folder or .py path), a
    :class:`PluginRef`, or an imported module. ``options`` are the plugin's own options; the ones
    not given take the defaults its ``add_options`` declares. The write's settings are a
    :class:`~recordmill.engine.settings.WriteSettings`, or its fields as keywords (``partitions=4,
    workers=2, shuffle=True, resume=True, on_bad_input="skip", executor="dask",
    executor_options={"dask_address": "tcp://host:8786"}``...); see that class for them all.
    """
    try:
        return run_write(plugin, output, options=options, settings=settings, **values)
    except OutputError as e:  # said to a Python caller: the keywords, not the flags
        text = str(e).replace("--overwrite", "overwrite=True").replace("--resume", "resume=True")
        raise OutputError(text) from e.__cause__


def run_write(
    plugin: str | os.PathLike[str] | PluginRef | ModuleType | DatasetPlugin,
    output: str | os.PathLike[str],
    *,
    options: Options | Mapping[str, Any] | None = None,
    settings: WriteSettings | None = None,
    **values: Any,
) -> Summary:
    """:func:`write`, its errors worded for the command line (``--overwrite``)."""
    started = time.perf_counter()
    values, notes = old_policy_keys(values)
    for note in notes:
        warnings.warn(note, DeprecationWarning, stacklevel=3)
    if settings is not None and values:
        raise TypeError(f"write() takes settings= or setting keywords, not both: {sorted(values)}")
    run = plan(plugin, options, settings or WriteSettings(**values))
    # Checked before the output is touched: a mistake there must not cost an interrupted run.
    executor_options = executors.options_of(run.settings)
    with OutputDir(run.settings, output) as out:
        if out.finished is not None:
            return _already_written(run, out, started)
        _check_run(out.staging, run, out.resumed)
        out.start_writing()  # from here on, a failure removes the staging folder
        with executors.create(
            run.settings,
            workers=min(run.settings.worker_count, max(run.tasks, 1, run.settings.partitions)),
            options=executor_options,
        ) as runner:
            runner.check(run.plugin, out.staging)
            counts = announced_rows(run)
            if counts is None:
                results, tasks_seconds = run_tasks(run, out, runner)
                step("tasks-done")
                written, partitions_seconds = write_partitions(run, out, runner, results)
                phases = {"tasks": tasks_seconds, "partitions": partitions_seconds}
            else:
                results, written, seconds = write_direct(run, out, runner, counts)
                phases = {"rows straight to partitions": seconds}
            step("partitions-done")
        manifest = publish(run, out, results, written)
    return Summary(
        str(out.final),
        manifest["total_rows"],
        run.settings.partitions,
        sum(p.bytes for p in written.infos),
        time.perf_counter() - started,
        manifest,
        phases=phases,
    )


@dataclass(frozen=True)
class Run:
    """What a write does: the plugin and its options, the settings, the number of tasks and the
    declared schema (None: inferred from the rows)."""

    plugin: DatasetPlugin
    options: Options
    settings: WriteSettings
    tasks: int
    declared: pa.Schema | None


@dataclass(frozen=True)
class Written:
    """The partitions of a run: their infos in order, the schema and row group size used."""

    infos: list[PartitionInfo]
    schema: pa.Schema
    row_group_size: int


def plan(
    plugin: str | os.PathLike[str] | PluginRef | ModuleType | DatasetPlugin,
    options: Options | Mapping[str, Any] | None,
    settings: WriteSettings,
) -> Run:
    """Phase 1: load the plugin, parse its options, ask it for its tasks and schema."""
    if not isinstance(plugin, DatasetPlugin):
        plugin = load_plugin(plugin)
    if not isinstance(options, Options):
        options, settings = _old_policy_options(plugin, options or {}, settings)
        options = plugin_options(plugin, options)
    return Run(
        plugin, options, settings, plugin.task_number(options), _declared_schema(plugin, options)
    )


def _old_policy_options(
    plugin: DatasetPlugin, options: Mapping[str, Any], settings: WriteSettings
) -> tuple[Mapping[str, Any], WriteSettings]:
    """The plugins' old policy options (``on_bad_file``, ``on_bad_record``) given from Python,
    moved to the settings' ``on_bad_input`` (unless the plugin has such an option itself)."""
    defined = set(option_dests(plugin))
    names = tuple(n for n in OLD_PLUGIN_POLICY_NAMES if n not in defined)
    moved, notes = old_policy_keys(options, names)
    for note in notes:
        warnings.warn(note, DeprecationWarning, stacklevel=4)
    if "on_bad_input" in moved and "on_bad_input" not in defined:
        policy = moved.pop("on_bad_input")
        if settings.on_bad_input == "fail":
            settings = dataclasses.replace(settings, on_bad_input=policy)
    return moved, settings


def run_tasks(
    run: Run, out: OutputDir, runner: executors.Executor
) -> tuple[list[ChunkResult], float]:
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
    if not sum(r.rows for r in results) and run.declared is None:
        rejected = sum(len(r.rejects) for r in results)
        raise PluginError(
            f"plugin {run.plugin.name} produced no rows in any of its {run.tasks} tasks"
            + (f" ({rejected} inputs rejected)" if rejected else "")
            + "; an empty dataset needs its schema declared (a schema() hook)"
        )
    return results, time.perf_counter() - started


def announced_rows(run: Run) -> list[int] | None:
    """Every task's row count, when the run can write each byte once (see recordmill.engine.direct):
    all tasks announce theirs, the schema is declared, no shuffle, bad input fails the run, the
    tasks are not too many to run one by one, and not much larger than the partitions."""
    settings = run.settings
    if settings.shuffle or run.declared is None or settings.on_bad_input != "fail":
        return None
    if run.tasks > CHUNKS:
        return None  # tasks too many to run one by one: the staged path runs them in chunks
    counts = []
    for task_id in range(run.tasks):
        n = run.plugin.task_rows(task_id, run.options)
        if n is None:
            return None
        counts.append(n)
    if not sum(counts) or not direct.pays(counts, settings.partitions):
        return None  # an empty dataset takes the staged path, which writes it
    return counts


def write_direct(
    run: Run, out: OutputDir, runner: executors.Executor, counts: list[int]
) -> tuple[list[ChunkResult], Written, float]:
    """Phases 2 and 3 in one: each partition made straight from the plugin's rows."""
    started = time.perf_counter()
    if not sum(counts):
        raise PluginError(
            f"plugin {run.plugin.name} announced no rows in any of its {run.tasks} tasks"
        )
    schema = run.declared
    rg_size = run.settings.row_group_size or direct.default_group_size(
        run.plugin.ref, run.options, schema, out.staging, run.settings, counts
    )
    jobs = [
        direct.DirectJob(
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
        )
        for index, (lo, hi, segments) in enumerate(direct.plan(counts, run.settings.partitions))
    ]
    finished, todo = _unfinished(out, jobs)
    written_now = runner.run(
        direct.write_direct_partition,
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


def _unfinished(out: OutputDir, jobs: list[Any]) -> tuple[dict[int, PartitionInfo], list[Any]]:
    """The partitions an interrupted run already wrote (by index), and the jobs left to do."""
    finished = {
        job.index: info
        for job in jobs
        if out.resumed and (info := finished_partition(out.staging, job)) is not None
    }
    return finished, [job for job in jobs if job.index not in finished]


def write_partitions(
    run: Run, out: OutputDir, runner: executors.Executor, results: list[ChunkResult]
) -> tuple[Written, float]:
    """Phase 3: the partitions not written yet, from the fragments, deleting each fragment once
    no partition needs it; and the seconds it took."""
    started = time.perf_counter()
    schema = run.declared or check_same_schema({r.schema_task: r.schema for r in results if r.rows})
    total = sum(r.rows for r in results)
    rg_size = run.settings.row_group_size or default_row_group_size(
        total, sum(r.nbytes for r in results)
    )
    jobs = _partition_jobs(results, out.staging, schema, run.settings, rg_size)
    finished, todo = _unfinished(out, jobs)
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


def publish(
    run: Run, out: OutputDir, results: list[ChunkResult], written: Written
) -> dict[str, Any]:
    """Phase 4: the rejects, then the manifest, and the staging folder becomes the output."""
    fmt = run.settings.format
    rejected = [rejects.as_record(t, j) for r in results for t, j in r.rejects]
    manifest = manifest_file.build(
        fmt=fmt,
        schema=written.schema,
        partitions=[vars(i) for i in written.infos],
        tasks=manifest_file.task_entries([run for r in results for run in r.task_rows]),
        rejects={"count": len(rejected), "file": layout.rejects_file(fmt) if rejected else None},
        plugin={
            "name": run.plugin.name,
            "source": run.plugin.ref.source,
            "target": run.plugin.ref.target,
            "options": run.options.to_dict(),
        },
        settings={**run.settings.identity(), "row_group_size": written.row_group_size},
    )
    with writing(out.staging):
        if rejected:
            rejects.write(out.staging, rejected, written.schema, fmt)
        out.commit(layout.manifest_file(fmt), manifest_file.to_bytes(manifest, written.schema))
    return manifest


def _already_written(run: Run, out: OutputDir, started: float) -> Summary:
    """``--resume`` of a run that had written everything: publish it if it was not yet."""
    assert out.finished is not None
    out.check_finished(_run_record(run))
    if out.staged:
        with writing(out.staging):
            out.publish()
    manifest = out.finished
    return Summary(
        str(out.final),
        manifest["total_rows"],
        len(manifest["partitions"]),
        sum(p["bytes"] for p in manifest["partitions"]),
        time.perf_counter() - started,
        manifest,
        phases={"published what was written" if out.staged else "already written": 0.0},
    )


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


def _check_run(staging: Store, run: Run, resumed: bool) -> None:
    """Record what this run is; when resuming, refuse a run that is not the same one."""
    record = _run_record(run)
    if resumed and staging.is_file(layout.RUN_FILE):
        before = json.loads(staging.read_text(layout.RUN_FILE))
        old = before.get("settings") or {}
        if "on_bad_row" in old:  # recorded before the policy had one name
            old["on_bad_input"] = old.pop("on_bad_row")
        changed = describe_changes(before, record)
        if changed:
            raise OutputError(
                f"cannot --resume: this run differs from the interrupted one ({changed}). Run "
                "it as before, or pass --overwrite to start over"
            )
        return
    staging.write_text(layout.RUN_FILE, json.dumps(record))
    step("recorded")


def _run_record(run: Run) -> dict[str, Any]:
    """What this run is, in the JSON form run.json and the manifest record it in (see
    output.run_record), so that it compares equal to what they hold."""
    record = {
        "plugin": run.plugin.name,
        "options": run.options.to_dict(),
        "task_number": run.tasks,
        "settings": run.settings.identity(),
    }
    return json.loads(json.dumps(record))


def _declared_schema(plugin: DatasetPlugin, options: Options) -> pa.Schema | None:
    try:
        declared = plugin.schema(options)
    except RecordmillError:
        raise
    except Exception as e:
        raise PluginError(f"plugin {plugin.name}: schema() raised {type(e).__name__}: {e}") from e
    return None if declared is None else to_arrow_schema(declared)


def _partition_jobs(
    results: list[ChunkResult],
    staging: Store,
    schema: pa.Schema,
    settings: WriteSettings,
    row_group_size: int,
) -> list[PartitionJob]:
    total = sum(r.rows for r in results)
    fragments = tuple((r.first, tuple(r.batch_rows)) for r in results if r.rows)
    order = np.random.default_rng(settings.seed).permutation(total) if settings.shuffle else None
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
        )
        for p, (start, stop) in enumerate(bounds(total, settings.partitions))
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


__all__ = ["PartitionInfo", "Run", "Summary", "WriteSettings", "write"]
