"""The write pipeline end to end, through the Python API, checked with pyarrow."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import recordmill
from recordmill.errors import OutputError, PluginError, RowError, SchemaError, TaskError
from recordmill.read.dataset import to_numpy
from recordmill.read.verify import verify
from tests.conftest import make_plugin, read_dataset, run_writer


def expected_rows(sizes: list[int]) -> list[tuple[int, int]]:
    return [(t, i) for t, n in enumerate(sizes) for i in range(n)]


def rows_of(table) -> list[tuple[int, int]]:
    return list(zip(table["task"].to_pylist(), table["i"].to_pylist(), strict=True))


@pytest.mark.parametrize("workers", [1, 2])
def test_rows_keep_the_global_order_across_partitions(counting_plugin, tmp_path, workers):
    out = tmp_path / "out"
    summary = recordmill.write(
        counting_plugin,
        out,
        options={"sizes": "5,0,17,3"},
        partitions=4,
        workers=workers,
        progress=False,
    )
    assert summary.rows == 25
    assert rows_of(read_dataset(out)) == expected_rows([5, 0, 17, 3])
    files = sorted(p.name for p in out.iterdir())
    assert files == ["_manifest.parquet"] + [f"part-0000{p}-of-00004.parquet" for p in range(4)]


def test_partitions_are_balanced_with_skewed_tasks(counting_plugin, tmp_path):
    sizes = [0, 1000, 1, 0, 2]  # one task holds nearly every row, two are empty
    out = tmp_path / "out"
    recordmill.write(
        counting_plugin,
        out,
        options={"sizes": ",".join(map(str, sizes))},
        partitions=7,
        workers=2,
        progress=False,
    )
    counts = [pq.ParquetFile(f).metadata.num_rows for f in sorted(out.glob("part-*"))]
    assert len(counts) == 7
    assert sum(counts) == 1003
    assert max(counts) - min(counts) <= 1
    manifest = recordmill.read_manifest(out)
    assert [p["rows"] for p in manifest["partitions"]] == counts
    assert [t["rows"] for t in manifest["tasks"]] == sizes


def test_more_partitions_than_rows_still_gives_every_file(counting_plugin, tmp_path):
    out = tmp_path / "out"
    recordmill.write(counting_plugin, out, options={"sizes": "2,1"}, partitions=5, progress=False)
    counts = [pq.ParquetFile(f).metadata.num_rows for f in sorted(out.glob("part-*"))]
    assert counts == [1, 1, 1, 0, 0]
    assert read_dataset(out).schema.names == ["task", "i", "name"]


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_checksums_do_not_depend_on_workers(counting_plugin, tmp_path, fmt):
    checksums = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        recordmill.write(
            counting_plugin,
            out,
            options={"sizes": "300,0,1200,7,450"},
            partitions=3,
            workers=workers,
            format=fmt,
            progress=False,
        )
        manifest = recordmill.read_manifest(out)
        checksums.append([p["checksum"] for p in manifest["partitions"]])
    assert checksums[0] == checksums[1]
    assert len(set(checksums[0])) == 3


def test_shuffle_is_a_seeded_permutation(counting_plugin, tmp_path):
    sizes = [40, 0, 130, 9]
    runs = {}
    for name, workers, seed in [("a", 1, 7), ("b", 2, 7), ("c", 2, 8)]:
        out = tmp_path / name
        recordmill.write(
            counting_plugin,
            out,
            options={"sizes": ",".join(map(str, sizes))},
            partitions=3,
            workers=workers,
            shuffle=True,
            seed=seed,
            row_group_size=16,
            progress=False,
        )
        runs[name] = (rows_of(read_dataset(out)), recordmill.read_manifest(out))
    rows_a = runs["a"][0]
    assert sorted(rows_a) == expected_rows(sizes)
    assert rows_a != expected_rows(sizes)
    assert runs["b"][0] == rows_a  # same seed, other worker count: same order, same bytes
    assert [p["checksum"] for p in runs["b"][1]["partitions"]] == [
        p["checksum"] for p in runs["a"][1]["partitions"]
    ]
    assert runs["c"][0] != rows_a
    assert runs["a"][1]["settings"]["seed"] == 7


def test_row_group_size_is_honoured(counting_plugin, tmp_path):
    out = tmp_path / "out"
    recordmill.write(
        counting_plugin,
        out,
        options={"sizes": "10,25,0,6"},
        partitions=2,
        row_group_size=4,
        progress=False,
    )
    for f in sorted(out.glob("part-*")):
        meta = pq.ParquetFile(f).metadata
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        assert all(s == 4 for s in sizes[:-1]) and 0 < sizes[-1] <= 4


def test_manifest_records_what_was_written(counting_plugin, tmp_path):
    out = tmp_path / "out"
    recordmill.write(counting_plugin, out, options={"sizes": "3,4"}, partitions=2, progress=False)
    manifest = recordmill.read_manifest(out)
    for key in (
        "format_version",
        "format",
        "schema",
        "partitions",
        "tasks",
        "total_rows",
        "plugin",
        "versions",
    ):
        assert key in manifest
    assert manifest["format"] == "parquet"
    assert manifest["total_rows"] == 7
    assert manifest["plugin"] == {
        "name": "counting",
        "source": "path",
        "target": str(counting_plugin / "plugin.py"),
        "options": {"sizes": "3,4"},
    }
    assert manifest["tasks"] == [{"task_id": 0, "rows": 3}, {"task_id": 1, "rows": 4}]
    assert [f["name"] for f in manifest["schema"]["fields"]] == ["task", "i", "name"]
    assert recordmill.dataset.manifest.arrow_schema(manifest) == pq.read_schema(
        out / manifest["partitions"][0]["file"]
    )
    for part in manifest["partitions"]:
        path = out / part["file"]
        assert part["bytes"] == path.stat().st_size
        assert part["checksum"] == recordmill.dataset.storage.Store.at(path.parent).sha256(
            path.name
        )


def test_arrow_format_is_memory_mappable(counting_plugin, tmp_path):
    out = tmp_path / "out"
    recordmill.write(
        counting_plugin, out, options={"sizes": "3,4"}, partitions=2, format="arrow", progress=False
    )
    assert recordmill.read_manifest(out)["format"] == "arrow"
    assert rows_of(read_dataset(out)) == expected_rows([3, 4])


TENSOR_PLUGIN = """
    import numpy as np

    def task_number():
        return 3

    def schema():
        return {
            "feat": {"type": "float32", "shape": [2, 3]},
            "mask": {"type": "uint8", "shape": [-1]},
            "grid": {"type": "int16", "shape": [-1, 2]},
        }

    def dict_data(task_id):
        for i in range(4):
            yield {
                "feat": np.full((2, 3), task_id * 10 + i, dtype=np.float64),
                "mask": np.arange(i, dtype=np.int64),
                "grid": [[task_id, i]] * i,
            }
