"""Writing each byte once: plugins that announce their row counts (task_rows) get partitions
made straight from their rows, the same files as through staged fragments."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

import recordmill
from recordmill.dataset import layout
from recordmill.engine.direct import plan
from recordmill.read.verify import verify
from tests.conftest import ENDS_WITHIN, REPO, make_plugin, run_writer

PLUGIN = """
    import numpy as np

    SIZES = [5, 0, 4, 3, 9, 2, 6]

    def add_options(parser):
        parser.add_argument("--announce", default="yes")  # yes, no, or "wrong"

    def task_number():
        return len(SIZES)

    def task_rows(task_id, options):
        if options.announce == "no":
            return None
        if options.announce == "wrong" and task_id == 2:
            return SIZES[2] + 1
        return SIZES[task_id]

    def schema():
        return {"id": {"type": "int64"}, "name": {"type": "string"},
                "x": {"type": "float32", "shape": [40]}}

    def dict_data(task_id):
        first = sum(SIZES[:task_id])
        for i in range(SIZES[task_id]):
            n = first + i
            yield {"id": n, "name": f"row {n}", "x": np.full(40, n, dtype=np.float32)}
"""
TOTAL = 29


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    return make_plugin(tmp_path_factory.mktemp("direct") / "counted", PLUGIN)


def write(plugin, out, announce="yes", **settings):
    return recordmill.write(
        plugin,
        out,
        options={"announce": announce},
        partitions=settings.pop("partitions", 4),
        row_group_size=4,
        progress=False,
        **settings,
    )


def checksums(summary):
    return [p["checksum"] for p in summary.manifest["partitions"]]


def test_the_plan_balances_partitions_over_tasks():
    parts = plan([5, 0, 12, 3, 9], 4)
    assert [(lo, hi) for lo, hi, _ in parts] == [(0, 8), (8, 15), (15, 22), (22, 29)]
    first = parts[0][2]
    assert [(s.task_id, s.first, s.end) for s in first] == [(0, 0, 5), (2, 0, 3)]
    assert [(s.task_id, s.first, s.end) for s in parts[2][2]] == [(2, 10, 12), (3, 0, 3), (4, 0, 2)]
    assert sum(s.end - s.first for _, _, segments in parts for s in segments) == 29


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_the_same_files_as_through_staged_fragments_whatever_the_workers(plugin, tmp_path, fmt):
    staged = write(plugin, tmp_path / "staged", announce="no", format=fmt)
    direct = write(plugin, tmp_path / "direct", format=fmt, workers=2)
    one = write(plugin, tmp_path / "one", format=fmt, workers=1)
    assert "tasks" in staged.phases and "rows straight to partitions" in direct.phases
    assert checksums(direct) == checksums(staged) == checksums(one)
    assert direct.manifest["tasks"] == staged.manifest["tasks"]
    rows = recordmill.open(str(tmp_path / "direct")).to_arrow()
    assert rows["id"].to_pylist() == list(range(TOTAL))
    assert [p["rows"] for p in direct.manifest["partitions"]] == [8, 7, 7, 7]
    assert verify(tmp_path / "direct") == []


def test_more_partitions_than_rows(plugin, tmp_path):
    summary = write(plugin, tmp_path / "many", partitions=40)
    assert [p["rows"] for p in summary.manifest["partitions"]].count(1) == TOTAL
    ds = recordmill.open(str(tmp_path / "many"))
    assert [ds[i]["id"] for i in range(TOTAL)] == list(range(TOTAL))
    assert ds[7]["x"].tolist() == list(np.full(40, 7, dtype=np.float32))


def test_a_wrong_count_fails_naming_the_task_and_writes_nothing(plugin, tmp_path):
    with pytest.raises(recordmill.RecordmillError) as e:
        write(plugin, tmp_path / "wrong", announce="wrong", partitions=2)
    assert "task 2 failed: task_rows() announced 5 rows, dict_data() yielded 4" in str(e.value)
    assert not (tmp_path / "wrong").exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith("-lock")] == []


def test_a_shuffle_or_a_skip_policy_takes_the_staged_path(plugin, tmp_path):
    shuffled = write(plugin, tmp_path / "shuffled", shuffle=True, seed=1)
    skipping = write(plugin, tmp_path / "skipping", on_bad_input="skip")
    assert "tasks" in shuffled.phases and "tasks" in skipping.phases


SLOW = """
    import os, time

    def add_options(parser):
        parser.add_argument("--marks", required=True)
        parser.add_argument("--hold-from", type=int, default=12)
        parser.add_argument("--die-once", type=int, default=-1)

    def task_number():
        return 12

    def task_rows(task_id):
        return 50

    def schema():
        return {"task": "int64", "i": "int64", "blob": "bytes"}

    def dict_data(task_id, options):
        mark = os.path.join(options.marks, f"{task_id}-{os.getpid()}-{time.time_ns()}")
        open(mark, "w").close()
        if task_id == options.die_once and len(os.listdir(options.marks)) and not os.path.exists(
            os.path.join(options.marks, "died")
        ):
            open(os.path.join(options.marks, "died"), "w").close()
            os._exit(3)  # the worker dies while writing its partition
        # Tasks from --hold-from on wait for the gate (MARKS.go): the run is surely still running
        # when the test kills it, however busy the machine.
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


def writer_args(plugin, marks, out, *extra):
    return [
        *("--script", plugin, "--output", out, "--partitions", "6", "--workers", "2"),
        *("--marks", marks, "--quiet", *extra),
    ]


