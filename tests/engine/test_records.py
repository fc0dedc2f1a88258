"""What a run leaves for --resume: a task record that a power cut left empty or short (task
records are not flushed, see records.save_record) is passed over, and its tasks run again."""

from __future__ import annotations

import recordmill
from recordmill.engine.commit import KILL_AT
from recordmill.read.verify import verify
from tests.conftest import read_dataset, run_writer


def test_a_damaged_task_record_is_passed_over_and_its_tasks_run_again(counting_plugin, tmp_path):
    out = tmp_path / "out"
    args = ["--script", counting_plugin, "--output", out, "--workers", "2", "--quiet"]
    args += ["--partitions", "2", "--on-bad-input", "skip"]  # staged: one record per task
    assert run_writer(*args, env={KILL_AT: "tasks-done"}).returncode == -9
    tasks = tmp_path / ".out.recordmill-partial" / "_tasks"
    (tasks / "task-000000.json").write_bytes(b"")  # a name on the disk, its data not
    (tasks / "task-000002.json").write_bytes(b'{"first": 2, "task_r')
    resumed = run_writer(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert verify(out) == [] and recordmill.read_manifest(out)["total_rows"] == 25
    rows = read_dataset(out).to_pylist()
    assert [(r["task"], r["i"]) for r in rows] == [
        (t, i) for t, n in enumerate((5, 0, 17, 3)) for i in range(n)
    ]