"""


def test_tensor_and_list_columns_round_trip(tmp_path):
    plugin = make_plugin(tmp_path / "tensors", TENSOR_PLUGIN)
    out = tmp_path / "out"
    recordmill.write(plugin, out, partitions=2, workers=2, progress=False)
    table = read_dataset(out)
    assert table["feat"].type == pa.list_(pa.list_(pa.float32(), 3), 2)  # readable by any tool
    tensors = to_numpy(table["feat"], table.schema.field("feat"))
    assert tensors.shape == (12, 2, 3) and tensors.dtype == np.float32
    assert tensors[5, 1, 2] == 11.0  # task 1, row 1
    assert table["mask"].to_pylist()[3] == [0, 1, 2]
    assert table["grid"].to_pylist()[7] == [[1, 3]] * 3


def test_inferred_schema_types(tmp_path):
    plugin = make_plugin(
        tmp_path / "inferred",
        """
        import numpy as np

        def task_number():
            return 2

        def dict_data(task_id):
            yield {
                "i": 1, "f": 0.5, "s": "x", "b": b"y", "flag": True,
                "small": np.int16(3), "vec": np.zeros(4, dtype=np.float32), "ids": [1, 2, 3],
            }
        """,
    )
    out = tmp_path / "out"
    recordmill.write(plugin, out, progress=False)
    fields = {f["name"]: f for f in recordmill.read_manifest(out)["schema"]["fields"]}
    assert {k: v["type"] for k, v in fields.items()} == {
        "i": "int64",
        "f": "float64",
        "s": "string",
        "b": "bytes",
        "flag": "bool",
        "small": "int16",
        "vec": "float32",
        "ids": "int64",
    }
    assert fields["vec"]["shape"] == [4]
    assert fields["ids"]["shape"] == [-1]


def test_inferred_types_that_change_between_tasks_are_an_error(tmp_path):
    plugin = make_plugin(
        tmp_path / "changing",
        """
        def task_number():
            return 3

        def dict_data(task_id):
            yield {"x": "text" if task_id == 2 else 1}
        """,
    )
    with pytest.raises(SchemaError, match=r"field 'x' is int64 in task 0 but string in task 2"):
        recordmill.write(plugin, tmp_path / "out", workers=2, progress=False)
    assert not (tmp_path / "out").exists()


def test_declared_schema_is_enforced_with_task_row_and_field(tmp_path):
    plugin = make_plugin(
        tmp_path / "bad",
        """
        def task_number():
            return 3

        def schema():
            return {"label": {"type": "int32"}, "name": {"type": "string"}}

        def dict_data(task_id):
            for i in range(100):
                label = "seven" if (task_id, i) == (2, 71) else i
                yield {"label": label, "name": f"n{i}"}
        """,
    )
    with pytest.raises(RowError) as info:
        recordmill.write(plugin, tmp_path / "out", workers=2, progress=False)
    error = info.value
    assert (error.task_id, error.row, error.field) == (2, 71, "label")
    assert "expected int32" in str(error) and "str 'seven'" in str(error)
    assert not (tmp_path / "out").exists()


def test_plugin_exception_names_the_task_and_keeps_the_traceback(tmp_path):
    plugin = make_plugin(
        tmp_path / "raising",
        """
        def task_number():
            return 4

        def dict_data(task_id):
            yield {"x": 1}
            if task_id == 3:
                raise ValueError("disk on fire")
        """,
    )
    with pytest.raises(TaskError) as info:
        recordmill.write(plugin, tmp_path / "out", workers=2, progress=False)
    assert info.value.task_id == 3
    assert "disk on fire" in str(info.value)
    assert "raise ValueError" in info.value.traceback_text
    assert not (tmp_path / "out").exists()


FAILING_ONE_TASK = """
    import os
    from pathlib import Path

    def task_number():
        return 6

    def dict_data(task_id):
        Path(os.environ["RAN"], str(task_id)).touch()  # which tasks ran, in which run
        if task_id == 4 and os.environ.get("BROKEN"):
            raise UnicodeDecodeError("utf-8", b"\\xe9", 0, 1, "invalid continuation byte")
        for i in range(3):
            yield {"task": task_id, "i": i}
