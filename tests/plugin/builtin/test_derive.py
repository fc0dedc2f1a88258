"""The derive plugin: a dataset from a dataset (recordmill's, or Parquet files), each row through
a user's function, as a new dataset or the source's next version."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq

import recordmill
from tests.conftest import (
    ENDS_WITHIN,
    REPO,
    each_refused,
    make_plugin,
    wait_for_staged_tasks,
    write_here,
)

SOURCE = """
    import numpy as np

    def task_number():
        return 3

    def schema():
        return {"id": {"type": "int64"}, "caption": {"type": "string"},
                "x": {"type": "float32", "shape": [2]}}

    def dict_data(task_id):
        for i in range(task_id * 700, (task_id + 1) * 700):
            yield {"id": i, "caption": f"  photo {i} ", "x": np.array([i, -i], np.float32)}
"""

FUNCTION = """
def map(row):
    if row["id"] % 3 == 0:
        return None  # a filter
    x = row["x"]
    return {"id": row["id"], "caption": row["caption"].strip().upper(), "norm": float(abs(x).sum())}
"""


def expected(ids):
    return [{"id": i, "caption": f"PHOTO {i}", "norm": float(2 * i)} for i in ids if i % 3 != 0]


def test_a_map_and_a_filter_over_a_dataset_in_many_tasks(tmp_path):
    source = tmp_path / "source"
    recordmill.write(make_plugin(tmp_path / "p", SOURCE), source, progress=False)
    (tmp_path / "clean.py").write_text(FUNCTION)
    out = tmp_path / "out"
    result = write_here(
        "--script", "derive", "--input", source, "--function", tmp_path / "clean.py",
        "--rows-per-task", "300", "--workers", "2", "--output", out, "--quiet",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(recordmill.read_manifest(out)["tasks"]) == 7  # 2,100 rows by 300
    assert recordmill.open(str(out)).to_arrow().to_pylist() == expected(range(2100))


def test_parquet_files_as_input_and_the_source_s_next_version(tmp_path):
    folder = tmp_path / "pq"
    folder.mkdir()
    for k in range(2):
        ids = list(range(k * 50, (k + 1) * 50))
        table = pa.table({"id": ids, "caption": [f"  photo {i} " for i in ids],
                          "x": [[float(i), float(-i)] for i in ids]})  # fmt: skip
        pq.write_table(table, folder / f"part-{k}.parquet", row_group_size=16)
    (tmp_path / "clean.py").write_text(FUNCTION)
    out = tmp_path / "out"
    result = write_here(
        "--script", "derive", "--input", folder, "--function", f"{tmp_path / 'clean.py'}:map",
        "--rows-per-task", "20", "--output", out, "--quiet",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert recordmill.open(str(out)).to_arrow().to_pylist() == expected(range(100))
    # Derived rows as the next version of the dataset they came from (the same columns).
    (tmp_path / "firsts.py").write_text(
        "def map(row):\n    return row if row['id'] < 10 else None\n"
    )
    again = write_here(
        "--script", "derive", "--input", out, "--function", tmp_path / "firsts.py",
        "--output", out, "--append", "--quiet",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    ds = recordmill.open(str(out))
    firsts = [r for r in expected(range(100)) if r["id"] < 10]
    assert ds.version == 2 and ds.to_arrow().to_pylist() == expected(range(100)) + firsts
    run = recordmill.read_manifest(out)["run"]
    assert run["plugin"] == "derive" and run["options"]["input"] == str(out)


def test_a_function_that_raises_names_the_row(tmp_path):
    source = tmp_path / "source"
    recordmill.write(make_plugin(tmp_path / "p", SOURCE), source, progress=False)
    (tmp_path / "bad.py").write_text(textwrap.dedent("""
        def map(row):
            if row["id"] == 1234:
                raise ValueError("no caption")
            return {"id": row["id"]}
    """))  # fmt: skip
    common = ["--script", "derive", "--input", source, "--function", tmp_path / "bad.py", "--quiet"]
    failed = write_here(*common, "--output", tmp_path / "f")
    assert failed.returncode == 1 and "row 1234: ValueError: no caption" in failed.stderr
    skipped = write_here(*common, "--output", tmp_path / "s", "--on-bad-input", "skip")
    assert skipped.returncode == 0, skipped.stderr
    assert len(recordmill.open(str(tmp_path / "s"))) == 2099
    (reject,) = recordmill.read_rejects(tmp_path / "s")
    assert reject["source"].endswith("row 1234")
    missing = write_here("--script", "derive", "--input", source, "--function",
                         f"{tmp_path / 'bad.py'}:clean", "--output", tmp_path / "m", "--quiet")  # fmt: skip
    assert missing.returncode != 0 and ": defines no function 'clean'" in missing.stderr


def test_what_derive_cannot_read_is_one_line_each(tmp_path):
    source = tmp_path / "source"
    recordmill.write(make_plugin(tmp_path / "p", SOURCE), source, progress=False)
    (tmp_path / "clean.py").write_text(FUNCTION)
    (tmp_path / "lists.py").write_text("def map(row):\n    return [row]\n")
    (tmp_path / "empty").mkdir()
    pq.write_table(pa.table({"id": [1]}), tmp_path / "one.parquet")
    (tmp_path / "no_rows").mkdir()  # once taken for a recordmill dataset, and refused as none
    pq.write_table(pa.table({"id": pa.array([], pa.int64())}), tmp_path / "no_rows" / "a.parquet")
    clean = tmp_path / "clean.py"
    cases = [
        (["--input", source, "--function", tmp_path / "none.py"], "none.py: no such file"),
        (["--input", tmp_path / "one.parquet", "--function", clean, "--version", "1"],
         "is not a recordmill dataset (no manifest)"),
        (["--input", tmp_path / "empty", "--function", clean],
         ": no recordmill dataset and no .parquet file there"),
        (["--input", source, "--function", clean, "--rows-per-task", "-1"],
         "--rows-per-task must be 0 (about 64 tasks) or more, got -1"),
        (["--input", tmp_path / "no_rows", "--function", clean],
         "no_rows gave no row (and no bad input) in 1 task: nothing to write"),
        (["--input", source, "--function", tmp_path / "lists.py"],
         "; expected a dict (the new row) or None (to leave the row out)"),
    ]  # fmt: skip
    each_refused("derive", cases, tmp_path)


GATED = """
import os
import time

