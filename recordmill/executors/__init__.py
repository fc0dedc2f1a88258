"""Where jobs run. ``--executor process`` (the default) is recordmill's own process pool;
``--executor dask`` and ``--executor ray`` run the same jobs on a Dask or Ray cluster, whose
workers write their fragments and partitions straight to the output's staging folder, so no row
passes through this process.

Executors are plugins, found by name: the built-ins below, then the entry-point group
``recordmill.executors``, where a package registers a subclass of :class:`Executor`:

.. code-block:: toml

    [project.entry-points."recordmill.executors"]
    mycluster = "mypackage.recordmill_executor:MyClusterExecutor"

:class:`Executor` is the contract, documented method by method: an executor adds its own flags
(:meth:`Executor.add_options`), receives them as ``options``, checks that its workers can run the
job (:meth:`Executor.check`), and runs jobs (:meth:`Executor.execute`), reporting progress.
"""

from __future__ import annotations

import argparse
import importlib.metadata
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from recordmill.dataset.storage import Store
from recordmill.engine.settings import WriteSettings
from recordmill.errors import ConfigError, RecordmillError, TaskError
from recordmill.executors.pool import TaskTimeout, WorkerLost, WorkerPool
from recordmill.executors.progress import Progress
from recordmill.plugin.manager import DatasetPlugin

ENTRY_POINT_GROUP = "recordmill.executors"


