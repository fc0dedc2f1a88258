"""--executor dask with a real scheduler and two real workers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import recordmill
from tests.conftest import REPO, make_plugin, run_writer, wait_for_staged_tasks

pytest.importorskip("distributed", reason='Dask is not installed (pip install "recordmill[dask]")')

PLUGIN = """
    import os, time

    def add_options(parser):
        parser.add_argument("--sleep", type=float, default=0.0)

    def task_number():
        return 10

    def dict_data(task_id, options):
        time.sleep(options.sleep)
        for i in range(30):
            yield {"task": task_id, "i": i, "pid": 0, "blob": bytes([task_id]) * 64}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, installed_package):
    """A scheduler and two single-process workers, shared by the tests of this module that leave
    them as they are (starting them costs seconds)."""
    yield from start_cluster(tmp_path_factory.mktemp("dask"), installed_package)


@pytest.fixture
def own_cluster(tmp_path, installed_package):
    """A cluster for one test, which may kill its workers."""
    yield from start_cluster(tmp_path, installed_package)


def scheduler_address(scheduler_file: Path) -> str | None:
    """The address the scheduler wrote, once it has written it whole (it is not written at
    once: the file may be there and empty)."""
    try:
        return json.loads(scheduler_file.read_text())["address"]
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def start_cluster(tmp_path, installed_package):
    """A scheduler and two single-process workers, as `dask scheduler` and `dask worker`; the
    workers have the third-party plugin package installed (on their PYTHONPATH)."""
    scheduler_file = tmp_path / "scheduler.json"
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    processes = [
        subprocess.Popen(
            [
                *dask,
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(scheduler_file),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    deadline = time.monotonic() + 60
    while (address := scheduler_address(scheduler_file)) is None:
        assert time.monotonic() < deadline, "the Dask scheduler did not start"
        time.sleep(0.1)
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_worker",
                address,
                "--nthreads",
                "1",
                "--no-dashboard",
                "--host",
                "127.0.0.1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(installed_package)},
        )
        for _ in range(2)
    ]
    processes += workers
    from distributed import Client

    with Client(address) as client:
        client.wait_for_workers(2, timeout=60)
    yield address, workers
    for process in processes:
        process.kill()
        process.wait()


def checksums(out):
    return [p["checksum"] for p in recordmill.read_manifest(out)["partitions"]]


# The same rows, with their counts announced: partitions written straight from the rows.
COUNTED = (
    PLUGIN
    + """
    def task_rows(task_id):
        return 30

    def schema():
        return {"task": "int64", "i": "int64", "pid": "int64", "blob": "bytes"}
"""
)


@pytest.mark.parametrize("source", [PLUGIN, COUNTED], ids=["staged", "direct"])
def test_dask_gives_the_same_files_as_a_local_run(cluster, tmp_path, source):
    address, _ = cluster
    # A folder plugin of two modules: its own helpers import on the Dask workers too.
    plugin = make_plugin(
        tmp_path / "xyz",
        source.replace(
            "import os, time", "import os, time\n    import helpers\n    from .helpers import BLOB"
        ).replace("bytes([task_id]) * 64", "helpers.blob(task_id) * BLOB"),
    )
    (plugin / "helpers.py").write_text(
        "BLOB = 64\n\ndef blob(task_id):\n    return bytes([task_id])\n"
    )
    local = run_writer("--script", plugin, "--output", tmp_path / "local", "--partitions", "3")
    assert local.returncode == 0, local.stderr
    assert ("rows straight to partitions" in local.stderr + local.stdout) == (source is COUNTED)
    remote = run_writer(
        "--script",
        plugin,
        "--output",
        tmp_path / "dask",
        "--partitions",
        "3",
        "--executor",
        "dask",
        "--dask-address",
        address,
        "--quiet",
    )
    assert remote.returncode == 0, remote.stderr
    assert checksums(tmp_path / "dask") == checksums(tmp_path / "local")
    table = recordmill.open(str(tmp_path / "dask")).to_arrow()  # and what the plugin yields
    assert list(zip(table["task"].to_pylist(), table["i"].to_pylist(), strict=True)) == [
        (t, i) for t in range(10) for i in range(30)
    ]
    assert table["blob"].to_pylist() == [bytes([t]) * 64 for t in range(10) for _ in range(30)]


def test_a_worker_killed_mid_run_loses_no_row(own_cluster, tmp_path):
    address, workers = own_cluster
    plugin = make_plugin(tmp_path / "xyz", PLUGIN)
    process = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "writer.py"),
            "--script",
            plugin,
            "--output",
            tmp_path / "out",
            "--partitions",
            "2",
            "--executor",
            "dask",
            "--dask-address",
            address,
            "--sleep",
            "0.4",
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_staged_tasks(tmp_path / "out", 2, process)
    os.kill(workers[0].pid, signal.SIGKILL)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    table = recordmill.open(str(tmp_path / "out")).to_arrow()
    assert sorted(zip(table["task"].to_pylist(), table["i"].to_pylist(), strict=True)) == [
        (t, i) for t in range(10) for i in range(30)
    ]


