"""--executor ray on a local Ray runtime."""

from __future__ import annotations

import subprocess
import sys

import pytest

import recordmill
from tests.conftest import make_plugin, run_writer

ray = pytest.importorskip("ray", reason='Ray is not installed here (pip install "recordmill[ray]")')


@pytest.fixture(scope="module")
def cluster():
    """A local Ray runtime started here, as a user's cluster, for the runs to join with
    ``--ray-address``: a runtime costs seconds to start, a run of its own each time."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


# A folder plugin of two modules: its own helpers import on the Ray workers too.
PLUGIN = """
    import helpers
    from .helpers import ROWS

    def task_number():
        return 6

    def dict_data(task_id):
        for i in range(ROWS):
            yield {"task": task_id, "i": helpers.same(i)}
"""
HELPERS = "ROWS = 20\n\ndef same(i):\n    return i\n"


# The same rows with their counts announced: partitions written straight from the rows.
COUNTED = (
    PLUGIN
    + """
    def task_rows(task_id):
        return 20

    def schema():
        return {"task": "int64", "i": "int64"}
"""
)


@pytest.mark.parametrize("source", [PLUGIN, COUNTED], ids=["staged", "direct"])
def test_ray_writes_the_same_files_as_a_local_run(tmp_path, source, cluster):
    plugin = make_plugin(tmp_path / "xyz", source)
    (plugin / "helpers.py").write_text(HELPERS)
    local = run_writer("--script", plugin, "--output", tmp_path / "local", "--partitions", "2")
    assert local.returncode == 0, local.stderr
    assert ("rows straight to partitions" in local.stdout + local.stderr) == (source is COUNTED)
    remote = run_writer(
        "--script",
        plugin,
        "--output",
        tmp_path / "ray",
        "--partitions",
        "2",
        "--executor",
        "ray",
        "--ray-address",
        cluster,
        "--quiet",
        timeout=240,
    )
    assert remote.returncode == 0, remote.stderr
    sums = [
        [p["checksum"] for p in recordmill.read_manifest(tmp_path / o)["partitions"]]
        for o in ("local", "ray")
    ]
    assert sums[0] == sums[1]
    table = recordmill.open(str(tmp_path / "ray")).to_arrow()  # and what the plugin yields
    assert list(zip(table["task"].to_pylist(), table["i"].to_pylist(), strict=True)) == [
        (t, i) for t in range(6) for i in range(20)
    ]


def test_an_unknown_executor_lists_the_known_ones(tmp_path):
    plugin = make_plugin(tmp_path / "xyz", PLUGIN)
    result = run_writer("--script", plugin, "--output", tmp_path / "o", "--executor", "spark")
    assert result.returncode == 1
    assert "no executor 'spark'; executors: dask, process, ray" in result.stderr


NEEDS_HERE = """
    import only_here  # a package installed where the run starts, and on no worker

    def task_number():
        return 2

    def dict_data(task_id):
        yield {"task": task_id, "rows": only_here.ROWS}
"""


# In a process of its own, which has ``site`` on its sys.path and starts a Ray runtime itself.
REFUSED = """
import sys

import ray

import recordmill

site, plugin, out = sys.argv[1:]
sys.path.insert(0, site)
try:
    recordmill.write(plugin, out, executor="ray", workers=1, progress=False)
except recordmill.RecordmillError as e:
    print(e)
print("runtime left running:", ray.is_initialized())
"""


def test_a_plugin_that_a_worker_cannot_load_is_refused_before_any_task(tmp_path):
    """The plugin imports a package that the run's process finds (on its own sys.path) and
    Ray's workers do not: the run stops at its check, with one line, before a task runs."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "only_here.py").write_text("ROWS = 3\n")
    plugin = make_plugin(tmp_path / "needs", NEEDS_HERE)
    script = tmp_path / "run.py"
    script.write_text(REFUSED)
    run = [sys.executable, script, site, plugin, tmp_path / "out"]
    result = subprocess.run(run, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    described = f"needs (path: {plugin / 'plugin.py'})"
    assert result.stdout.splitlines() == [
        f"a Ray worker cannot run this job: cannot load plugin {described}: cannot import "
        f"plugin {described}: ModuleNotFoundError: No module named 'only_here'. Folder plugins "
        "and the output must be on storage every worker sees; installed plugins must be "
        "installed everywhere",
        "runtime left running: False",  # the runtime the run started, shut down
    ], result.stderr
    # No output, staging folder or lock left.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["needs", "run.py", "site"]
