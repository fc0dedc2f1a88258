"""A small process pool: each worker runs one job at a time, handed out as workers become free.

Unlike ``concurrent.futures``, the main process knows which job each worker holds, so a worker
that dies (a segfault in a C extension, an OOM kill) is reported with the job it was running,
and workers can send progress messages while a job runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from recordmill import forkserver
from recordmill.errors import RecordmillError, TaskError
from recordmill.timeline import mark

# Workers found dead between jobs that one run replaces before it gives up (a machine killing
# every new process would otherwise be tried forever).
IDLE_DEATHS = 16
# Tries to start a worker: a killed fork server is replaced by the second or third.
START_TRIES = 5
# A job that reports no progress for this long is shown in the progress bar, by its name.
STALL_SECONDS = float(os.environ.get("RECORDMILL_STALL_SECONDS", 30))


class WorkerLost(RecordmillError):
    """A worker process died while running a job (as often as it was tried)."""

    def __init__(self, key: Any, exitcode: int | None, attempts: int = 1):
        tries = f", {attempts} times" if attempts > 1 else ""
        super().__init__(
            f"the worker running {key} died (exit code {exitcode}{_signal_name(exitcode)}{tries})"
        )
        self.key = key
        self.exitcode = exitcode
        self.attempts = attempts


class TaskTimeout(WorkerLost):
    """A job ran longer than the timeout (as often as it was tried)."""

    def __init__(self, key: Any, attempts: int = 1):
        RecordmillError.__init__(
            self,
            f"{key} ran longer than --task-timeout"
            + (f" ({attempts} times)" if attempts > 1 else "")
            + "; it was stopped",
        )
        self.key, self.exitcode, self.attempts = key, None, attempts


def _signal_name(exitcode: int | None) -> str:
    if exitcode is None or exitcode >= 0:
        return ""
    try:
        return f": killed by {signal.Signals(-exitcode).name}"
    except ValueError:
        return ""


def _context() -> multiprocessing.context.BaseContext:
    # fork is unsafe once pyarrow's threads exist in the parent; a fork server is fast and safe.
    if sys.platform.startswith("linux"):
        forkserver.before_workers()  # a pool started without forkserver.start(): the default
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context("spawn")


class _PoolGone(Exception):
    """The pool's end of a worker's pipe is closed: its process (or the fork server) died."""


def _worker_main(conn: Connection) -> None:
    _die_with_parent()
    # Nobody is left to tell when the pool is gone: exit quietly, not with a traceback.
    with contextlib.suppress(_PoolGone, KeyboardInterrupt):
        _serve(conn)
    # Nothing is left to finalize: skip the interpreter's slow teardown of pyarrow.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _serve(conn: Connection) -> None:
    """Run the jobs the pool sends until it sends None; a job's error goes back as its result."""

    def send(message: Any) -> None:
        try:
            conn.send(message)
        except (OSError, EOFError) as e:  # BrokenPipeError, ConnectionResetError
            raise _PoolGone from e

    def report(message: Any) -> None:
        send(("progress", message))

    while True:
        try:
            job = conn.recv()
        except (OSError, EOFError) as e:
            raise _PoolGone from e
        if job is None:
            return
        fn, args = job
        mark("job-start")
        try:
            result = fn(*args, report=report)
        except _PoolGone:
            raise
        except BaseException as e:  # everything goes back to the main process, which decides
            message = ("error", e, traceback.format_exc())
            try:
                send(message)
            except _PoolGone:
                raise
            except Exception:  # the exception itself would not pickle
                send(("error", TaskError(-1, f"{type(e).__name__}: {e}"), message[2]))
            continue
        send(("done", result))