def test_a_plugin_the_workers_cannot_see_is_named(cluster, tmp_path):
    from types import SimpleNamespace

    from recordmill.dataset.storage import Store
    from recordmill.engine.settings import WriteSettings
    from recordmill.executors import DaskExecutor

    address, _ = cluster
    ref = recordmill.resolve(str(make_plugin(tmp_path / "xyz", PLUGIN)))
    moved = recordmill.PluginRef(ref.name, ref.source, str(tmp_path / "elsewhere" / "plugin.py"))
    with DaskExecutor(2, WriteSettings(), {"dask_address": address}) as executor:
        executor.check(SimpleNamespace(ref=ref), Store.at(tmp_path))  # visible: no error
        with pytest.raises(recordmill.RecordmillError, match=r"cannot load plugin xyz") as e:
            executor.check(SimpleNamespace(ref=moved), Store.at(tmp_path))
        assert re.fullmatch(
            r"Dask worker \S+ \(and 1 more\) cannot run this job: cannot load plugin xyz .*\. "
            r"Folder plugins and the output must be on storage every worker sees \(the same "
            r"path\); installed plugins must be installed on every worker",
            str(e.value),
        ), str(e.value)
        with pytest.raises(recordmill.RecordmillError, match=r"staging folder .* is not visible"):
            executor.check(SimpleNamespace(ref=ref), Store.at(tmp_path / "nowhere"))


def test_an_installed_plugin_runs_on_the_workers(cluster, tmp_path, installed_package):
    address, _ = cluster
    env = {"PYTHONPATH": str(installed_package)}
    local = run_writer("--script", "thirdparty", "--output", tmp_path / "local", "--quiet", env=env)
    assert local.returncode == 0, local.stderr
    remote = run_writer(
        "--script",
        "thirdparty",
        "--output",
        tmp_path / "dask",
        "--executor",
        "dask",
        "--dask-address",
        address,
        "--quiet",
        env=env,
    )
    assert remote.returncode == 0, remote.stderr
    assert checksums(tmp_path / "dask") == checksums(tmp_path / "local")


def test_a_relative_input_path_is_found_by_workers_started_in_another_folder(cluster, tmp_path):
    """`--input tab/wine.csv` from the user's folder: the workers run in another one (the
    repository's, here), so path options are made absolute where the command is parsed."""
    address, _ = cluster
    (tmp_path / "tab").mkdir()
    (tmp_path / "tab" / "wine.csv").write_text("alcohol,label\n14.2,0\n13.2,1\n12.4,2\n")
    result = run_writer(
        *("--script", "csv", "--input", "tab/wine.csv", "--output", "out"),
        *("--executor", "dask", "--dask-address", address, "--quiet"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert recordmill.open(str(tmp_path / "out")).to_arrow()["label"].to_pylist() == [0, 1, 2]
    options = recordmill.read_manifest(tmp_path / "out")["plugin"]["options"]
    assert options["input"] == str(tmp_path / "tab" / "wine.csv")


def test_a_task_that_fails_on_a_worker_names_the_worker_and_its_folder(cluster, tmp_path):
    """A plugin that takes a path as a plain string (not recordmill.kit.Path) reads it relative
    to the worker's folder: the error says which worker, and where it runs."""
    address, _ = cluster
    plugin = make_plugin(
        tmp_path / "plain",
        """
        def add_options(parser):
            parser.add_argument("--input", required=True)  # no type=recordmill.kit.Path

        def task_number():
            return 1

        def dict_data(task_id, options):
            with open(options.input) as f:
                yield {"text": f.read()}
        """,
    )
    (tmp_path / "tab").mkdir()
    (tmp_path / "tab" / "x.txt").write_text("hello")
    result = run_writer(
        *("--script", plugin, "--input", "tab/x.txt", "--output", "out", "--quiet"),
        *("--executor", "dask", "--dask-address", address),
        cwd=tmp_path,
    )
    assert result.returncode == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith(
        "recordmill: error: task 0 failed: dict_data() raised FileNotFoundError"
    )
    assert re.search(
        rf"\(on Dask worker tcp://127\.0\.0\.1:\d+, in {re.escape(os.getcwd())}\)$", first
    )
