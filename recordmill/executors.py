"""Where tasks run. ``--executor process`` (the default) is recordmill's own process pool;
``--executor dask`` and ``--executor ray`` run the same tasks on a Dask or Ray cluster, whose
workers write their fragments and partitions straight to the output's staging folder, so no row
passes through this process.

Executors are found by name: the built-ins below, then the entry-point group
``recordmill.executors`` (a package registers a class taking the same keyword arguments).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from recordmill.errors import ConfigError, RecordmillError, TaskError
from recordmill.pool import WorkerLost, WorkerPool
from recordmill.progress import Progress

ENTRY_POINT_GROUP = "recordmill.executors"


class Executor:
    """Runs jobs (tasks, then partitions) and hands back their results in job order."""

    def __init__(self, workers: int, retries: int = 0, retries_on_error: bool = False, **_: Any):
        self.workers = workers
        self.retries = retries
        self.retries_on_error = retries_on_error

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Release the workers."""

    def check(self, plugin: Any, staging: str) -> None:
        """Fail early, with a clear message, when the workers cannot see the plugin or staging."""

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
        bar = Progress(len(jobs), desc, unit, enabled=show)
        results: list[Any] = [None] * len(jobs)
        try:
            for i, result in self._execute(fn, jobs, unit, lambda message: bar.add(*message)):
                results[i] = result
                on_result(i, result)
                bar.step()
        finally:
            bar.close()
        return results

    def _execute(
        self, fn: Callable[..., Any], jobs: list[Any], unit: str, report: Callable[[Any], None]
    ) -> Iterator[tuple[int, Any]]:
        raise NotImplementedError


class ProcessExecutor(Executor):
    """recordmill's process pool, or this process alone when there is one worker."""

    def __init__(self, workers: int, retries: int = 0, retries_on_error: bool = False, **_: Any):
        super().__init__(workers, retries, retries_on_error)
        self.pool = WorkerPool(workers) if workers > 1 else None

    def __exit__(self, *exc: Any) -> None:
        if self.pool is not None:
            self.pool.__exit__(*exc)

    def _execute(
        self, fn: Callable[..., Any], jobs: list[Any], unit: str, report: Callable[[Any], None]
    ) -> Iterator[tuple[int, Any]]:
        if self.pool is None:
            for i, job in enumerate(jobs):
                for attempt in range(self.retries + 1):
                    try:
                        result = fn(job, report=report)
                        break
                    except TaskError:
                        if not self.retries_on_error or attempt == self.retries:
                            raise
                yield i, result
            return
        keyed = [(i, (job,)) for i, job in enumerate(jobs)]
        retry_errors = (TaskError,) if self.retries_on_error else ()
        try:
            yield from self.pool.imap_unordered(fn, keyed, report, self.retries, retry_errors)
        except WorkerLost as e:
            raise WorkerLost(f"{unit} {e.key}", e.exitcode, e.attempts) from None


class DaskExecutor(Executor):
    """A Dask cluster: ``--dask-address tcp://host:8786``, or a local cluster of ``workers``
    processes. Tasks lost with a worker are rescheduled by Dask; ``retries_on_error`` retries
    tasks whose plugin raised, ``retries`` times."""

    def __init__(
        self,
        workers: int,
        retries: int = 0,
        retries_on_error: bool = False,
        dask_address: str | None = None,
        **_: Any,
    ):
        super().__init__(workers, retries, retries_on_error)
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

    def check(self, plugin: Any, staging: str) -> None:
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

    def _execute(
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
                    raise WorkerLost(f"{unit} {i}", None, self.retries + 1) from e
                report(
                    (
                        getattr(result, "rows", 0),
                        getattr(result, "nbytes", 0) or getattr(result, "bytes", 0),
                    )
                )
                yield i, result
        finally:
            for future in futures:
                future.cancel()


class RayExecutor(Executor):
    """A Ray cluster: ``--ray-address`` (``auto`` for the one this machine belongs to), or a local
    Ray runtime of ``workers`` CPUs. Tasks lost with a worker run again, ``retries`` times."""

    def __init__(
        self,
        workers: int,
        retries: int = 0,
        retries_on_error: bool = False,
        ray_address: str | None = None,
        **_: Any,
    ):
        super().__init__(workers, retries, retries_on_error)
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

    def check(self, plugin: Any, staging: str) -> None:
        problem = self.ray.get(self.ray.remote(_check_worker).remote(plugin.ref, staging))
        if problem:
            raise RecordmillError(
                f"a Ray worker cannot run this job: {problem}. Folder plugins and the output must "
                "be on storage every worker sees; installed plugins must be installed everywhere"
            )

    def _execute(
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
                    raise WorkerLost(f"{unit} {i}", None, self.retries + 1) from e
                except RayTaskError as e:
                    raise (e.cause if isinstance(e.cause, BaseException) else e) from None
                report((getattr(result, "rows", 0), _bytes_of(result)))
                yield i, result
        finally:
            for ref in pending:
                self.ray.cancel(ref, force=True)


def _call(fn: Callable[..., Any], job: Any) -> Any:
    return fn(job)


def _bytes_of(result: Any) -> int:
    return getattr(result, "nbytes", 0) or getattr(result, "bytes", 0)


def _check_worker(ref: Any, staging: Any) -> str | None:
    """On a worker: None when it can load the plugin and see the staging folder, else why not."""
    from recordmill.plugins import DatasetPlugin

    if not staging.exists():
        return f"the staging folder {staging} is not visible there"
    try:
        DatasetPlugin(ref)
    except Exception as e:  # whatever stops the import is the answer
        return f"cannot load plugin {ref.describe()}: {e}"
    return None


BUILTIN = {"process": ProcessExecutor, "dask": DaskExecutor, "ray": RayExecutor}


def names() -> list[str]:
    found = {ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    return sorted(set(BUILTIN) | found)


def create(name: str, **kwargs: Any) -> Executor:
    """The executor called ``name``, built-in or from the entry-point group."""
    if name in BUILTIN:
        return BUILTIN[name](**kwargs)
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep.load()(**kwargs)
    raise ConfigError(f"no executor {name!r}; executors: {', '.join(names())}")
