"""An unmodified MindRecord mr_api.py runs as a plugin, with its mr_argument.pickle flags."""

from __future__ import annotations

import pytest

import recordmill
from tests.conftest import ENDS_WITHIN, read_dataset, run_writer

# The shape of MindSpore's template/mr_api.py, unmodified but for its flag and rows.
MR_API = """
import argparse
import pickle

# read just the argument
with open('mr_argument.pickle', 'rb') as mindrecord_argument_file_handle:  # Do NOT change this line
    ARG_LIST = pickle.load(mindrecord_argument_file_handle)                   # Do NOT change this line
parser = argparse.ArgumentParser(description='Mind record api template')     # Do NOT change this line

# get the arguments
parser.add_argument('--its_own_flag', type=int, default=0, help="description")
args = parser.parse_args(ARG_LIST)
print(args)

# the schema
mindrecord_schema = {"file_name": {"type": "string"}, "label": {"type": "int32"}, "data": {"type": "bytes"}}

# the index fields
mindrecord_index_fields = ["label"]


def mindrecord_task_number():
    return 4


def mindrecord_dict_data(task_id):
    if args.its_own_flag < 0:
        raise ValueError("negative flag")
    for i in range(args.its_own_flag):
        yield {"file_name": f"{task_id}_{i}.jpg", "label": task_id, "data": bytes([task_id, i])}
"""


@pytest.fixture
def legacy(tmp_path):
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "mr_api.py").write_text(MR_API)
    return tmp_path


def test_seed_command_line_runs_an_unmodified_mr_api(legacy):
    result = run_writer(
        "--mindrecord_script",
        "legacy",
        "--mindrecord_file",
        "out",
        "--mindrecord_partitions",
        "4",
        "--mindrecord_workers",
        "8",
        "--its_own_flag",
        "5",
        "--quiet",
        cwd=legacy,
    )
    assert result.returncode == 0, result.stderr
    table = read_dataset(legacy / "out")
    assert table["file_name"].to_pylist() == [f"{t}_{i}.jpg" for t in range(4) for i in range(5)]
    assert table["data"].to_pylist()[7] == bytes([1, 2])
    manifest = recordmill.read_manifest(legacy / "out")
    assert manifest["plugin"]["source"] == "mindrecord" and len(manifest["partitions"]) == 4
    assert [f["type"] for f in manifest["schema"]["fields"]] == ["string", "int32", "bytes"]
    assert not (legacy / "mr_argument.pickle").exists()


def test_the_pickle_is_removed_when_the_run_fails(legacy):
    result = run_writer(
        "--script",
        "legacy",
        "--output",
        "out",
        "--its_own_flag",
        "-1",
        "--workers",
        "2",
        cwd=legacy,
    )
    assert result.returncode == 1
    assert "negative flag" in result.stderr
    assert not (legacy / "mr_argument.pickle").exists()
    assert not (legacy / "out").exists()


def test_a_mr_api_without_the_functions_is_named(tmp_path):
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "mr_api.py").write_text("mindrecord_schema = {}\n")
    result = run_writer("--script", "half", "--output", "out", cwd=tmp_path)
    assert result.returncode == 1
    assert "MindRecord plugin half: mr_api.py has no mindrecord_task_number()" in result.stderr


def test_the_scripts_own_flags_are_recorded_and_a_resume_with_others_is_refused(legacy):
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import REPO

    slow = MR_API.replace(
        "    for i in range(args.its_own_flag):",
        # Held until the run is interrupted, however busy the machine (a sleep can be outlasted).
        "    import time\n    time.sleep(120)\n    for i in range(args.its_own_flag):",
    )
    (legacy / "legacy" / "mr_api.py").write_text(slow)
    command = [sys.executable, str(REPO / "writer.py"), "--script", "legacy", "--output", "out"]
    process = subprocess.Popen(
        [*command, "--workers", "2", "--its_own_flag", "5", "--quiet"],
        cwd=legacy,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    staging = legacy / ".out.recordmill-partial"
    deadline = time.monotonic() + 60
    while not (staging / "run.json").exists():
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    process.communicate(timeout=ENDS_WITHIN)
    assert process.returncode == 130
    refused = run_writer(
        "--script", "legacy", "--output", "out", "--resume", "--its_own_flag", "6", cwd=legacy
    )
    assert (
        refused.returncode == 1
        and "the script's flags: ['--its_own_flag', '5'] then" in refused.stderr
    )
    (legacy / "legacy" / "mr_api.py").write_text(MR_API)
    resumed = run_writer(
        "--script", "legacy", "--output", "out", "--resume", "--its_own_flag", "5", cwd=legacy
    )
    assert resumed.returncode == 0, resumed.stderr
    manifest = recordmill.read_manifest(legacy / "out")
    assert manifest["plugin"]["options"] == {"mindrecord_arguments": ["--its_own_flag", "5"]}
    assert manifest["total_rows"] == 20
