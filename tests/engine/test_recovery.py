"""Nothing lost: real signals to real runs, dead workers, locks, a full disk, --resume."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import time

import pytest

import recordmill
from tests.conftest import ENDS_WITHIN, REPO, make_plugin, run_writer, wait_for_staged_tasks

# Each task leaves a mark per run of it, so tests can count what ran again; the tasks from
# --hold-from on wait for the gate file (MARKS.go) before making rows, so that a run is surely
# still running when a test stops it, however busy the machine (a sleep can be outlasted).
SLOW = """
    import os, time

    def add_options(parser):
        parser.add_argument("--marks", required=True)
        parser.add_argument("--hold-from", type=int, default=12)

    def task_number():
        return 12

    def dict_data(task_id, options):
        open(os.path.join(options.marks, f"{task_id}-{os.getpid()}-{time.time_ns()}"), "w").close()
        deadline = time.monotonic() + 120
        while task_id >= options.hold_from and not os.path.exists(options.marks + ".go"):
            assert time.monotonic() < deadline, "the test never opened the gate"
            time.sleep(0.01)
        for i in range(50):
            yield {"task": task_id, "i": i, "blob": bytes([task_id]) * 100}
"""


@pytest.fixture
def slow(tmp_path):
    (tmp_path / "marks").mkdir()
    return make_plugin(tmp_path / "slow", SLOW), tmp_path / "marks"


def start(plugin, marks, out, *extra):
    return subprocess.Popen(
        [
            sys.executable,
            str(REPO / "writer.py"),
            "--script",
            plugin,
            "--output",
            out,
            "--workers",
            "2",
            "--partitions",
            "3",
            "--marks",
            marks,
            "--quiet",
            *map(str, extra),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def group_gone(pgid, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def checksums(out):
    return [p["checksum"] for p in recordmill.read_manifest(out)["partitions"]]


@pytest.fixture
def reference(slow, tmp_path):
    plugin, marks = slow
    options = {"marks": str(marks)}
    settings = dict(workers=1, partitions=3, progress=False)
    recordmill.write(plugin, tmp_path / "ref", options=options, **settings)
    for mark in marks.iterdir():
        mark.unlink()
    return checksums(tmp_path / "ref")


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "sighup", "kill -9"])
def test_interrupt_then_resume_gives_the_same_dataset(slow, tmp_path, reference, how):
    plugin, marks = slow
    out = tmp_path / "out"
    process = start(plugin, marks, out, "--hold-from", "3")
    wait_for_staged_tasks(out, 3, process)
    # Held tasks never end on their own: a run that did not stop at once would not end at all.
    if how != "kill -9":
        if how == "ctrl-c":
            os.killpg(process.pid, signal.SIGINT)  # as a terminal does: the whole process group
        elif how == "sighup":
            os.killpg(process.pid, signal.SIGHUP)  # a closed terminal: the whole group too
        else:
            os.kill(process.pid, signal.SIGTERM)  # as a job scheduler does: the main process
        _, err = process.communicate(timeout=ENDS_WITHIN)
        assert process.returncode == {"ctrl-c": 130, "sigterm": 143, "sighup": 129}[how]
        assert "--resume" in err and "Traceback" not in err
        assert group_gone(process.pid), "workers outlived the interrupted run"
        assert not (tmp_path / ".out.recordmill-lock").exists()  # the lock released
    else:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=ENDS_WITHIN)
        os.killpg(process.pid, signal.SIGKILL)  # the power cut: everything dies
        group_gone(process.pid)
    assert not out.exists()
    done_before = {int(m.name.split("-")[0]) for m in marks.iterdir()}

    refused = run_writer("--script", plugin, "--output", out, "--marks", marks, "--partitions", "3")
    assert refused.returncode == 1
    staging = tmp_path / ".out.recordmill-partial"
    assert f"an interrupted run left {staging} (its work); pass --resume to finish it" in (
        refused.stderr
    )

    for mark in marks.iterdir():
        mark.unlink()
    (tmp_path / "marks.go").touch()
    finished = {
        int(p.stem.split("-")[1])
        for p in (tmp_path / ".out.recordmill-partial" / "_tasks").glob("task-*.json")
    }
    resumed = run_writer(
        "--script",
        plugin,
        "--output",
        out,
        "--marks",
        marks,
        "--partitions",
        "3",
        "--workers",
        "2",
        "--hold-from",
        "3",
        "--resume",
        "--quiet",
    )
    assert resumed.returncode == 0, resumed.stderr
    ran_again = {int(m.name.split("-")[0]) for m in marks.iterdir()}
    assert finished and not (ran_again & finished)  # finished tasks were not run again
    assert ran_again | finished == set(range(12))
    assert done_before  # the interrupted run had started tasks
    assert checksums(out) == reference
    assert not (tmp_path / ".out.recordmill-partial").exists()


def test_resume_with_other_options_is_refused(slow, tmp_path):
    plugin, marks = slow
    out = tmp_path / "out"
    process = start(plugin, marks, out, "--hold-from", "1")
    wait_for_staged_tasks(out, 1, process)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=ENDS_WITHIN)
    result = run_writer(
        "--script", plugin, "--output", out, "--marks", marks, "--partitions", "4", "--resume"
    )
    assert result.returncode == 1
    assert "cannot --resume: this run differs from the interrupted one (" in result.stderr
    assert "--partitions: 3 then, 4 now" in result.stderr
    assert "'format'" not in result.stderr  # only what changed, not the whole settings


def test_a_second_run_on_the_same_output_is_refused(slow, tmp_path):
    plugin, marks = slow
    out = tmp_path / "out"
    first = start(plugin, marks, out, "--hold-from", "1")
    wait_for_staged_tasks(out, 1, first)
    second = run_writer("--script", plugin, "--output", out, "--marks", marks, "--overwrite")
    assert second.returncode == 1 and "another recordmill run is writing" in second.stderr
    (tmp_path / "marks.go").touch()
    first.communicate(timeout=ENDS_WITHIN)
    assert first.returncode == 0
    assert recordmill.read_manifest(out)["total_rows"] == 600


DYING = """
    import os

    def add_options(parser):
        parser.add_argument("--marks", required=True)
        parser.add_argument("--how", default="exit")
        parser.add_argument("--times", type=int, default=1)

    def task_number():
        return 6

    def dict_data(task_id, options):
        mark = os.path.join(options.marks, str(task_id))
        tries = len(open(mark).read()) if os.path.exists(mark) else 0
        open(mark, "a").write("x")
        if task_id == 4 and tries < options.times:
            if options.how == "exit":
                os._exit(3)
            if options.how == "segfault":
                import ctypes
                ctypes.string_at(0)
            if options.how == "hang":
                import time
                time.sleep(600)  # a read that never returns
            raise RuntimeError("flaky source")
        for i in range(10):
            yield {"task": task_id, "i": i}