"""


def test_a_failed_run_keeps_its_finished_tasks_for_resume(tmp_path, monkeypatch):
    """A plugin that raises in one task: the tasks finished are kept, the error says so, and
    --resume after the fix runs only the others; --resume with nothing to resume says so."""
    plugin = make_plugin(tmp_path / "p", FAILING_ONE_TASK)
    out = tmp_path / "out"
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    monkeypatch.setenv("RAN", str(first))
    monkeypatch.setenv("BROKEN", "1")
    with pytest.raises(TaskError, match="task 4 failed") as info:
        recordmill.write(plugin, out, workers=0, progress=False)  # in order: 0-3 finish first
    assert str(info.value).endswith(
        "fix it, then run the same command with --resume: the 4 finished tasks are kept"
    )
    assert not out.exists() and (tmp_path / ".out.recordmill-partial").is_dir()
    monkeypatch.delenv("BROKEN")
    monkeypatch.setenv("RAN", str(second))
    summary = recordmill.write(plugin, out, workers=0, progress=False, resume=True)
    assert summary.rows == 18 and sorted(int(p.name) for p in second.iterdir()) == [4, 5]
    assert sorted(read_dataset(out)["task"].to_pylist()) == sorted(
        t for t in range(6) for _ in range(3)
    )
    with pytest.warns(recordmill.RecordmillWarning, match="nothing to resume at .*other"):
        recordmill.write(plugin, tmp_path / "other", workers=0, progress=False, resume=True)


REJECTING_TASK_4 = """
    import os
    from pathlib import Path
    import recordmill

    def task_number():
        return 6

    def dict_data(task_id):
        Path(os.environ["RAN"], str(task_id)).touch()
        yield {"task": task_id}
        if task_id == 4:
            yield recordmill.Reject("input 4", "unreadable")
