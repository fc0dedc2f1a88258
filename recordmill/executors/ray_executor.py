"""``--executor ray``: the jobs on a Ray cluster (``pip install "recordmill[ray]"``), whose
workers write straight to the output's staging folder."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from recordmill.dataset.storage import Store
from recordmill.errors import ConfigError, RecordmillError, TaskError
from recordmill.executors.base import Executor, Limits, call, check_worker, job_name
from recordmill.executors.pool import WorkerLost
from recordmill.plugin.manager import DatasetPlugin

__all__ = ["RayExecutor"]


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

    def __init__(self, workers: int, settings: Limits, options: Mapping[str, Any]):
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
        self.call = ray.remote(num_cpus=1)(call).options(
            max_retries=retries, retry_exceptions=[TaskError] if retries_on_error else False
        )

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()

    def check(self, plugin: DatasetPlugin, staging: Store) -> None:
        problem = self.ray.get(self.ray.remote(check_worker).remote(plugin.ref, staging))
        if problem:
            raise RecordmillError(
                f"a Ray worker cannot run this job: {problem}. Folder plugins and the output must "
                "be on storage every worker sees; installed plugins must be installed everywhere"
            )

    def execute(
        self, fn: Callable[..., Any], jobs: list[Any], unit: str, report: Callable[[Any], None]
    ) -> Iterator[tuple[int, Any]]:
        from ray.exceptions import RayTaskError, WorkerCrashedError

        refs = {self.call.remote(fn, job): i for i, job in enumerate(jobs)}
        pending = list(refs)
        try:
            while pending:
                done, pending = self.ray.wait(pending, num_returns=1)
                i = refs[done[0]]
                try:
                    result = self.ray.get(done[0])
                except WorkerCrashedError as e:
                    raise WorkerLost(job_name(jobs[i], unit, i), None, self.retries + 1) from e
                except RayTaskError as e:
                    raise (e.cause if isinstance(e.cause, BaseException) else e) from None
                report(result.progress())
                yield i, result
        finally:
            for ref in pending:
                self.ray.cancel(ref, force=True)
