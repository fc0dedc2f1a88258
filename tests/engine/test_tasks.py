"""Tasks in chunks: many tasks cost a message, a fragment and a record per chunk, not per task,
and a run of them reads exactly as a run of single tasks would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import recordmill
from recordmill.dataset import layout
from recordmill.dataset import manifest as manifest_file
from recordmill.engine.tasks import CHUNKS, MAX_CHUNK, chunks
from recordmill.errors import RowError, SchemaError
from recordmill.read.verify import verify
from tests.conftest import REPO, make_plugin, read_dataset, run_writer, wait_for_staged_tasks

# Task t yields t % 3 rows; with SLOW_FROM set, a task from there on waits (to be killed there).
MANY_TASKS = """
    import os
    import time

    def add_options(parser):
        parser.add_argument("--tasks", type=int, default=5000)
        parser.add_argument("--odd-task", type=int, default=-1)
        parser.add_argument("--bad-row-of", type=int, default=-1)

    def task_number(options):
        return options.tasks

    def dict_data(task_id, options):
        if task_id >= int(os.environ.get("SLOW_FROM", options.tasks)):
            time.sleep(120)  # held until the test kills the run, however busy the machine
        for i in range(task_id % 3):
            value = "text" if task_id == options.odd_task else task_id * 10 + i
            if task_id == options.bad_row_of and i == 1:
                value = "text"  # the task's first row made its schema: this row does not fit it
            yield {"task": task_id, "value": value}
"""


def expected(tasks: int) -> list[tuple[int, int]]:
    return [(t, t * 10 + i) for t in range(tasks) for i in range(t % 3)]


def rows_of(table) -> list[tuple[int, int]]:
    return list(zip(table["task"].to_pylist(), table["value"].to_pylist(), strict=True))


@pytest.fixture
def many(tmp_path):
    return make_plugin(tmp_path / "many", MANY_TASKS)


def test_chunks_cover_every_task_once():
    assert chunks(5) == [range(t, t + 1) for t in range(5)]
    big = chunks(10 * CHUNKS + 7)
    assert len(big) <= CHUNKS and max(map(len, big)) > 1
    assert [t for c in big for t in c] == list(range(10 * CHUNKS + 7))
    assert max(map(len, chunks(10**8))) == MAX_CHUNK
    assert chunks(20_000, single=True) == [range(t, t + 1) for t in range(20_000)]
    # A resume runs what the finished chunks left, whatever chunks they were.
    left = chunks(10_000, done=[range(0, 5), range(9_000, 9_990)])
    assert [t for c in left for t in c] == [*range(5, 9_000), *range(9_990, 10_000)]


@pytest.mark.parametrize("workers", [1, 2])
def test_many_tasks_in_chunks_keep_every_row_in_order(many, tmp_path, workers):
    out = tmp_path / "out"
    summary = recordmill.write(
        many, out, options={"tasks": 5000}, partitions=3, workers=workers, progress=False
    )
    assert rows_of(read_dataset(out)) == expected(5000)
    assert manifest_file.task_totals(summary.manifest) == (5000, len(expected(5000)))
    assert verify(out) == []
    staged = tmp_path / ".out.recordmill-partial"
    assert not staged.exists()


def test_a_million_empty_tasks_make_one_manifest_entry(tmp_path):
    plugin = make_plugin(
        tmp_path / "empty",
        """
        def task_number():
            return 1_000_000

        def schema():
            return {"x": {"type": "int64"}}

        def dict_data(task_id):
            return []
        """,
    )
    summary = recordmill.write(plugin, tmp_path / "out", workers=2, progress=False)
    assert summary.rows == 0
    assert summary.manifest["tasks"] == [{"task_id": 0, "rows": 0, "count": 1_000_000}]
    assert verify(tmp_path / "out") == []


def test_inferred_schemas_are_compared_within_a_chunk(many, tmp_path):
    # 5000 tasks run in chunks of 3: task 2501 is inside the chunk of tasks 2499-2501.
    with pytest.raises(
        SchemaError, match=r"field 'value' is int64 in task 2500 but string in task 2501"
    ):
        recordmill.write(
            many, tmp_path / "out", options={"tasks": 5000, "odd_task": 2501}, progress=False
        )


def killed_run(many, out, tasks: int, slow_from: int, finished: int) -> Path:
    """Start writing ``tasks`` tasks of the many-tasks plugin, kill the run once ``finished``
    chunks are staged (tasks from ``slow_from`` on sleep meanwhile); its task records' folder."""
    process = subprocess.Popen(
        [sys.executable, "writer.py", "--script", many, "--output", out, "--tasks", str(tasks)],
        cwd=REPO,
        env={**os.environ, "SLOW_FROM": str(slow_from)},
        start_new_session=True,
    )
    wait_for_staged_tasks(out, finished, process)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return out.parent / layout.staging_folder(out.name) / layout.TASKS_DIR


def test_a_killed_run_of_chunks_resumes_task_by_task(many, tmp_path):
    """Chunks finished before the kill are kept; a resume that runs single tasks
    (--task-timeout) fills exactly the gaps."""
    out = tmp_path / "out"
    records = list(killed_run(many, out, 5000, slow_from=4000, finished=100).glob("*.json"))
    assert 100 <= len(records) < 2048  # chunks, not tasks
    recordmill.write(
        many,
        out,
        options={"tasks": 5000},
        resume=True,
        task_timeout=60,
        workers=2,
        progress=False,
    )
    assert rows_of(read_dataset(out)) == expected(5000)