"""


def test_a_run_stopped_by_bad_input_resumes_skipping_it_as_its_error_offers(tmp_path, monkeypatch):
    """The two remedies the error names combine: --on-bad-input skip with --resume runs only
    the tasks not finished; a later resume must then skip too."""
    plugin = make_plugin(tmp_path / "p", REJECTING_TASK_4)
    out, first, second = tmp_path / "out", tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    monkeypatch.setenv("RAN", str(first))
    with pytest.raises(TaskError, match=r"goes on\); fix it or skip it, then run"):
        recordmill.write(plugin, out, workers=0, progress=False)
    monkeypatch.setenv("RAN", str(second))
    summary = recordmill.write(
        plugin, out, workers=0, progress=False, resume=True, on_bad_input="skip"
    )
    assert sorted(int(p.name) for p in second.iterdir()) == [4, 5]
    assert summary.rows == 6 and sorted(read_dataset(out)["task"].to_pylist()) == list(range(6))
    assert recordmill.read_rejects(out) == [
        {"task_id": 4, "source": "input 4", "reason": "unreadable"}
    ]
    assert recordmill.read_manifest(out)["run"]["settings"]["on_bad_input"] == "skip"


def test_no_rows_at_all_is_an_error(counting_plugin, tmp_path):
    with pytest.raises(PluginError, match="no rows in any of its 2 tasks"):
        recordmill.write(
            counting_plugin, tmp_path / "out", options={"sizes": "0,0"}, progress=False
        )


def test_existing_output_is_refused_unless_overwrite(counting_plugin, tmp_path):
    out = tmp_path / "out"
    recordmill.write(counting_plugin, out, options={"sizes": "1,1"}, progress=False)
    with pytest.raises(OutputError, match="overwrite=True"):
        recordmill.write(counting_plugin, out, options={"sizes": "2,2"}, progress=False)
    assert recordmill.read_manifest(out)["total_rows"] == 2
    recordmill.write(counting_plugin, out, options={"sizes": "2,2"}, overwrite=True, progress=False)
    assert recordmill.read_manifest(out)["total_rows"] == 4
    assert len(list(out.glob("part-*"))) == 1


def test_overwrite_never_deletes_a_folder_that_is_not_a_dataset(counting_plugin, tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    with pytest.raises(
        OutputError, match=r"is a folder that holds other files \(it is not a recordmill "
    ):
        recordmill.write(counting_plugin, precious, overwrite=True, progress=False)
    assert (precious / "thesis.tex").read_text() == "years of work"


def test_an_empty_folder_made_ahead_is_used(counting_plugin, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    recordmill.write(counting_plugin, out, options={"sizes": "1,1"}, progress=False)
    assert recordmill.read_manifest(out)["total_rows"] == 2


def test_an_inferred_schema_is_enforced_with_a_hint(tmp_path):
    plugin = make_plugin(
        tmp_path / "drifting",
        """
        def task_number():
            return 1

        def dict_data(task_id):
            yield {"x": 1}
            yield {"x": 2.5}
        """,
    )
    with pytest.raises(
        RowError,
        match=r"task 0, row 1, field 'x'.*inferred from the task's first row.*expected int64, got float 2.5",
    ):
        recordmill.write(plugin, tmp_path / "out", progress=False)


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_shuffle_moves_tensor_and_list_values_with_their_rows(tmp_path, fmt):
    plugin = make_plugin(tmp_path / "tensors", TENSOR_PLUGIN)
    out = tmp_path / "out"
    recordmill.write(
        plugin, out, partitions=3, workers=2, shuffle=True, seed=1, format=fmt, progress=False
    )
    table = read_dataset(out)
    feat = to_numpy(table["feat"], table.schema.field("feat"))
    keys = [int(f[0, 0]) for f in feat]  # task * 10 + i
    assert sorted(keys) == sorted(t * 10 + i for t in range(3) for i in range(4))
    assert keys != sorted(keys)
    for key, mask, grid in zip(
        keys, table["mask"].to_pylist(), table["grid"].to_pylist(), strict=True
    ):
        task, i = divmod(key, 10)
        assert mask == list(range(i)) and grid == [[task, i]] * i


def test_default_compression_is_zstd_except_for_bytes(tmp_path):
    template = recordmill.plugin.manager.TEMPLATE_DIR
    out = tmp_path / "out"
    recordmill.write(template, out, progress=False)
    meta = pq.ParquetFile(next(out.glob("part-*"))).metadata.row_group(0)
    codecs = {
        meta.column(i).path_in_schema: meta.column(i).compression for i in range(meta.num_columns)
    }
    assert codecs == {
        "id": "ZSTD",
        "label": "ZSTD",
        "file_name": "ZSTD",
        "data": "UNCOMPRESSED",
        "feature.list.element": "ZSTD",
        "tokens.list.element": "ZSTD",
    }


EMPTY = """
    def task_number():
        return 0

    def schema():
        return {"a": {"type": "int32"}, "b": {"type": "bytes"}}

    def dict_data(task_id):
        yield from ()