class Executor:
    """Runs jobs (the tasks, then the partitions) and hands back their results.

    Subclasses implement :meth:`execute` and, where needed, :meth:`add_options`, :meth:`check`
    and :meth:`close`; :meth:`run` (results in job order, the progress bar) is the same for all.
    """

    def __init__(self, workers: int, settings: WriteSettings, options: Mapping[str, Any]):
        """``workers``: how many jobs to run at once; ``settings``: the write's (``retries``,
        ``retries_on_error``...); ``options``: the values of the flags :meth:`add_options` adds,
        by their ``dest``."""
        self.workers = workers
        self.retries = settings.retries
        self.retries_on_error = settings.retries_on_error
        self.task_timeout = settings.task_timeout
        self.options = dict(options)
        # Told which jobs reported no progress for a while: (job index, seconds) pairs.
        self.on_stall: Callable[[list[tuple[int, float]]], None] | None = None

    @classmethod
    def add_options(cls, group: argparse._ArgumentGroup) -> None:
        """Add this executor's own flags (``group.add_argument(...)``): they show in ``recordmill
        write --executor NAME --help``, work in ``--config`` files, and reach ``__init__`` as
        ``options``; from Python, ``write(..., executor_options={dest: value})``."""

    def check(self, plugin: DatasetPlugin, staging: Store) -> None:
        """Fail early, with a clear message, when the workers cannot load ``plugin`` or see the
        ``staging`` folder (on other machines, for example)."""

    def execute(
        self, fn: Callable[..., Any], jobs: list[Any], unit: str, report: Callable[[Any], None]
    ) -> Iterator[tuple[int, Any]]:
        """Run ``fn(job, report=report)`` for every job, and yield ``(index, result)`` as each
        one finishes, in any order. ``report((rows, bytes))`` moves the progress bar; an
        executor whose workers cannot call it back calls it with ``result.progress()`` when a
        job is done. A job whose worker died is run again up to ``retries`` times, then raises
        :class:`recordmill.executors.pool.WorkerLost` naming the job (its ``name``, else ``f"{unit}
        {index}"``); an exception that ``fn`` raised is raised here (after ``retries`` tries
        when ``retries_on_error``)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the workers."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def run(
        self,
        fn: Callable[..., Any],
        jobs: Iterable[Any],
        desc: str,
        unit: str,
        show: bool,
        on_result: Callable[[int, Any], None] = lambda index, result: None,
    ) -> list[Any]:
        """Results in job order, whatever order the jobs finished in, with a progress bar."""
        jobs = list(jobs)
        bar = Progress(sum(_job_size(job) for job in jobs), desc, unit, enabled=show)
        results: list[Any] = [None] * len(jobs)
        try:
            self.on_stall = lambda stalled: bar.stalled(
                [(_job_name(jobs[i], unit, i), seconds) for i, seconds in stalled]
            )
            for i, result in self.execute(fn, jobs, unit, lambda message: bar.add(*message)):
                results[i] = result
                on_result(i, result)
                bar.step(_job_size(jobs[i]))
        finally:
            bar.close()
        return results


def _job_name(job: Any, unit: str, index: int) -> str:
    """How messages name a job: its own name (``tasks 7-22``), or the unit and its partition's
    index (``partition 3``)."""
    return getattr(job, "name", None) or f"{unit} {getattr(job, 'index', index)}"


def _job_size(job: Any) -> int:
    """How many units (tasks, partitions) a job counts for in the progress bar."""
    return getattr(job, "size", 1)


class InlineExecutor(Executor):
    """``--workers 0``: the jobs run one after the other in this process, to debug a plugin
    (``breakpoint()`` and pdb read this terminal). A crash of the plugin is the run's own death;
    ``retries_on_error`` still runs a task whose plugin raised again."""

    def execute(
        self, fn: Callable[..., Any], jobs: list[Any], unit: str, report: Callable[[Any], None]
    ) -> Iterator[tuple[int, Any]]:
        for i, job in enumerate(jobs):
            attempt = 1
            while True:
                try:
                    result = fn(job, report=report)
                    break
                except TaskError as e:
                    if not self.retries_on_error or attempt > self.retries:
                        if attempt > 1:
                            e.args = (f"{e} (tried {attempt} times)",)
                        raise
                    attempt += 1
            yield i, result


class ProcessExecutor(Executor):
    """recordmill's process pool (one worker process too: a plugin that crashes its process,
    a segfault in a C extension, is then reported and retried, never the run's own death)."""

    def __init__(self, workers: int, settings: WriteSettings, options: Mapping[str, Any]):
        super().__init__(workers, settings, options)
        self.pool = WorkerPool(workers)

    def __exit__(self, *exc: Any) -> None:
        self.pool.__exit__(*exc)

    def execute(
        self, fn: Callable[..., Any], jobs: list[Any], unit: str, report: Callable[[Any], None]
    ) -> Iterator[tuple[int, Any]]:
        keyed = [(i, (job,)) for i, job in enumerate(jobs)]
        retry_errors = (TaskError,) if self.retries_on_error else ()
        try:
            yield from self.pool.imap_unordered(
                fn, keyed, report, self.retries, retry_errors, self.task_timeout, self.on_stall
            )
        except TaskTimeout as e:
            raise TaskTimeout(_job_name(jobs[e.key], unit, e.key), e.attempts) from None
        except WorkerLost as e:
            name = _job_name(jobs[e.key], unit, e.key) if isinstance(e.key, int) else e.key
            raise WorkerLost(name, e.exitcode, e.attempts) from None


