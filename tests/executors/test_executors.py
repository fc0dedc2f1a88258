"""The executor contract: an executor from outside the package, registered by an installed
package's entry point, brings its own flag and runs a whole write."""

from __future__ import annotations

import pytest

import recordmill
from recordmill import executors
from recordmill.errors import ConfigError
from tests.conftest import COUNTING_PLUGIN, install_package, make_plugin, run_writer

# One job at a time in this process, logging each job's index to --journal.
EXECUTOR = """
    from recordmill.executors import Executor


    class SerialExecutor(Executor):
        @classmethod
        def add_options(cls, group):
            group.add_argument("--journal", required=True, help="a file listing the jobs run")

        def execute(self, fn, jobs, unit, report):
            with open(self.options["journal"], "a") as journal:
                for index, job in enumerate(jobs):
                    result = fn(job)
                    journal.write(f"{unit} {index}\\n")
                    report(result.progress())
                    yield index, result


    class NotAnExecutor:  # registered as one by mistake
        pass
"""


@pytest.fixture(scope="module")
def installed_executor(tmp_path_factory):
    return install_package(
        tmp_path_factory.mktemp("executor"),
        "rm-serial",
        {"__init__.py": EXECUTOR},
        """
        [project.entry-points."recordmill.executors"]
        serial = "rm_serial:SerialExecutor"
        notone = "rm_serial:NotAnExecutor"
        """,
    )


def test_an_installed_executor_runs_a_write_with_its_own_flag(installed_executor, tmp_path):
    env = {"PYTHONPATH": str(installed_executor)}
    plugin = make_plugin(tmp_path / "counting", COUNTING_PLUGIN)
    help_text = run_writer("--executor", "serial", "--help", env=env).stdout
    assert "options of --executor serial" in help_text and "--journal" in help_text
    journal = tmp_path / "journal.txt"
    result = run_writer(
        "--script", plugin, "--output", tmp_path / "out", "--partitions", "2",
        "--executor", "serial", "--journal", journal, "--quiet", env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert journal.read_text().splitlines() == [f"task {t}" for t in range(4)] + [
        "partition 0",
        "partition 1",
    ]
    assert len(recordmill.open(str(tmp_path / "out"))) == 25
    missing = run_writer(
        "--script", plugin, "--output", tmp_path / "o2", "--executor", "serial", env=env
    )
    assert missing.returncode == 2 and "--journal" in missing.stderr


def test_an_installed_executor_s_required_option_and_a_class_of_another_kind_are_named(
    installed_executor, monkeypatch
):
    monkeypatch.syspath_prepend(str(installed_executor))
    with pytest.raises(ConfigError, match=r"^--executor serial needs --journal$"):
        executors.options_of("serial", {})
    assert executors.options_of("serial", {"journal": "j.txt"}) == {"journal": "j.txt"}
    with pytest.raises(ConfigError) as caught:
        executors.find("notone")
    assert str(caught.value) == (
        "executor 'notone' (rm_serial:NotAnExecutor) is not a subclass of "
        "recordmill.executors.Executor"
    )


def test_executor_options_are_checked():
    with pytest.raises(ConfigError, match=r"executor 'dask' has no option\(s\) \['dask_adress'\]"):
        executors.options_of("dask", {"dask_adress": "x"})
    with pytest.raises(ConfigError, match=r"no executor 'spark'; executors: dask, process, ray"):
        executors.find("spark")


def test_an_executor_mistake_keeps_an_interrupted_run(tmp_path):
    plugin = make_plugin(tmp_path / "counting", COUNTING_PLUGIN)
    staging = tmp_path / ".out.recordmill-partial"
    staging.mkdir()
    (staging / "run.json").write_text("{}")
    for options in ({"dask_adress": "tcp://x:1"}, {"journal": "j"}):
        with pytest.raises(ConfigError, match="has no option"):
            recordmill.write(
                plugin, tmp_path / "out", resume=True, executor="dask", executor_options=options
            )
        assert (staging / "run.json").is_file()  # still there for a --resume done right


def test_another_executors_option_is_ignored_with_a_note(tmp_path):
    plugin = make_plugin(tmp_path / "counting", COUNTING_PLUGIN)
    (tmp_path / "run.yaml").write_text("executor: dask\ndask-address: tcp://127.0.0.1:1\n")
    result = run_writer(
        "--script", plugin, "--output", tmp_path / "out", "--config", tmp_path / "run.yaml",
        "--executor", "process", "--workers", "1", "--quiet",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "dask_address is an option of --executor dask, not of process; ignored" in result.stderr