"""


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_no_tasks_and_a_schema_is_an_empty_dataset(tmp_path, fmt):
    import duckdb

    plugin = make_plugin(tmp_path / "empty", EMPTY)
    summary = recordmill.write(plugin, tmp_path / "out", partitions=2, format=fmt, progress=False)
    assert summary.rows == 0
    ds = recordmill.open(str(tmp_path / "out"))
    assert len(ds) == 0 and ds.schema.names == ["a", "b"] and list(ds.iter_batches()) == []
    assert verify(tmp_path / "out") == []
    if fmt == "parquet":
        found = duckdb.sql(f"select count(*) from '{tmp_path / 'out'}/part-*.parquet'").fetchall()
        assert found == [(0,)]


def test_no_rows_without_a_schema_says_how_to_declare_one(tmp_path):
    plugin = make_plugin(tmp_path / "empty", EMPTY.replace("def schema():", "def _unused():"))
    with pytest.raises(recordmill.RecordmillError, match="needs its schema declared"):
        recordmill.write(plugin, tmp_path / "out", progress=False)


def test_python_callers_are_told_the_keyword_not_the_flag(counting_plugin, tmp_path):
    recordmill.write(counting_plugin, tmp_path / "out", progress=False)
    with pytest.raises(recordmill.RecordmillError) as caught:
        recordmill.write(counting_plugin, tmp_path / "out", progress=False)
    assert "overwrite=True" in str(caught.value) and "--overwrite" not in str(caught.value)


def test_the_summary_line_counts_in_words_and_says_empty_partitions(counting_plugin, tmp_path):
    one = run_writer(
        *("--script", counting_plugin, "--output", tmp_path / "one", "--sizes", "1", "--quiet")
    )
    assert one.returncode == 0, one.stderr
    assert "recordmill: wrote 1 row in 1 partition (" in one.stdout
    few = run_writer(
        *("--script", counting_plugin, "--output", tmp_path / "few", "--sizes", "2,1"),
        *("--partitions", "10", "--quiet"),
    )
    assert few.returncode == 0, few.stderr
    assert (
        "wrote 3 rows in 10 partitions, 7 of them empty (--partitions 10 is more than the 3 rows)"
        in few.stdout
    )
    rejected = make_plugin(
        tmp_path / "rejecting",
        """
        import recordmill

        def task_number():
            return 1

        def dict_data(task_id):
            yield recordmill.Reject("input 0", "unreadable")
            yield {"x": 1}
        """,
    )
    flags = ("--script", rejected, "--output", tmp_path / "r", "--quiet")
    result = run_writer(*flags, "--on-bad-input", "skip")
    assert result.returncode == 0, result.stderr
    assert "; 1 input rejected, listed by: recordmill rejects" in result.stdout


def test_a_reject_the_plugin_yields_fails_the_run_unless_skip(tmp_path):
    """--on-bad-input fail (the default) is about every bad input, a plugin's Reject too."""
    rejected = make_plugin(
        tmp_path / "rejecting",
        """
        import recordmill

        def task_number():
            return 2

        def dict_data(task_id):
            yield {"x": 1}
            if task_id == 1:
                yield recordmill.Reject("input 7", "unreadable")
        """,
    )
    result = run_writer("--script", rejected, "--output", tmp_path / "r", "--quiet")
    assert result.returncode == 1
    said = (
        "recordmill: error: task 1 failed: the plugin rejected input 7: unreadable "
        "(--on-bad-input skip records it and goes on)"
    )
    # Where task 0 finished first (the workers race), the line says how to keep it.
    kept = "; fix it or skip it, then run the same command with --resume: the finished task is kept"
    assert result.stderr in (said + "\n", said + kept + "\n")
    assert not (tmp_path / "r").exists()
    with pytest.raises(TaskError, match="the plugin rejected input 7"):
        recordmill.write(rejected, tmp_path / "inline", workers=0, progress=False)
    summary = recordmill.write(rejected, tmp_path / "s", on_bad_input="skip", progress=False)
    assert summary.rows == 2 and recordmill.read_rejects(tmp_path / "s") == [
        {"task_id": 1, "source": "input 7", "reason": "unreadable"}
    ]


def test_the_repr_of_a_summary_is_short(counting_plugin, tmp_path):
    summary = recordmill.write(counting_plugin, tmp_path / "out", progress=False)
    text = repr(summary)
    assert text.startswith("Summary(output=") and "rows=25" in text
    # short apart from the output's path (pytest's own folders make it 100 characters and more)
    assert len(text) - len(str(summary.output)) < 150 and "manifest" not in text, text


@pytest.mark.parametrize(
    ("keywords", "said"),
    [
        ({"quiet": True}, "unknown setting 'quiet' (did you mean progress=False?)"),
        ({"partitons": 2}, "unknown setting 'partitons' (did you mean partitions?)"),
        ({"sizes": "1,2"}, "unknown setting 'sizes': it is an option of the plugin"),
    ],
)
def test_an_unknown_setting_keyword_is_named_with_the_settings(
    counting_plugin, tmp_path, keywords, said
):
    with pytest.raises(recordmill.ConfigError) as raised:
        recordmill.write(counting_plugin, tmp_path / "out", **keywords)
    assert str(raised.value).startswith(said)
    assert "the settings: " in str(raised.value) and "workers" in str(raised.value)
    assert isinstance(raised.value, TypeError)  # what Python says of an unexpected keyword
    assert not (tmp_path / "out").exists()


def test_a_run_after_a_failed_one_without_resume_starts_over_and_says_so(tmp_path, monkeypatch):
    plugin = make_plugin(tmp_path / "p", FAILING_ONE_TASK)
    ran = tmp_path / "ran"
    ran.mkdir()
    monkeypatch.setenv("RAN", str(ran))
    monkeypatch.setenv("BROKEN", "1")
    with pytest.raises(TaskError, match="the 4 finished tasks are kept"):
        recordmill.write(plugin, tmp_path / "out", workers=0, progress=False)
    monkeypatch.delenv("BROKEN")
    for mark in ran.iterdir():
        mark.unlink()
    with pytest.warns(recordmill.RecordmillWarning, match="starts over without them"):
        recordmill.write(plugin, tmp_path / "out", workers=0, progress=False)
    assert sorted(int(p.name) for p in ran.iterdir()) == list(range(6))