"""


@pytest.mark.parametrize(("how", "workers"), [("exit", 2), ("segfault", 2), ("segfault", 1)])
def test_a_dead_worker_is_retried_on_a_fresh_one(tmp_path, how, workers):
    plugin = make_plugin(tmp_path / "dying", DYING)
    (tmp_path / "marks").mkdir()
    result = run_writer(
        "--script",
        plugin,
        "--output",
        tmp_path / "out",
        "--workers",
        workers,
        "--marks",
        tmp_path / "marks",
        "--how",
        how,
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    assert recordmill.read_manifest(tmp_path / "out")["total_rows"] == 60
    assert (tmp_path / "marks" / "4").read_text() == "xx"


def test_retries_run_out_and_the_task_is_named(tmp_path):
    plugin = make_plugin(tmp_path / "dying", DYING)
    (tmp_path / "marks").mkdir()
    result = run_writer(
        "--script",
        plugin,
        "--output",
        tmp_path / "out",
        "--workers",
        "2",
        "--marks",
        tmp_path / "marks",
        "--times",
        "9",
        "--retries",
        "1",
        "--quiet",
        timeout=60,
    )
    assert result.returncode == 1
    assert "the worker running task 4 died (exit code 3, 2 times)" in result.stderr
    assert not (tmp_path / "out").exists()


def test_one_worker_reports_a_fatal_signal_as_the_pool_does(tmp_path):
    plugin = make_plugin(tmp_path / "dying", DYING)
    (tmp_path / "marks").mkdir()
    result = run_writer(
        *("--script", plugin, "--output", tmp_path / "out", "--workers", "1"),
        *("--marks", tmp_path / "marks", "--how", "segfault", "--times", "9", "--quiet"),
        timeout=60,
    )
    assert result.returncode == 1
    assert "the worker running task 4 died (exit code -11: killed by SIGSEGV, " in result.stderr
    assert not (tmp_path / "out").exists()


def test_plugin_errors_are_retried_only_when_asked(tmp_path):
    plugin = make_plugin(tmp_path / "dying", DYING)
    for flag, code in (([], 1), (["--retries-on-error"], 0)):
        marks = tmp_path / f"marks{code}"
        marks.mkdir()
        result = run_writer(
            "--script",
            plugin,
            "--output",
            tmp_path / f"out{code}",
            "--workers",
            "2",
            "--marks",
            marks,
            "--how",
            "raise",
            "--quiet",
            *flag,
        )
        assert result.returncode == code, result.stderr
        assert (marks / "4").read_text() == ("x" if code else "xx")
        assert ("task 4 failed: dict_data() raised RuntimeError: flaky" in result.stderr) == (
            code == 1
        )


def test_a_task_that_fails_every_time_says_how_often_it_was_tried(tmp_path):
    plugin = make_plugin(tmp_path / "dying", DYING)
    (tmp_path / "marks").mkdir()
    result = run_writer(
        *("--script", plugin, "--output", tmp_path / "out", "--marks", tmp_path / "marks"),
        *("--how", "raise", "--times", "9", "--retries-on-error", "--retries", "2", "--quiet"),
    )
    assert result.returncode == 1
    assert "raised RuntimeError: flaky source (tried 3 times)" in result.stderr  # no "at row 0"
    assert (tmp_path / "marks" / "4").read_text() == "xxx"


def test_a_full_disk_is_a_clear_error_and_leaves_nothing(tmp_path):
    plugin = make_plugin(
        tmp_path / "big",
        """
        def task_number():
            return 4

        def dict_data(task_id):
            for i in range(200):
                yield {"i": i, "blob": bytes(5000)}
        """,
    )

    def limit():  # a file-size limit: what a full small filesystem looks like to the writer
        resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))

    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "writer.py"),
            "--script",
            plugin,
            "--output",
            tmp_path / "out",
            "--workers",
            "2",
            "--compression",
            "none",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        timeout=120,
    )
    assert result.returncode == 1
    assert "cannot write" in result.stderr and "File too large" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / ".out.recordmill-partial").exists()


BAD_ROWS = """
    def task_number():
        return 3

    def schema():
        return {"id": {"type": "int32"}, "name": {"type": "string"}}

    def dict_data(task_id):
        for i in range(100):
            n = task_id * 100 + i
            if n in (5, 6, 150):
                yield {"id": "five" if n == 5 else n, "name": None if n == 6 else "x"}
            elif n == 250:
                yield {"id": n}
            else:
                yield {"id": n, "name": f"n{n}"}