def test_max_rejects_stops_a_chunk_as_soon_as_it_is_passed(tmp_path):
    # 3,000 tasks run in chunks of 2: task 2k rejects 20 inputs, task 2k+1 would hang.
    plugin = make_plugin(
        tmp_path / "rejecting",
        """
        import time

        import recordmill

        def task_number():
            return 3000

        def dict_data(task_id):
            if task_id % 2:
                time.sleep(600)
            for i in range(20):
                yield recordmill.Reject(f"input {task_id}.{i}", "unreadable")
        """,
    )
    result = run_writer(
        "--script", plugin, "--output", tmp_path / "out", "--on-bad-input", "skip",
        "--max-rejects", "15", "--quiet", timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "20 inputs rejected, more than --max-rejects 15; the last: input" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_resume_reads_the_task_records_of_the_version_before_chunks(many, tmp_path):
    out = tmp_path / "out"
    for record in killed_run(many, out, 10, slow_from=6, finished=4).glob("*.json"):
        new = json.loads(record.read_text())
        ((rows, _),) = new["task_rows"]
        old = {"task_id": new["first"], "rows": rows, "batch_rows": new["batch_rows"]}
        old |= {"nbytes": new["nbytes"], "schema": new["schema"]}
        old["rejects"] = [r for _, r in new["rejects"]]
        record.write_text(json.dumps(old))
    recordmill.write(many, out, options={"tasks": 10}, resume=True, progress=False)
    assert rows_of(read_dataset(out)) == expected(10)


def test_a_bad_row_among_small_tasks_is_named_by_its_task_and_row(many, tmp_path):
    """Tasks 2499-2501 are one chunk, and their 3 rows one batch: the third row is task 2501's
    row 1."""
    options = {"tasks": 5000, "bad_row_of": 2501}
    with pytest.raises(RowError, match=r"task 2501, row 1, field 'value'"):
        recordmill.write(many, tmp_path / "fail", options=options, progress=False)
    summary = recordmill.write(
        many, tmp_path / "skip", options=options, on_bad_input="skip", progress=False
    )
    kept = [row for row in expected(5000) if row != (2501, 25011)]
    assert rows_of(read_dataset(tmp_path / "skip")) == kept
    assert manifest_file.task_totals(summary.manifest) == (5000, len(kept))
    (reject,) = recordmill.read_rejects(tmp_path / "skip")
    assert (reject["task_id"], reject["row"], reject["field"]) == (2501, 1, "value")


def empty_input(plugin: str, folder: Path) -> list:
    """Flags giving ``plugin`` an input that holds nothing to write."""
    if plugin == "imagenet":
        (folder / "images").mkdir()
        return ["--image-dir", folder / "images"]
    if plugin == "filelist":
        (folder / "images.lst").write_text("\n")
        return ["--list", folder / "images.lst"]
    if plugin == "csv":
        (folder / "t.csv").write_text("a,b\n")
        return ["--input", folder / "t.csv"]
    if plugin == "recordio":
        (folder / "t.rec").write_bytes(b"")
        return ["--input", folder / "t.rec"]
    (folder / "t.tfrecord").write_bytes(b"")
    (folder / "s.yaml").write_text("x: int64\n")
    return ["--input", folder / "t.tfrecord", "--schema", folder / "s.yaml"]


@pytest.mark.parametrize(
    ("plugin", "said"),
    [
        ("imagenet", "holds no class folder"),
        ("filelist", "lists no image: it is empty"),
        ("csv", "gave no row (and no bad input) in 1 task: nothing to write"),
        ("recordio", "gave no row (and no bad input) in 1 task: nothing to write"),
        ("tfrecord", "gave no row (and no bad input) in 1 task: nothing to write"),
    ],
)
def test_a_built_in_plugins_input_that_gives_nothing_says_so(tmp_path, plugin, said):
    """Every input ends up as a row or a reject: one that gives neither is an error."""
    args = empty_input(plugin, tmp_path)
    result = run_writer("--script", plugin, *args, "--output", tmp_path / "o", "--quiet")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert said in lines[0]
    assert not (tmp_path / "o").exists()


FIRST_TASK = """
import sys
import importlib.machinery


class NoPandas:  # as where pandas is not installed (pandas imports both itself)
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "pandas":
            return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec):
        raise ModuleNotFoundError(f"No module named {spec.name!r}", name=spec.name)

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, NoPandas())
import numpy as np
from recordmill.forkserver import OWN_PRELOAD
import importlib
for name in OWN_PRELOAD:  # what a worker has when the fork server forks it
    importlib.import_module(name)
from recordmill.dataset.schema import to_arrow_schema
from recordmill.engine.convert import RowConverter

before = set(sys.modules)
schema = to_arrow_schema({
    "id": {"type": "int64"}, "label": {"type": "int32"}, "name": {"type": "string"},
    "data": {"type": "bytes"}, "f": {"type": "float32", "shape": [8]},
    "t": {"type": "uint16", "shape": [-1]}, "m": {"type": "uint8", "shape": [2, -1]},
})
rows = [{"id": i, "label": i % 10, "name": f"n{i}", "data": b"x" * i,
         "f": np.full(8, i, np.float32), "t": np.arange(i % 5, dtype=np.uint16),
         "m": np.zeros((2, i % 3), np.uint8)} for i in range(50)]
batch = RowConverter(schema).to_batch(rows)
assert batch.column(1).to_pylist() == [i % 10 for i in range(50)]
print(" ".join(sorted(m for m in set(sys.modules) - before if m in ("pyarrow.compute", "numpy.ma"))))
"""


def test_a_workers_first_rows_import_neither_pyarrow_compute_nor_numpy_ma():
    """pyarrow.compute (for an int cast) and numpy.ma (which pa.array of an array looks for)
    were imported by each worker's first rows: 32 ms of its CPU, 1.4 ms without them."""
    out = subprocess.run(
        [sys.executable, "-c", FIRST_TASK], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == []
