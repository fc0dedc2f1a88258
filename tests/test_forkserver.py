"""The fork server started before a write's imports: it imports what the plugin names once the
plugin is loaded, before the plan is made; a main process that ends first leaves nothing behind;
and the process ends at once, its exit handlers run (recordmill.cli.finish)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from recordmill import forkserver
from tests.conftest import REPO, make_plugin, python_prints, run_writer

# A module nothing imports by itself: in a worker's sys.modules only if the fork server did.
MARKER = "xml.dom.minidom"

PLUGIN = f"""
    import atexit, os, sys, threading, time

    def worker_imports():
        return [{MARKER!r}]

    def add_options(parser):
        # Set in the main process as the command line is read: its workers must see it.
        os.environ["RECORDMILL_TEST_FLAG"] = "set-by-the-plugin"

    def task_number():
        # A thread of its own that finishes after the run: it must not be cut short.
        out = sys.argv[sys.argv.index("--output") + 1]
        threading.Thread(target=_later, args=(out + ".thread",)).start()
        return 2

    def _later(path):
        time.sleep(0.5)
        with open(path, "w") as f:
            f.write("done")

    def schema():
        return {{"task": "int32", "preloaded": "bool", "flag": "string"}}

    def dict_data(task_id):
        flag = os.environ.get("RECORDMILL_TEST_FLAG", "")
        yield {{"task": task_id, "preloaded": {MARKER!r} in sys.modules, "flag": flag}}

    def _said():  # an exit handler of the plugin, in the main process: must run
        with open(sys.argv[sys.argv.index("--output") + 1] + ".exited", "w") as f:
            f.write("yes")

    atexit.register(_said)
"""


@pytest.fixture
def short_tmp():
    """A TMPDIR of a short path: the fork server's socket is made there (at most 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="rm-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def moments(path):
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return {(e["name"], e["pid"]): e["t"] for e in lines}, lines


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a fork server: Linux")
def test_writer_starts_the_fork_server_first_and_it_imports_what_the_plugin_names(
    tmp_path, short_tmp
):
    plugin = make_plugin(tmp_path / "p", PLUGIN)
    timeline = tmp_path / "timeline.jsonl"
    out = tmp_path / "out"
    env = {"RECORDMILL_TIMELINE": str(timeline), "TMPDIR": str(short_tmp)}
    done = run_writer("--script", plugin, "--output", out, "--workers", "1", env=env)
    assert done.returncode == 0, done.stderr
    # Every worker found the plugin's module imported already: the fork server did it.
    table = pq.read_table(out)
    assert table["preloaded"].to_pylist() == [True, True]
    # The environment the plugin set while loaded reached the workers; its thread finished.
    assert table["flag"].to_pylist() == ["set-by-the-plugin"] * 2
    assert (tmp_path / "out.thread").read_text() == "done"
    times, lines = moments(timeline)
    main = lines[0]["pid"]
    assert lines[0]["name"] == "fork-server-started"  # before the write began: its imports
    assert times[("fork-server-started", main)] < times[("write-called", main)]
    assert any(e["name"] == "job-start" and e["pid"] != main for e in lines)
    # The FIFO's folder, removed by the server once it opened it; the plugin's exit handler ran.
    assert not list(short_tmp.glob("recordmill-forkserver-*"))
    assert (tmp_path / "out.exited").read_text() == "yes"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a fork server: Linux")