class DaskExecutor(Executor):
    """A Dask cluster: ``--dask-address tcp://host:8786``, or a local cluster of ``workers``
    processes. Tasks lost with a worker are rescheduled by Dask; ``retries_on_error`` retries
    tasks whose plugin raised, ``retries`` times."""

    @classmethod
    def add_options(cls, group: argparse._ArgumentGroup) -> None:
        group.add_argument(
            "--dask-address",
            metavar="ADDRESS",
            help="the scheduler, tcp://host:8786 (default: a local cluster of --workers)",
        )

    def __init__(self, workers: int, settings: WriteSettings, options: Mapping[str, Any]):
        super().__init__(workers, settings, options)
        dask_address = self.options.get("dask_address")
        retries = self.retries
        try:
            from dask import config
            from distributed import Client, LocalCluster
        except ImportError as e:
            raise ConfigError('--executor dask needs Dask: pip install "recordmill[dask]"') from e
        # Tasks lost with a dead worker run again, as often as --retries allows.
        config.set({"distributed.scheduler.allowed-failures": retries})
        self._cluster = None
        if dask_address:
            self.client = Client(dask_address)
        else:
            self._cluster = LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            )
            self.client = Client(self._cluster)

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()

    def check(self, plugin: DatasetPlugin, staging: Store) -> None:
        problems = self.client.run(_check_worker, plugin.ref, staging)
        bad = {address: problem for address, problem in problems.items() if problem}
        if bad:
            address, problem = next(iter(bad.items()))
            raise RecordmillError(
                f"Dask worker {address}{f' (and {len(bad) - 1} more)' if len(bad) > 1 else ''} "
                f"cannot run this job: {problem}. "
                "Folder plugins and the output must be on storage every worker sees (the same "
                "path); installed plugins must be installed on every worker"
            )

    def execute(
        self, fn: Callable[..., Any], jobs: list[Any], unit: str, report: Callable[[Any], None]
    ) -> Iterator[tuple[int, Any]]:
        from distributed import as_completed
        from distributed.scheduler import KilledWorker

        futures = {
            self.client.submit(
                fn, job, pure=False, retries=self.retries if self.retries_on_error else 0
            ): i
            for i, job in enumerate(jobs)
        }
        try:
            for future in as_completed(futures):
                i = futures[future]
                try:
                    result = future.result()
                except KilledWorker as e:
                    raise WorkerLost(_job_name(jobs[i], unit, i), None, self.retries + 1) from e
                report(result.progress())
                yield i, result
        finally:
            for future in futures:
                future.cancel()


class RayExecutor(Executor):
    """A Ray cluster: ``--ray-address`` (``auto`` for the one this machine belongs to), or a local
    Ray runtime of ``workers`` CPUs. Tasks lost with a worker run again, ``retries`` times."""

    @classmethod
    def add_options(cls, group: argparse._ArgumentGroup) -> None:
        group.add_argument(
            "--ray-address",
            metavar="ADDRESS",
            help="the cluster, or auto (default: a local Ray runtime of --workers CPUs)",
        )

    def __init__(self, workers: int, settings: WriteSettings, options: Mapping[str, Any]):
        super().__init__(workers, settings, options)
        ray_address = self.options.get("ray_address")
        retries, retries_on_error = self.retries, self.retries_on_error
        try:
            import ray
        except ImportError as e:
            raise ConfigError('--executor ray needs Ray: pip install "recordmill[ray]"') from e
        self.ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            ray.init(
                address=ray_address,
                num_cpus=None if ray_address else workers,
                include_dashboard=False,
                log_to_driver=False,
            )
        self._call = ray.remote(num_cpus=1)(_call).options(
            max_retries=retries, retry_exceptions=[TaskError] if retries_on_error else False
        )

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()

    def check(self, plugin: DatasetPlugin, staging: Store) -> None:
        problem = self.ray.get(self.ray.remote(_check_worker).remote(plugin.ref, staging))
        if problem:
            raise RecordmillError(
                f"a Ray worker cannot run this job: {problem}. Folder plugins and the output must "
                "be on storage every worker sees; installed plugins must be installed everywhere"
            )

    def execute(
        self, fn: Callable[..., Any], jobs: list[Any], unit: str, report: Callable[[Any], None]
    ) -> Iterator[tuple[int, Any]]:
        from ray.exceptions import RayTaskError, WorkerCrashedError

        refs = {self._call.remote(fn, job): i for i, job in enumerate(jobs)}
        pending = list(refs)
        try:
            while pending:
                done, pending = self.ray.wait(pending, num_returns=1)
                i = refs[done[0]]
                try:
                    result = self.ray.get(done[0])
                except WorkerCrashedError as e:
                    raise WorkerLost(_job_name(jobs[i], unit, i), None, self.retries + 1) from e
                except RayTaskError as e:
                    raise (e.cause if isinstance(e.cause, BaseException) else e) from None
                report(result.progress())
                yield i, result
        finally:
            for ref in pending:
                self.ray.cancel(ref, force=True)


