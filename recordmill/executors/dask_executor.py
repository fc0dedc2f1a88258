"""``--executor dask``: the jobs on a Dask cluster (``pip install "recordmill[dask]"``), whose
workers write straight to the output's staging folder."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from recordmill.dataset.storage import Store
from recordmill.errors import ConfigError, RecordmillError, TaskError
from recordmill.executors.base import Executor, Limits, check_worker, job_name
from recordmill.executors.pool import WorkerLost
from recordmill.plugin.manager import DatasetPlugin

__all__ = ["DaskExecutor"]


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

    def __init__(self, workers: int, settings: Limits, options: Mapping[str, Any]):
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
        problems = self.client.run(check_worker, plugin.ref, staging)
        bad = {address: problem for address, problem in problems.items() if problem}
        if bad:
            address, problem = next(iter(bad.items()))
            raise RecordmillError(
                f"Dask worker {address}{f' (and {len(bad) - 1} more)' if len(bad) > 1 else ''} "
                f"cannot run this job: {problem}. "
                "Folder plugins and the output must be on storage every worker sees (the same "
                "path); installed plugins must be installed on every worker"
            )

    def _where(self, future: Any) -> str:
        """`` (on Dask worker ADDRESS, in FOLDER)`` for the worker a failed job ran on, or ""."""
        try:
            key = future.key
            erred = self.client.run_on_scheduler(
                lambda dask_scheduler: sorted(dask_scheduler.tasks[key].erred_on or ())
            )
            folders = self.client.run(os.getcwd, workers=erred[:1])
            address, folder = next(iter(folders.items()))
        except Exception:  # only a detail of the message: never in the way of the error itself
            return ""
        return f" (on Dask worker {address}, in {folder})"

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
                    raise WorkerLost(job_name(jobs[i], unit, i), None, self.retries + 1) from e
                except TaskError as e:
                    # Which worker, and its folder: a relative path is found from there.
                    raise TaskError(
                        e.task_id, f"{e.cause}{self._where(future)}", e.traceback_text
                    ) from None
                report(result.progress())
                yield i, result
        finally:
            for future in futures:
                future.cancel()