def _die_with_parent() -> None:
    """Linux: die when the parent dies. A worker's parent is the fork server; killed, it leaves
    its workers running jobs that the pool, which sees them gone, runs again elsewhere: two
    processes would write one fragment."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


@dataclass
class _Worker:
    process: Any
    conn: Connection
    key: Any = None
    args: tuple[Any, ...] = ()
    attempt: int = 1
    started: float = 0.0
    heard: float = 0.0  # when it last reported progress (or started its job)
    timed_out: bool = False


def _wait_seconds(busy: Iterable[_Worker], timeout: float | None, watch: bool) -> float | None:
    """How long to wait for workers: until the first busy job runs out of time, and at most a
    second while stalled jobs are watched."""
    now = time.monotonic()
    left = None
    if timeout is not None:
        left = max(0.0, min((w.started + timeout - now for w in busy), default=timeout))
    if watch:
        left = 1.0 if left is None else min(left, 1.0)
    return left


class WorkerPool:
    """``workers`` processes; use as a context manager so they are always cleaned up."""

    def __init__(self, workers: int):
        self._ctx = _context()
        self._workers = [self._start() for _ in range(workers)]

    def _start(self) -> _Worker:
        attempt = 1
        while True:
            try:
                return self._launch()
            except (EOFError, OSError):
                # A killed fork server is started again once it is seen dead; until then (it
                # may still be dying) it refuses or drops the request.
                if attempt == START_TRIES:
                    raise
            time.sleep(0.1 * attempt)
            attempt += 1

    def _launch(self) -> _Worker:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=_worker_main, args=(child,), daemon=True)
        try:
            process.start()
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        return _Worker(process, parent)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.terminate()

    def imap_unordered(
        self,
        fn: Callable[..., Any],
        jobs: Iterable[tuple[Any, tuple[Any, ...]]],
        on_progress: Callable[[Any], None] | None = None,
        retries: int = 0,
        retry_errors: tuple[type[BaseException], ...] = (),
        timeout: float | None = None,
        on_stall: Callable[[list[tuple[Any, float]]], None] | None = None,
    ) -> Iterator[tuple[Any, Any]]:
        """Run ``fn(*args, report=...)`` for each ``(key, args)``; yield ``(key, result)`` as done.

        A job whose worker dies runs again on a fresh worker, up to ``retries`` more times, and
        so does a job that raised one of ``retry_errors``; after that, the death raises
        :class:`WorkerLost` and the error re-raises here (an unexpected error gets the worker's
        traceback as a note). A job running longer than ``timeout`` seconds has its worker
        killed, and counts as a death. ``on_stall`` is told, about once a second, which jobs
        have reported no progress for ``STALL_SECONDS`` and for how long.
        """
        run = _Dispatch(self, fn, jobs, retries, timeout)
        while run.pending or run.busy:
            run.hand_out()
            ready = wait(
                run.waitables(),
                timeout=_wait_seconds(run.busy.values(), timeout, on_stall is not None),
            )
            if on_stall is not None:
                on_stall(run.stalled())
            run.stop_overdue()
            for conn in [r for r in ready if r in run.busy]:
                done = run.receive(conn, on_progress, retry_errors)
                if done is not None:
                    yield done
            run.reap_dead()

    def _replace(self, dead: _Worker, pending: deque, retries: int) -> _Worker:
        """A fresh worker in place of one that died; its job goes back in line, or, when it was
        tried too often, the death is raised."""
        dead.process.join(1)
        if dead.attempt > retries:
            if dead.timed_out:
                raise TaskTimeout(dead.key, dead.attempt)
            raise WorkerLost(dead.key, dead.process.exitcode, dead.attempt)
        pending.appendleft((dead.key, dead.args, dead.attempt + 1))
        return self._renew(dead)

    def _renew(self, dead: _Worker) -> _Worker:
        """A fresh worker in the dead one's place."""
        dead.process.join(1)
        dead.conn.close()
        fresh = self._start()
        self._workers[self._workers.index(dead)] = fresh
        return fresh

    def close(self) -> None:
        for worker in self._workers:
            with contextlib.suppress(OSError):
                worker.conn.send(None)
        for worker in self._workers:
            worker.process.join(5)
        self.terminate()

    def terminate(self) -> None:
        for worker in self._workers:
            if worker.process.is_alive():
                worker.process.kill()
        for worker in self._workers:
            worker.process.join()
            worker.conn.close()


