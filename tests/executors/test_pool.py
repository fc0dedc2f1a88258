"""The worker pool: dynamic scheduling, progress messages, errors and dead workers."""

from __future__ import annotations

import os
import time

import pytest

from recordmill.executors.pool import WorkerLost, WorkerPool


def sleepy(seconds: float, report) -> int:
    time.sleep(seconds)
    report(seconds)
    return os.getpid()


def die(code: int, report) -> None:
    os._exit(code)


def fail(message: str, report) -> None:
    raise ValueError(message)


def test_a_slow_job_does_not_hold_back_the_other_worker():
    # One 1.5 s job and ten 0.05 s jobs on two workers: the short ones all run beside the long one.
    jobs = [("long", (1.5,))] + [(f"short{i}", (0.05,)) for i in range(10)]
    seen = []
    with WorkerPool(2) as pool:
        done = [key for key, _ in pool.imap_unordered(sleepy, jobs, on_progress=seen.append)]
    assert done[-1] == "long"
    assert sorted(seen) == sorted(s for _, (s,) in jobs)


def test_jobs_run_in_other_processes():
    with WorkerPool(2) as pool:
        pids = {pid for _, pid in pool.imap_unordered(sleepy, [(i, (0.01,)) for i in range(6)])}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def test_a_dead_worker_is_reported_with_its_job():
    with WorkerPool(2) as pool, pytest.raises(WorkerLost) as info:
        list(pool.imap_unordered(die, [("task 5", (3,))]))
    assert info.value.key == "task 5" and info.value.exitcode == 3


def test_an_exception_comes_back_as_itself():
    with WorkerPool(2) as pool, pytest.raises(ValueError, match="boom"):
        list(pool.imap_unordered(fail, [("a", ("boom",))]))


def test_workers_are_gone_after_the_pool_closes():
    with WorkerPool(2) as pool:
        processes = [w.process for w in pool._workers]
        list(pool.imap_unordered(sleepy, [(1, (0.01,))]))
    assert not any(p.is_alive() for p in processes)


def test_a_worker_that_dies_while_idle_is_replaced_and_costs_no_job():
    import signal

    with WorkerPool(2) as pool:
        first = {pid for _, pid in pool.imap_unordered(sleepy, [(i, (0.01,)) for i in range(4)])}
        for worker in pool._workers:  # both idle now, as between the tasks and the partitions
            os.kill(worker.process.pid, signal.SIGKILL)
            worker.process.join(5)
        again = dict(pool.imap_unordered(sleepy, [(i, (0.01,)) for i in range(6)]))
    assert sorted(again) == list(range(6)) and not set(again.values()) & first