GATE = {gate!r}


def map(row):
    # Rows of the later tasks wait for the gate: the run is surely mid-way when it is killed.
    while row["id"] >= 900 and not os.path.exists(GATE):
        time.sleep(0.01)
    return {{"id": row["id"], "caption": row["caption"].strip()}}
"""


def test_a_derive_killed_mid_run_resumes_to_the_same_checksums(tmp_path):
    source = tmp_path / "source"
    recordmill.write(make_plugin(tmp_path / "p", SOURCE), source, progress=False)
    gate = tmp_path / "go"
    (tmp_path / "gated.py").write_text(GATED.format(gate=str(gate)))
    args = ["--script", "derive", "--input", str(source), "--function", str(tmp_path / "gated.py"),
            "--rows-per-task", "300", "--partitions", "3", "--quiet"]  # fmt: skip
    out = tmp_path / "out"
    writer = [sys.executable, str(REPO / "writer.py"), *args, "--workers", "2"]
    process = subprocess.Popen([*writer, "--output", str(out)], start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    wait_for_staged_tasks(out, 3, process)  # tasks 0-2 (rows 0-899) done; 3 on wait
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=ENDS_WITHIN)
    assert not out.exists()
    gate.touch()
    resumed = write_here(*args, "--output", out, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    whole = write_here(*args, "--output", tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr
    sums = [recordmill.read_manifest(p)["partitions"] for p in (out, tmp_path / "whole")]
    assert [p["checksum"] for p in sums[0]] == [p["checksum"] for p in sums[1]]
    assert len(recordmill.open(str(out))) == 2100