def reference_checksums(plugin, marks, tmp_path):
    """The checksums of the same run never killed (written in this process)."""
    options = {"marks": str(marks)}
    recordmill.write(plugin, tmp_path / "ref", options=options, partitions=6, progress=False)
    for mark in marks.iterdir():
        mark.unlink()
    return [p["checksum"] for p in recordmill.read_manifest(tmp_path / "ref")["partitions"]]


def test_a_killed_run_resumes_its_unwritten_partitions_to_the_same_files(slow, tmp_path):
    plugin, marks = slow
    reference = reference_checksums(plugin, marks, tmp_path)
    out = tmp_path / "out"
    process = subprocess.Popen(
        [
            *(sys.executable, str(REPO / "writer.py")),
            *map(str, writer_args(plugin, marks, out, "--hold-from", "4")),
        ],
        start_new_session=True,
    )
    parts = tmp_path / layout.staging_folder("out") / layout.PARTS_DIR
    deadline = time.monotonic() + 60
    while not (parts.is_dir() and len(list(parts.glob("*.json"))) >= 2):
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the power cut: the run and its workers
    process.wait(timeout=ENDS_WITHIN)
    assert not out.exists()
    written = sorted(int(p.name.split("-")[1]) for p in parts.glob("*.json"))
    for mark in marks.iterdir():
        mark.unlink()
    (tmp_path / "marks.go").touch()
    resumed = run_writer(*writer_args(plugin, marks, out, "--hold-from", "4", "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    ran_again = [int(m.name.split("-")[0]) for m in marks.iterdir()]
    # Finished partitions are not written again; task 0's first rows are made once more in the
    # main process, which sizes the row groups from them.
    assert ran_again.count(0) == 1 + (0 not in written)
    assert not set(ran_again) & {t for p in written for t in (2 * p, 2 * p + 1)} - {0}
    assert [p["checksum"] for p in recordmill.read_manifest(out)["partitions"]] == reference


def test_a_worker_that_dies_writing_a_partition_is_replaced(slow, tmp_path):
    plugin, marks = slow
    reference = reference_checksums(plugin, marks, tmp_path)
    result = run_writer(*writer_args(plugin, marks, tmp_path / "out", "--die-once", "5"))
    assert result.returncode == 0, result.stderr
    assert (marks / "died").exists()
    assert [p["checksum"] for p in recordmill.read_manifest(tmp_path / "out")["partitions"]] == (
        reference
    )


def test_tasks_much_larger_than_partitions_take_the_staged_path():
    from recordmill.engine.direct import pays

    assert pays([5, 0, 4, 3, 9, 2, 6], 4)  # 36 rows made for 29 written
    assert not pays([5, 0, 12, 3, 9], 4)  # 44 made for 29: task 2 is in three partitions
    assert not pays([100], 4)  # one task in 4 partitions: 250 rows made for 100
    assert pays([100] * 40, 4)


COUNTED = """
    import os

    def add_options(parser):
        parser.add_argument("--log", required=True)
        parser.add_argument("--text", action="store_true")

    def task_number():
        return 2

    def task_rows(task_id):
        return 3000

    def schema(options):
        kind = "string" if options.text else "float64"
        return {"id": {"type": "int64"}, "x": {"type": kind}, "ok": {"type": "bool"}}

    def dict_data(task_id, options):
        with open(os.path.join(options.log, f"{task_id}-{os.getpid()}-{os.urandom(4).hex()}"), "w"):
            pass
        for i in range(3000):
            x = f"{i}" if options.text else i / 2
            yield {"id": task_id * 3000 + i, "x": x, "ok": i % 2 == 0}
"""


@pytest.mark.parametrize("text", [False, True])
def test_rows_of_numbers_are_made_once_their_row_group_size_told_by_the_schema(text, tmp_path):
    """The row group size needs a row's bytes: a schema of numbers and bools says them, where
    rows of strings must be made in the main process to be measured (and made again)."""
    plugin = make_plugin(tmp_path / "p", COUNTED)
    log = tmp_path / "log"
    log.mkdir()
    options = {"log": str(log), "text": text}
    summary = recordmill.write(plugin, tmp_path / "o", options=options, progress=False)
    assert summary.rows == 6000
    made = sorted(name.split("-")[0] for name in os.listdir(log))
    assert made == (["0", "0", "1"] if text else ["0", "1"])
    table = pq.read_table(tmp_path / "o" / "part-00000-of-00001.parquet")
    assert table.column("id").to_pylist() == list(range(6000))


def test_the_schema_s_row_width_is_what_a_batch_of_its_rows_measures():
    """The same row group size as measured from made rows: a batch without nulls of numbers
    and bools weighs the schema's width a row (a bool is a bit)."""
    import pyarrow as pa

    from recordmill.engine.direct import _fixed_width

    columns = {
        "i8": pa.array([i % 100 for i in range(800)], pa.int8()),
        "u64": pa.array(range(800), pa.uint64()),
        "f16": pa.array(np.arange(800, dtype=np.float16)),
        "f64": pa.array(np.arange(800, dtype=np.float64)),
        **{f"b{k}": pa.array([i % 3 == 0 for i in range(800)]) for k in range(3)},
    }
    batch = pa.RecordBatch.from_pydict(columns)
    assert _fixed_width(batch.schema) == batch.nbytes // batch.num_rows == 1 + 8 + 2 + 8  # + 3 bits
    assert _fixed_width(pa.schema([("s", pa.string()), ("x", pa.int64())])) is None