def test_a_run_that_fails_before_naming_the_imports_leaves_no_server_waiting(tmp_path, short_tmp):
    timeline = tmp_path / "timeline.jsonl"
    env = {"TMPDIR": str(short_tmp), "RECORDMILL_TIMELINE": str(timeline)}
    done = run_writer("--script", tmp_path / "nowhere", "--output", tmp_path / "o", env=env)
    assert done.returncode == 1 and "recordmill: error:" in done.stderr
    started = json.loads(timeline.read_text().splitlines()[0])
    assert started["name"] == "fork-server-started"
    # The server reads the closed pipe's end, removes its folder and ends with its parent.
    deadline = time.monotonic() + 20
    while _alive(started["server"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(started["server"])
    assert not list(short_tmp.glob("recordmill-forkserver-*"))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@pytest.mark.parametrize(
    ("argv", "early"),
    [
        (["--script", "xyz", "--output", "o"], True),
        (["--script=xyz", "--workers", "4"], True),
        (["--mindrecord_script", "xyz", "--mindrecord_workers", "2"], True),
        (["--script", "xyz", "--workers", "2", "--workers", "0"], False),  # the last one counts
        (["--script", "xyz", "--workers=0"], False),
        (["--script", "xyz", "--executor", "dask"], False),
        (["--script", "xyz", "--executor=process"], True),
        (["--script", "xyz", "--help"], False),
        (["--script", "xyz", "--config", "run.yaml"], False),  # it may say otherwise
        (["--output", "o"], False),  # no plugin: an error to say, nothing to start
    ],
)
def test_only_a_write_of_worker_processes_starts_a_server_early(argv, early):
    assert forkserver._wants_workers(argv) is early


def test_recordmill_command_ends_with_its_code_and_its_output_flushed(tmp_path):
    # Through a pipe, stdout is block-buffered: what the command printed reaches the reader
    # although the process ends without the interpreter's teardown.
    plugin = make_plugin(tmp_path / "p", PLUGIN)
    assert (
        run_writer("--script", plugin, "--output", tmp_path / "o", "--workers", "0").returncode == 0
    )
    code = "from recordmill.cli import console; console()"
    done = subprocess.run(
        [sys.executable, "-c", code, "head", str(tmp_path / "o"), "-n", "2"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 0 and done.stdout.count("task=") == 2, done.stderr
    missing = subprocess.run(
        [sys.executable, "-c", code, "info", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert missing.returncode == 1 and missing.stderr.startswith("recordmill: error:")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a fork server: Linux")
def test_workers_started_before_the_plugin_named_its_imports_get_the_default(tmp_path):
    # An early server whose main process starts workers without start(): it is sent the
    # default's list as they start, never left waiting for a line (the pool would hang).
    code = (
        "from recordmill import forkserver\n"
        "forkserver.start_early(['--script', 'xyz'])\n"
        "from recordmill.executors.pool import WorkerPool\n"
        "from tests.executors.test_pool import sleepy\n"
        "with WorkerPool(1) as pool:\n"
        "    print(len(list(pool.imap_unordered(sleepy, [(1, (0.0,))]))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a fork server: Linux")
def test_a_server_that_cannot_start_early_starts_when_the_workers_do(tmp_path):
    # A TMPDIR too long for a socket's path: the early start gives up, leaving nothing; the
    # pool's own start then meets the same limit and says so in one line (before: a traceback).
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    plugin = make_plugin(tmp_path / "p", PLUGIN)
    done = run_writer("--script", plugin, "--output", tmp_path / "o", env={"TMPDIR": str(deep)})
    assert done.stderr.splitlines() == [
        f"recordmill: error: cannot start worker processes: the fork server's socket in {deep} "
        "would have a path longer than the system allows (108 bytes); set TMPDIR to a shorter "
        "folder"
    ]
    assert not list(deep.glob("recordmill-forkserver-*"))


def test_what_the_fork_server_preloads_leaves_out_what_no_worker_needs():
    """The server's imports are a small write's wait for its workers: no importlib.metadata
    (crc32c's package reads its own version with it; a plugin given by path needs no entry
    points), no importlib.abc, no pandas. The CRC-32C is still the standard one."""
    code = (
        "import sys\n"
        f"import {', '.join(forkserver.OWN_PRELOAD)}\n"
        "from recordmill.dataset.checksum import crc32c\n"
        "print(hex(crc32c(b'123456789')))\n"
        "left_out = {'importlib.metadata', 'importlib.abc', 'pandas', 'crc32c'}\n"
        "print(sorted(left_out & set(sys.modules)))\n"
    )
    assert python_prints(code).split("\n")[:2] == ["0xe3069283", "[]"]