"""


def test_bad_rows_fail_by_default_and_are_listed_with_skip(tmp_path):

    plugin = make_plugin(tmp_path / "bad", BAD_ROWS)
    result = run_writer("--script", plugin, "--output", tmp_path / "o", "--workers", "1", "--quiet")
    assert result.returncode == 1
    assert "task 0, row 5, field 'id': wrong type; expected int32, got str 'five'" in result.stderr
    result = run_writer(
        "--script",
        plugin,
        "--output",
        tmp_path / "o",
        "--on-bad-input",
        "skip",
        "--workers",
        "2",
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    assert "3 inputs rejected" in result.stdout
    lines = recordmill.read_rejects(tmp_path / "o")
    assert [(x["task_id"], x["row"], x["field"]) for x in lines] == [
        (0, 5, "id"),
        (0, 6, "name"),
        (2, 50, "name"),
    ]
    assert lines[0]["value"] == "'five'" and "value" not in lines[2]  # a missing field has none
    assert "row 50, field 'name': missing field" in lines[2]["reason"]
    assert "value is None" in lines[1]["reason"]
    ids = recordmill.open(str(tmp_path / "o")).to_arrow()["id"].to_pylist()
    assert ids == [n for n in range(300) if n not in (5, 6, 250)]
    assert recordmill.read_manifest(tmp_path / "o")["rejects"]["count"] == 3
    result = run_writer(
        "--script",
        plugin,
        "--output",
        tmp_path / "o2",
        "--on-bad-input",
        "skip",
        "--max-rejects",
        "2",
        "--workers",
        "1",
        "--quiet",
    )
    assert result.returncode == 1 and "more than --max-rejects 2" in result.stderr
    assert not (tmp_path / "o2").exists()
    exactly = run_writer(
        *("--script", plugin, "--output", tmp_path / "o3", "--on-bad-input", "skip"),
        *("--max-rejects", "3", "--workers", "1", "--quiet"),
    )
    assert exactly.returncode == 0, exactly.stderr  # 3 rejects are not more than 3


IDLE = """
    import os, time

    def add_options(parser):
        parser.add_argument("--marks", required=True)

    def task_number():
        return 2

    def dict_data(task_id, options):
        if task_id == 0:
            # Held until the test has killed the other worker, idle after task 1.
            deadline = time.monotonic() + 120
            while not os.path.exists(options.marks + ".go") and time.monotonic() < deadline:
                time.sleep(0.01)
        else:
            open(os.path.join(options.marks, str(os.getpid())), "w").close()
        for i in range(10):
            yield {"task": task_id, "i": i}
