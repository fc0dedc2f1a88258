"""The executors that run jobs on this machine: in this process (``--workers 0``), or in
recordmill's own process pool (``--executor process``, the default)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from recordmill import forkserver
from recordmill.errors import TaskError
from recordmill.executors.base import Executor, Limits, job_name
from recordmill.executors.pool import TaskTimeout, WorkerLost, WorkerPool

__all__ = ["InlineExecutor", "ProcessExecutor"]


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

    def __init__(self, workers: int, settings: Limits, options: Mapping[str, Any]):
        super().__init__(workers, settings, options)
        self.pool = WorkerPool(workers)

    @classmethod
    def prepare(cls, workers: int, imports: list[str] | None) -> None:
        # The fork server imports pyarrow and recordmill (0.3 s and more) while the run is
        # planned, not after; --workers 0 runs in this process and needs none.
        if workers != 0:
            forkserver.start(imports)

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
            raise TaskTimeout(job_name(jobs[e.key], unit, e.key), e.attempts) from None
        except WorkerLost as e:
            name = job_name(jobs[e.key], unit, e.key) if isinstance(e.key, int) else e.key
            raise WorkerLost(name, e.exitcode, e.attempts) from None