def _call(fn: Callable[..., Any], job: Any) -> Any:
    return fn(job)


def _check_worker(ref: Any, staging: Any) -> str | None:
    """On a worker: None when it can load the plugin and see the staging folder, else why not."""
    if not staging.exists():
        return f"the staging folder {staging} is not visible there"
    try:
        DatasetPlugin(ref)
    except Exception as e:  # whatever stops the import is the answer
        return f"cannot load plugin {ref.describe()}: {e}"
    return None


BUILTIN: dict[str, type[Executor]] = {
    "process": ProcessExecutor,
    "dask": DaskExecutor,
    "ray": RayExecutor,
}


def names() -> list[str]:
    found = {ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    return sorted(set(BUILTIN) | found)


def find(name: str) -> type[Executor]:
    """The executor class called ``name``: a built-in, or from the entry-point group."""
    if name in BUILTIN:
        return BUILTIN[name]
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            found = ep.load()
            if not (isinstance(found, type) and issubclass(found, Executor)):
                raise ConfigError(
                    f"executor {name!r} ({ep.value}) is not a subclass of recordmill.executors.Executor"
                )
            return found
    raise ConfigError(f"no executor {name!r}; executors: {', '.join(names())}")


def add_all_options(
    parser: argparse.ArgumentParser, selected: str, required: bool = True
) -> dict[str, list[str]]:
    """Every executor's flags on ``parser``: the ``selected`` one's in its own group (required
    ones required only with ``required``), the others' hidden and optional (so that a
    ``--config`` file or a command line that names another executor's option is understood, and
    the option ignored with a note). The dests of each executor's flags."""
    shown = option_group(parser, selected)._group_actions
    for action in shown:
        action.required = action.required and required
    dests = {selected: [a.dest for a in shown]}
    hidden = parser.add_argument_group()
    for name in names():
        if name == selected:
            continue
        before = len(hidden._group_actions)
        try:
            find(name).add_options(hidden)
        except (argparse.ArgumentError, ConfigError, ImportError):
            continue  # a flag another executor has too, or an executor that does not load
        for action in hidden._group_actions[before:]:
            action.help = argparse.SUPPRESS
            action.required = False
        dests[name] = [a.dest for a in hidden._group_actions[before:]]
    return dests


def option_group(parser: argparse.ArgumentParser, name: str) -> argparse._ArgumentGroup:
    """The flags of executor ``name``, added to ``parser`` in a group of their own."""
    group = parser.add_argument_group(f"options of --executor {name}")
    find(name).add_options(group)
    return group


def options_of(settings: WriteSettings) -> dict[str, Any]:
    """The options of the executor the settings name, defaults filled in; an unknown executor,
    an unknown option or a missing required one is an error (checked before a run starts)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    actions = option_group(parser, settings.executor)._group_actions
    given = dict(settings.executor_options or {})
    unknown = sorted(set(given) - {a.dest for a in actions})
    if unknown:
        raise ConfigError(
            f"executor {settings.executor!r} has no option(s) {unknown}; "
            f"its options: {', '.join(sorted(a.dest for a in actions)) or 'none'}"
        )
    missing = [a.option_strings[0] for a in actions if a.required and given.get(a.dest) is None]
    if missing:
        raise ConfigError(f"--executor {settings.executor} needs {', '.join(missing)}")
    return {**{a.dest: a.default for a in actions}, **given}


def create(settings: WriteSettings, workers: int, options: Mapping[str, Any]) -> Executor:
    """The executor the settings name, given its options (as :func:`options_of` checks them);
    with ``--workers 0``, none: the jobs run in this process."""
    if settings.workers == 0:
        return InlineExecutor(0, settings, options)
    return find(settings.executor)(workers, settings, options)
