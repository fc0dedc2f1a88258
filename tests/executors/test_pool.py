"""The worker pool: dynamic scheduling, progress messages, errors and dead workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from recordmill.executors.pool import WorkerLost, WorkerPool
from tests.conftest import make_plugin, read_dataset, run_writer


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


SLOW_PLUGIN = """
    import time

    def task_number():
        return 12

    def dict_data(task_id):
        time.sleep(0.4)
        for i in range(50):
            yield {"task": task_id, "i": i}
"""


def children(pid: int) -> dict[int, bytes]:
    """The processes whose parent is ``pid``, with their command lines."""
    found = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            if parent == pid:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    found[int(entry)] = f.read()
        except (ValueError, OSError):  # not a process, or gone meanwhile
            continue
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux's")
def test_killing_the_fork_server_prints_no_traceback(tmp_path):
    """Issue 30: the fork server killed mid-run (not a worker) left its workers orphaned; they
    printed BrokenPipeError tracebacks from _worker_main. A worker whose parent is gone exits
    quietly, and the run ends with correct data (or one error line)."""
    import recordmill
    from recordmill.read.verify import verify
    from tests.conftest import REPO, make_plugin, wait_for_staged_tasks

    plugin = make_plugin(tmp_path / "slow", SLOW_PLUGIN)
    out = tmp_path / "out"
    run = subprocess.Popen(
        [
            *(sys.executable, REPO / "writer.py", "--script", plugin, "--output", out),
            *("--workers", "3", "--on-bad-input", "skip", "--quiet"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_staged_tasks(out, 2, run)
    servers = [pid for pid, line in children(run.pid).items() if b"forkserver" in line]
    assert len(servers) == 1, children(run.pid)
    os.kill(servers[0], signal.SIGKILL)
    stdout, stderr = run.communicate(timeout=120)
    assert "Traceback" not in stderr, stderr
    if run.returncode == 0:
        assert verify(out) == [] and len(recordmill.open(str(out))) == 12 * 50, stdout
    else:
        lines = stderr.strip().splitlines()
        assert run.returncode == 1 and len(lines) == 1 and lines[0].startswith("recordmill: error:")


IMPORTS = """
    import sys

    def task_number():
        return 1

    def schema():
        return {"pandas": {"type": "bool"}, "csv": {"type": "bool"}}

    def dict_data(task_id):
        # What the worker had imported before its plugin made a row.
        yield {"pandas": "pandas" in sys.modules, "csv": "pyarrow.csv" in sys.modules}
"""


@pytest.mark.parametrize(
    ("hook", "loaded"),
    [
        ("", {"pandas": False, "csv": False}),  # the default: nothing more than pyarrow
        ("    def worker_imports():\n        return ['pandas']\n", {"pandas": True, "csv": False}),
        (
            "    def worker_imports():\n        return ['pyarrow.csv']\n",
            {"pandas": False, "csv": True},
        ),
    ],
)
def test_the_fork_server_imports_what_the_plugin_s_workers_need(hook, loaded, tmp_path):
    pytest.importorskip("pandas")
    plugin = make_plugin(tmp_path / "p", IMPORTS + hook)
    result = run_writer(
        *("--script", plugin, "--output", tmp_path / "o", "--workers", "1", "--quiet")
    )
    assert result.returncode == 0, result.stderr
    rows = read_dataset(tmp_path / "o").to_pylist()
    assert rows == [loaded]


def test_a_worker_imports_hook_that_returns_no_list_is_one_line(tmp_path):
    plugin = make_plugin(
        tmp_path / "p", IMPORTS + "    def worker_imports():\n        return 'pandas'\n"
    )
    result = run_writer("--script", plugin, "--output", tmp_path / "o", "--quiet")
    assert result.returncode == 1
    assert result.stderr == (
        "recordmill: error: plugin p: worker_imports() must return a list of module names or "
        "None, got 'pandas'\n"
    )
