"""The contract of an executor (:class:`Executor`) and what every executor is given: how many
workers, the write's :class:`Limits` (retries, timeouts) and its own options."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from recordmill.dataset.storage import Store
from recordmill.executors.progress import Progress
from recordmill.plugin.manager import DatasetPlugin

__all__ = ["Executor", "Limits", "call", "check_worker", "job_name"]


@dataclass(frozen=True)
class Limits:
    """What of a write's settings an executor follows: ``retries`` (a job whose worker died runs
    again this many times), ``retries_on_error`` (so does a job that raised), ``task_timeout``
    (seconds without a job's end before its worker is stopped; None: no limit)."""

    retries: int = 2
    retries_on_error: bool = False
    task_timeout: float | None = None


class Executor:
    """Runs jobs (the tasks, then the partitions) and hands back their results.

    Subclasses implement :meth:`execute` and, where needed, :meth:`add_options`, :meth:`check`
    and :meth:`close`; :meth:`run` (results in job order, the progress bar) is the same for all.
    """

    def __init__(self, workers: int, settings: Limits, options: Mapping[str, Any]):
        """``workers``: how many jobs to run at once; ``settings``: the write's :class:`Limits`
        (``retries``, ``retries_on_error``, ``task_timeout``); ``options``: the values of the
        flags :meth:`add_options` adds, by their ``dest``."""
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

    @classmethod
    def prepare(cls, workers: int, imports: list[str] | None) -> None:
        """Called before the run is planned, with the number of workers asked for (0: the
        default) and the modules the plugin's workers need (None: the executor's default): an
        executor may start what takes time to start while the main process plans the run."""

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
                [(job_name(jobs[i], unit, i), seconds) for i, seconds in stalled]
            )
            for i, result in self.execute(fn, jobs, unit, lambda message: bar.add(*message)):
                results[i] = result
                on_result(i, result)
                bar.step(_job_size(jobs[i]))
        finally:
            bar.close()
        return results


def job_name(job: Any, unit: str, index: int) -> str:
    """How messages name a job: its own name (``tasks 7-22``), or the unit and its partition's
    index (``partition 3``)."""
    return getattr(job, "name", None) or f"{unit} {getattr(job, 'index', index)}"


def _job_size(job: Any) -> int:
    """How many units (tasks, partitions) a job counts for in the progress bar."""
    return getattr(job, "size", 1)


def call(fn: Callable[..., Any], job: Any) -> Any:
    return fn(job)


def check_worker(ref: Any, staging: Any) -> str | None:
    """On a worker: None when it can load the plugin and see the staging folder, else why not."""
    if not staging.exists():
        return f"the staging folder {staging} is not visible there"
    try:
        DatasetPlugin(ref)
    except Exception as e:  # whatever stops the import is the answer
        return f"cannot load plugin {ref.describe()}: {e}"
    return None