class _Dispatch:
    """One ``imap_unordered`` call: the jobs not handed out yet, the idle workers, and the busy
    ones by their pipe."""

    def __init__(
        self,
        pool: WorkerPool,
        fn: Callable[..., Any],
        jobs: Iterable[tuple[Any, tuple[Any, ...]]],
        retries: int,
        timeout: float | None,
    ):
        self.pool, self.fn, self.retries, self.timeout = pool, fn, retries, timeout
        self.pending = deque((key, args, 1) for key, args in jobs)
        self.idle = list(pool._workers)
        self.busy: dict[Connection, _Worker] = {}
        self.idle_deaths = 0

    def hand_out(self) -> None:
        """A job to each idle worker while there are both; a worker found dead while idle
        (killed, OOM) loses no job: it is replaced and the job handed to another."""
        while self.pending and self.idle:
            worker = self.idle.pop()
            key, args, attempt = self.pending.popleft()
            try:
                if not worker.process.is_alive():
                    raise BrokenPipeError
                worker.conn.send((self.fn, args))
            except OSError:
                self.idle_deaths += 1
                if self.idle_deaths > IDLE_DEATHS:
                    raise WorkerLost("no job (idle)", worker.process.exitcode) from None
                self.pending.appendleft((key, args, attempt))
                self.idle.append(self.pool._renew(worker))
                continue
            worker.key, worker.args, worker.attempt = key, args, attempt
            worker.started = worker.heard = time.monotonic()
            self.busy[worker.conn] = worker

    def waitables(self) -> list[Any]:
        """What to wait on: each busy worker's pipe and its process (to see it die)."""
        return list(self.busy) + [w.process.sentinel for w in self.busy.values()]

    def stalled(self) -> list[tuple[Any, float]]:
        now = time.monotonic()
        return [(w.key, now - w.heard) for w in self.busy.values() if now - w.heard > STALL_SECONDS]

    def stop_overdue(self) -> None:
        """Kill the workers whose job ran past the timeout; their death is handled as any."""
        if self.timeout is None:
            return
        for worker in self.busy.values():
            if time.monotonic() - worker.started > self.timeout and worker.process.is_alive():
                worker.timed_out = True
                worker.process.kill()

    def receive(
        self,
        conn: Connection,
        on_progress: Callable[[Any], None] | None,
        retry_errors: tuple[type[BaseException], ...],
    ) -> tuple[Any, Any] | None:
        """A worker's message: progress (passed on), a result (returned as ``(key, result)``),
        an error (retried or raised), or nothing at all (it died: replaced)."""
        worker = self.busy[conn]
        try:
            kind, *payload = conn.recv()
        except (EOFError, OSError):
            del self.busy[conn]
            self.idle.append(self.pool._replace(worker, self.pending, self.retries))
            return None
        if kind == "progress":
            worker.heard = time.monotonic()
            if on_progress is not None:
                on_progress(payload[0])
            return None
        del self.busy[conn]
        self.idle.append(worker)
        if kind == "error":
            self._raise_or_retry(worker, *payload, retry_errors)
            return None
        return worker.key, payload[0]

    def _raise_or_retry(
        self,
        worker: _Worker,
        error: BaseException,
        text: str,
        retry_errors: tuple[type[BaseException], ...],
    ) -> None:
        if isinstance(error, retry_errors) and worker.attempt <= self.retries:
            self.pending.append((worker.key, worker.args, worker.attempt + 1))
            return
        if isinstance(error, retry_errors) and worker.attempt > 1:
            error.args = (f"{error} (tried {worker.attempt} times)",)
        if not isinstance(error, RecordmillError) and hasattr(error, "add_note"):
            error.add_note(f"in a worker process:\n{text}")  # an unexpected error
        raise error

    def reap_dead(self) -> None:
        """Busy workers that died without a word: replaced, their jobs back in line."""
        for conn, worker in list(self.busy.items()):
            if not worker.process.is_alive() and not worker.conn.poll():
                del self.busy[conn]
                self.idle.append(self.pool._replace(worker, self.pending, self.retries))