ARROW_PLUGIN = """
    import pyarrow as pa

    def add_options(parser):
        parser.add_argument("--bad", default="")

    def task_number():
        return 2

    def schema():
        return {"id": {"type": "int32"}, "name": {"type": "string"}}

    def dict_data(task_id, options):
        ids = [task_id * 10 + i for i in range(3)]
        if options.bad == "missing":
            yield pa.table({"id": ids})
        elif options.bad == "cast":
            yield pa.table({"id": [2**40] * 3, "name": ["a", "b", "c"]})
        elif options.bad == "null":
            yield pa.table({"id": [1, None, 3], "name": ["a", "b", "c"]})
        else:
            yield {"id": -1 - task_id, "name": "a dict first"}
            yield pa.table({"name": [f"n{i}" for i in ids], "id": ids})  # columns by name
            yield pa.record_batch({"id": pa.array([99], pa.int64()), "name": ["last"]})
"""


def test_a_plugin_may_yield_arrow_tables_and_batches_beside_dicts(tmp_path):
    plugin = make_plugin(tmp_path / "p", ARROW_PLUGIN)
    recordmill.write(plugin, tmp_path / "ds", progress=False, workers=0)
    table = read_dataset(tmp_path / "ds")
    assert table["id"].to_pylist() == [-1, 0, 1, 2, 99, -2, 10, 11, 12, 99]
    assert table.schema.field("id").type == pa.int32()
    for bad, said in [
        ("missing", "task 0: rows 0 to 2 (a pyarrow Table): has no column 'name' of the schema"),
        ("cast", "column 'id' is int64, cannot be int32"),
        ("null", "column 'id' holds nulls"),
    ]:
        with pytest.raises(RowError) as info:
            recordmill.write(
                plugin, tmp_path / bad, options={"bad": bad}, progress=False, workers=0
            )
        assert said in str(info.value), str(info.value)


SOURCED = """
    from recordmill.kit import Source

    def task_number():
        return 2

    def schema():
        return {"samples": {"type": "float64"}}

    def dict_data(task_id):
        for name in ("a.wav", "b.wav"):
            yield Source(f"wav/{task_id}/{name}")
            for i in range(3):
                bad = task_id == 1 and name == "b.wav" and i == 1
                yield {"samples": 2**60 + 1 if bad else float(i)}
"""


def test_a_bad_row_names_the_input_the_plugin_said_it_comes_from(tmp_path):
    plugin = make_plugin(tmp_path / "p", SOURCED)
    with pytest.raises(RowError) as info:
        recordmill.write(plugin, tmp_path / "o", progress=False, workers=0)
    assert str(info.value).startswith(
        "wav/1/b.wav, row 1 (task 1, row 4), field 'samples': an integer that float64 cannot"
    ), str(info.value)
    recordmill.write(plugin, tmp_path / "s", progress=False, workers=0, on_bad_input="skip")
    (reject,) = recordmill.read_rejects(tmp_path / "s")
    assert reject["source"] == "wav/1/b.wav row 1 (task 1 row 4)"


def test_a_source_that_starts_inside_its_input_numbers_rows_as_the_input_does(tmp_path):
    """A task that reads records 1,000 to 1,002 of a file says so: its rows are named by their
    numbers in the file."""
    plugin = make_plugin(
        tmp_path / "p",
        SOURCED.replace('Source(f"wav/{task_id}/{name}")', "Source(name, first=1000)"),
    )
    with pytest.raises(RowError, match=r"^b.wav, row 1001 \(task 1, row 4\), field 'samples'"):
        recordmill.write(plugin, tmp_path / "o", progress=False, workers=0)


def test_rows_after_a_skipped_one_keep_their_numbers(tmp_path):
    plugin = make_plugin(
        tmp_path / "p",
        """
        def task_number():
            return 1

        def schema():
            return {"n": {"type": "int8"}}

        def dict_data(task_id):
            for i in range(300):  # past the first batch of rows (64): numbered on from it
                yield {"n": 1000 if i in (3, 150) else i % 100}
        """,
    )
    recordmill.write(plugin, tmp_path / "o", progress=False, workers=0, on_bad_input="skip")
    assert [r["row"] for r in recordmill.read_rejects(tmp_path / "o")] == [3, 150]
