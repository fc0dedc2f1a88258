"""A write, start to end: :func:`write` runs the four phases inside the output folder's life
(:class:`~recordmill.engine.output.OutputDir`):

1. :func:`~recordmill.engine.plan.plan`: the plugin, its options, its tasks and schema;
2. :func:`~recordmill.engine.tasks.run_tasks`: each chunk of tasks' rows into a staged fragment,
   in parallel (or, when every task announces its row count, phases 2 and 3 in one:
   :func:`~recordmill.engine.direct.write_direct`);
3. :func:`~recordmill.engine.partitions.write_partitions`: the fragments into P balanced files;
4. :func:`publish`: the rejects and the manifest, and the commit (``commit.py``).

With ``--append`` the run adds a version to the dataset at the output (``append.py``); with
``--dedup-key``, duplicates are found between phases 2 and 3 (``dedup.py``).

The engine knows nothing of argparse; the CLI turns flags into a call to :func:`write`.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from recordmill import executors
from recordmill.dataset import layout, rejects, versions
from recordmill.dataset import manifest as manifest_file
from recordmill.dataset.schema import check_same_schema
from recordmill.dataset.sizes import human_count, human_size
from recordmill.engine import append, dedup
from recordmill.engine.commit import step
from recordmill.engine.direct import announced_rows, write_direct
from recordmill.engine.output import OutputDir
from recordmill.engine.partitions import PartitionInfo, Written, write_partitions
from recordmill.engine.plan import Run, plan
from recordmill.engine.records import ChunkResult, check_run, record_of
from recordmill.engine.settings import WriteSettings, check_keywords, keywords, old_policy_keys
from recordmill.engine.tasks import run_tasks
from recordmill.errors import OutputError, RowError, TaskError, counted, writing
from recordmill.executors.mainguard import check_main_guard
from recordmill.plugin.manager import DatasetPlugin, PluginRef, load_plugin
from recordmill.plugin.options import Options, option_dests
from recordmill.timeline import mark


@dataclass
class Summary:
    """What a write did; :meth:`line` is the CLI's summary line. Its repr leaves out the manifest
    (the whole schema, base64) and the phases: print ``summary.manifest`` to see it."""

    output: str
    rows: int
    partitions: int
    bytes: int
    seconds: float
    manifest: dict[str, Any] = field(repr=False)
    phases: dict[str, float] = field(repr=False)
    # The version written (rows, partitions and bytes are its own), the rows it rejected as
    # duplicates (--dedup-key), and the version of the dataset an --overwrite replaced.
    version: int = 1
    duplicates: int = 0
    replaced: int | None = None
    # The inputs this run rejected, duplicates among them (listed by recordmill rejects).
    rejects: int = field(default=0, repr=False)

    def line(self) -> str:
        phases = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.phases.items())
        if "already written" in self.phases:  # a --resume of a run that had finished
            return (
                f"recordmill: already written: nothing to do ({self.output}, version "
                f"{self.version}: {counted(self.rows, 'row')} in "
                f"{counted(self.partitions, 'partition')})"
            )
        if self.duplicates and not self.rows and "nothing new" in self.phases:
            return (
                f"recordmill: nothing new: every row is a duplicate of the dataset's "
                f"({counted(self.duplicates, 'duplicate')}); {self.output} stays at version "
                f"{self.version}"
            )
        rejected = self.rejects
        duplicates = f" ({counted(self.duplicates, 'duplicate')})" if self.duplicates else ""
        skipped = (
            f"; {counted(rejected, 'input')} rejected{duplicates}, listed by: recordmill "
            f"rejects {self.output}"
            if rejected
            else ""
        )
        verb, where = "wrote", ""
        if self.version > 1:
            verb = "appended"
            where = f" as version {self.version} ({self.manifest['total_rows']:,} rows in all)"
        replaced = (
            f"; version 1 of a new history (it replaced version {self.replaced})"
            if self.replaced is not None
            else ""
        )
        return (
            f"recordmill: {verb} {counted(self.rows, 'row')} in "
            f"{counted(self.partitions, 'partition')}{self._empty()} "
            f"({human_size(self.bytes)}, {self.manifest['format']}) to {self.output}{where} "
            f"in {self.seconds:.1f} s ({phases}){self._values()}{skipped}{replaced}"
        )

    def values(self) -> dict[str, int]:
        """The ids each column of token ids of this version holds (a corpus's tokens)."""
        own = [p for p in self.manifest["partitions"] if p.get("version", 1) == self.version]
        return manifest_file.token_counts(own)

    def _values(self) -> str:
        said = [
            f"; {n:,} {name} ({human_count(n / max(self.seconds, 1e-9))} {name}/s)"
            for name, n in self.values().items()
        ]
        return "".join(said)

    def _empty(self) -> str:
        """Partitions left empty because there were fewer rows than --partitions: said, as an
        output of mostly empty files is rarely what was meant."""
        own = [p for p in self.manifest["partitions"] if p.get("version", 1) == self.version]
        empty = sum(1 for p in own if not p["rows"])
        if not empty:
            return ""
        return (
            f", {empty:,} of them empty (--partitions {self.partitions:,} is more than the "
            f"{counted(self.rows, 'row')})"
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
    settings = _settings(plugin, settings, values)
    if settings.executor == "process" and settings.workers != 0:
        check_main_guard()  # before a fork server imports this script's __main__
    mark("write-called")
    plugin = plugin if isinstance(plugin, DatasetPlugin) else load_plugin(plugin)
    executors.find(settings.executor).prepare(settings.workers, plugin.worker_imports())
    run = plan(plugin, options, settings)
    mark("planned")
    # Checked before the output is touched: a mistake there must not cost an interrupted run.
    executor_options = executors.options_of(run.settings.executor, run.settings.executor_options)
    with OutputDir(run.settings, output) as out:
        try:  # under the lock: the dataset it appends to, if any
            run = append.prepare(run, out.final)
            dedup.check_early(run)
        except BaseException:
            if not out.resumed:
                out.abort()  # a new, empty staging folder: nothing to keep
            raise
        replaced = append.replaced_version(run, out.final)
        if out.finished is not None and out.check_finished(record_of(run)):
            return _already_written(run, out, started)
        check_run(out.staging, run, out.resumed)
        out.start_writing()  # from here on, a failure removes the staging folder
        try:
            results, written, phases, found = _execute(run, out, executor_options)
        except _NothingNew as nothing:
            out.abort()
            return _nothing_new(run, out, nothing.duplicates, started)
        manifest = publish(run, out, results, written, found)
    return _summary(run, out, manifest, written, phases, found, replaced, started)


def _settings(plugin: Any, settings: WriteSettings | None, values: dict[str, Any]) -> WriteSettings:
    """A write's settings: ``settings=`` or the setting keywords (old names said once, each
    checked against the settings and the plugin's option names), not both."""
    values, notes = old_policy_keys(values)
    for note in notes:
        warnings.warn(note, DeprecationWarning, stacklevel=4)
    if settings is not None and values:
        raise TypeError(f"write() takes settings= or setting keywords, not both: {sorted(values)}")
    if settings is None:
        check_keywords(values, _option_names(plugin, values))
    return settings or WriteSettings(**values)


def _summary(
    run: Any,
    out: OutputDir,
    manifest: dict[str, Any],
    written: Any,
    phases: Any,
    found: Any,
    replaced: int | None,
    started: float,
) -> Summary:
    """The summary of a write that published ``manifest``: its own run's figures."""
    own = versions.latest_run(manifest)
    return Summary(
        str(out.final),
        own["rows"],
        own["partitions"],
        sum(p.bytes for p in written.infos),
        time.perf_counter() - started,
        manifest,
        phases=phases,
        version=run.version,
        duplicates=0 if found is None else len(found.rejects),
        replaced=replaced,
        rejects=own["rejects"]["count"],
    )


def _execute(
    run: Run, out: OutputDir, executor_options: dict[str, Any]
) -> tuple[list[ChunkResult], Written, dict[str, float], dedup.Duplicates | None]:
    """Phases 2 and 3 in the run's workers; a plugin's error keeps the tasks that finished."""
    settings = run.settings
    limits = executors.Limits(settings.retries, settings.retries_on_error, settings.task_timeout)
    workers = min(settings.worker_count, max(run.tasks, 1, settings.partitions))  # 0: inline
    with executors.create(settings.executor, workers, limits, executor_options) as runner:
        mark("workers-started")
        runner.check(run.plugin, out.staging)
        try:
            written = _write_rows(run, out, runner)
        except (TaskError, RowError) as e:  # a plugin to fix: its finished tasks are kept
            raise out.keep_for_resume(e)  # noqa: B904 (the same error, worded)
        step("partitions-done")
    return written


class _NothingNew(Exception):  # a signal to run_write(), not an error
    """An --append whose every row is a duplicate of the dataset's: no version is added."""

    def __init__(self, duplicates: int):
        super().__init__(duplicates)
        self.duplicates = duplicates


def _nothing_new(run: Run, out: OutputDir, duplicates: int, started: float) -> Summary:
    assert run.base is not None
    return Summary(
        str(out.final),
        0,
        0,
        0,
        time.perf_counter() - started,
        run.base,
        phases={"nothing new": 0.0},
        version=versions.current(run.base),
        duplicates=duplicates,
        rejects=duplicates,
    )


def _option_names(plugin: Any, values: Mapping[str, Any]) -> list[str]:
    """The plugin's option names, when a keyword is no setting (so that the error can say it is
    an option of the plugin); loading the plugin here fails again, better said, in plan()."""
    if set(values) <= set(keywords()):
        return []
    try:
        loaded = plugin if isinstance(plugin, DatasetPlugin) else load_plugin(plugin)
        return option_dests(loaded)
    except Exception:
        return []


def _write_rows(
    run: Run, out: OutputDir, runner: executors.Executor
) -> tuple[list[ChunkResult], Written, dict[str, float], dedup.Duplicates | None]:
    """Phases 2 and 3 (or both in one, written straight from the rows), with what dedup.py
    found between them."""
    counts = announced_rows(run)
    if counts is not None:
        results, written, seconds = write_direct(run, out, runner, counts)
        return results, written, {"rows straight to partitions": seconds}, None
    results, tasks_seconds = run_tasks(run, out, runner)
    step("tasks-done")
    if run.base is not None and run.declared is None:
        inferred = check_same_schema({r.schema_task: r.schema for r in results if r.rows})
        append.check_schema(inferred, run.base, "inferred", schema_flag="schema" in run.options)
    phases = {"tasks": tasks_seconds}
    found = None
    if run.settings.dedup_key:
        found = dedup.find(run, out, results)
        phases["duplicates"] = found.seconds
    keep = None if found is None else found.keep
    nothing = keep is not None and not keep.size and run.base is not None
    if nothing and not any(r.rejects for r in results):  # its own rejects: a version lists them
        raise _NothingNew(len(found.rejects))
    written, phases["partitions"] = write_partitions(run, out, runner, results, keep)
    return results, written, phases, found


def publish(
    run: Run,
    out: OutputDir,
    results: list[ChunkResult],
    written: Written,
    found: dedup.Duplicates | None = None,
) -> dict[str, Any]:
    """Phase 4: the rejects, then the manifest, and the staging folder becomes the output."""
    fmt, version = run.settings.format, run.version
    rejected = _rejects(results, found, version)
    task_rows = [run for r in results for run in r.task_rows] if found is None else found.task_rows
    own = manifest_file.build(
        fmt=fmt,
        schema=written.schema,
        partitions=[vars(i) for i in written.infos],
        tasks=manifest_file.task_entries(task_rows),
        rejects={
            "count": len(rejected),
            "file": layout.rejects_file(fmt, version) if rejected else None,
        },
        plugin={
            "name": run.plugin.name,
            "source": run.plugin.ref.source,
            "target": run.plugin.ref.target,
            "options": run.options.to_dict(),
        },
        settings={**run.settings.identity(), "row_group_size": written.row_group_size},
        run=record_of(run),  # the settings as given: what a --resume compares
    )
    manifest = versions.first(own) if run.base is None else versions.appended(run.base, own)
    with writing(out.staging):
        if rejected:
            rejects.write(out.staging, rejected, written.schema, fmt, version)
        if run.base is not None and out.final.local:  # the whole new version, in one folder
            append.link_base(out.staging, out.final, run.base)
        out.commit(layout.manifest_file(fmt), manifest_file.to_bytes(manifest, written.schema))
    return manifest


def _rejects(
    results: list[ChunkResult], found: dedup.Duplicates | None, version: int
) -> list[dict[str, Any]]:
    """The run's rejects, in task order (a task's duplicates after its plugin's rejects); an
    appended version's say which version they belong to."""
    rejected = [(t, j) for r in results for t, j in r.rejects]
    if found is not None:
        rejected = sorted(rejected + found.rejects, key=lambda tj: tj[0])  # stable
    tag = {} if version == 1 else {"version": version}
    return [{**rejects.as_record(t, j), **tag} for t, j in rejected]


def _already_written(run: Run, out: OutputDir, started: float) -> Summary:
    """``--resume`` of a run that had written everything: publish it if it was not yet."""
    assert out.finished is not None
    if out.staged:
        with writing(out.staging):
            out.publish()
    manifest = out.finished
    version = versions.current(manifest)
    own = [p for p in manifest["partitions"] if versions.version_of(p) == version]
    return Summary(
        str(out.final),
        sum(p["rows"] for p in own),
        len(own),
        sum(p["bytes"] for p in own),
        time.perf_counter() - started,
        manifest,
        phases={"published what was written" if out.staged else "already written": 0.0},
        version=version,
        rejects=versions.latest_run(manifest)["rejects"]["count"],
    )


__all__ = ["PartitionInfo", "Run", "Summary", "WriteSettings", "write"]