"""


def test_a_worker_killed_while_idle_is_replaced_and_no_task_is_lost(tmp_path):
    plugin = make_plugin(tmp_path / "idle", IDLE)
    marks = tmp_path / "marks"
    marks.mkdir()
    process = subprocess.Popen(
        [
            *(sys.executable, REPO / "writer.py", "--script", plugin, "--output", tmp_path / "out"),
            *("--workers", "2", "--partitions", "2", "--marks", marks, "--quiet"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_staged_tasks(tmp_path / "out", 1, process)  # task 1's: its worker is idle now
    os.kill(int(next(marks.iterdir()).name), signal.SIGKILL)
    (tmp_path / "marks.go").touch()
    _, err = process.communicate(timeout=ENDS_WITHIN)
    assert process.returncode == 0, err
    assert recordmill.read_manifest(tmp_path / "out")["total_rows"] == 20


@pytest.mark.parametrize("times", [1, 9])
def test_a_task_over_the_timeout_is_stopped_and_run_again(tmp_path, times):
    plugin = make_plugin(tmp_path / "dying", DYING)
    (tmp_path / "marks").mkdir()
    began = time.monotonic()
    result = run_writer(
        *("--script", plugin, "--output", tmp_path / "out", "--workers", "2", "--retries", "1"),
        # Long enough for the other tasks (ten rows each) on a busy machine (a worker may wait
        # a second for a core); one stopped by mistake would run again (--retries 1), and
        # task 4's count would stay the same.
        *("--task-timeout", "3", "--marks", tmp_path / "marks", "--how", "hang"),
        *("--times", times, "--quiet"),
        timeout=120,
    )
    assert time.monotonic() - began < 110
    if times == 1:
        assert result.returncode == 0, result.stderr
        assert recordmill.read_manifest(tmp_path / "out")["total_rows"] == 60
        assert (tmp_path / "marks" / "4").read_text() == "xx"
    else:
        assert result.returncode == 1
        assert "task 4 ran longer than --task-timeout (2 times); it was stopped" in result.stderr
        assert not (tmp_path / "out").exists()


def test_a_task_without_progress_is_named_in_the_progress_bar(tmp_path):
    plugin = make_plugin(tmp_path / "dying", DYING)
    (tmp_path / "marks").mkdir()
    result = run_writer(
        *("--script", plugin, "--output", tmp_path / "out", "--workers", "2"),
        # A task without progress for 2 s is named. On a busy machine a task that is only
        # waiting for a core may be named too, for a while: the hung one is named last, alone.
        *("--task-timeout", "4", "--marks", tmp_path / "marks", "--how", "hang"),
        env={"RECORDMILL_STALL_SECONDS": "2"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    stalls = [line for line in result.stderr.splitlines() if "no progress from" in line]
    assert stalls and re.search(r"no progress from task 4 \(\d+ s\)$", stalls[-1]), stalls
