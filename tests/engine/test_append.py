"""Datasets that grow: ``--append`` adds a version after the dataset's rows; readers keep theirs;
``version=K`` reads exactly the first K writes; bad appends are one line and change nothing."""

from __future__ import annotations

import os
import shutil

import pytest

import recordmill
from recordmill.dataset import layout, versions
from recordmill.dataset.storage import Store
from recordmill.engine.lock import OutputLock
from recordmill.errors import ConfigError, OutputError, SchemaError
from recordmill.read.verify import verify
from tests.conftest import make_plugin, run_writer, write_here

PLUGIN = """
    import recordmill

    def add_options(parser):
        parser.add_argument("--start", type=int, default=0)
        parser.add_argument("--rows", type=int, default=20)
        parser.add_argument("--tasks", type=int, default=3)
        parser.add_argument("--keys", type=int, default=0, help="keys repeat modulo this")
        parser.add_argument("--wide", action="store_true", help="label as int64, not int32")
        parser.add_argument("--announce", action="store_true", help="task_rows() says the rows")
        parser.add_argument("--reject", action="store_true", help="each task rejects an input")

    def task_number(options):
        return options.tasks

    def task_rows(task_id, options):
        return options.rows if options.announce else None

    def schema(options):
        label = "int64" if options.wide else "int32"
        return {"id": {"type": "int64"}, "label": {"type": label}, "key": {"type": "string"},
                "blob": {"type": "bytes"}}

    def dict_data(task_id, options):
        if options.reject:
            yield recordmill.Reject(f"input {options.start + task_id}", "unreadable")
        for i in range(options.rows):
            n = options.start + task_id * options.rows + i
            k = n % options.keys if options.keys else n
            yield {"id": n, "label": n % 7, "key": f"k{k}", "blob": bytes([n % 256]) * 50}
"""

INFERRED = """
    def add_options(parser):
        parser.add_argument("--start", type=int, default=0)
        parser.add_argument("--floats", action="store_true")

    def task_number(options):
        return 2

    def dict_data(task_id, options):
        for i in range(10):
            n = options.start + task_id * 10 + i
            yield {"id": n, "score": float(n) if options.floats else n}
"""


@pytest.fixture
def plugin(tmp_path):
    return make_plugin(tmp_path / "grow", PLUGIN)


def write(plugin, out, **values):
    values.setdefault("workers", 1)
    options = {k: values.pop(k) for k in list(values) if k in OPTIONS}
    return recordmill.write(plugin, out, options=options, progress=False, **values)


OPTIONS = ("start", "rows", "tasks", "keys", "wide", "announce", "reject")


def ids(location, version=None) -> list[int]:
    return recordmill.open(str(location), version=version).to_arrow()["id"].to_pylist()


def run_ids(start, rows=20, tasks=3) -> list[int]:
    return list(range(start, start + rows * tasks))


def checksums(location) -> list[str]:
    return [p["checksum"] for p in recordmill.read_manifest(location)["partitions"]]


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
@pytest.mark.parametrize("announce", [False, True], ids=["staged", "direct"])
def test_an_append_adds_a_version_after_the_rows(plugin, tmp_path, fmt, announce):
    out = tmp_path / "out"
    write(plugin, out, partitions=2, format=fmt, announce=announce)
    before = {p.name: p.stat().st_ino for p in out.glob("part-*")}
    summary = write(plugin, out, append=True, partitions=3, start=1000, announce=announce)
    assert summary.line().startswith("recordmill: appended 60 rows in 3 partitions")
    assert "as version 2 (120 rows in all)" in summary.line()
    assert ("rows straight to partitions" in summary.phases) == announce
    assert ids(out) == run_ids(0) + run_ids(1000)
    assert ids(out, version=1) == run_ids(0)
    names = sorted(p.name for p in out.iterdir())
    assert names == [f"_manifest.{fmt}"] + sorted(before) + [
        f"part-v0002-0000{i}-of-00003.{fmt}" for i in range(3)
    ]
    # the dataset's own files are the same files (hard links), never rewritten
    assert {name: (out / name).stat().st_ino for name in before} == before
    manifest = recordmill.read_manifest(out)
    assert manifest["format"] == fmt and manifest["version"] == 2
    assert [p["version"] for p in manifest["partitions"]] == [1, 1, 2, 2, 2]
    assert [h["plugin"]["options"]["start"] for h in manifest["history"]] == [0, 1000]
    assert manifest["history"][1]["checksums"] == checksums(out)[2:]
    ds = recordmill.open(str(out))
    assert ds.version == 2 and recordmill.open(str(out), version=1).version == 1
    assert verify(out) == []
    assert not any(out.parent.glob(".out.recordmill-*"))


def test_every_version_of_a_five_append_history(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out, partitions=2)
    starts = [0, 100, 200, 300, 400, 500]
    for k, start in enumerate(starts[1:], start=2):
        summary = write(plugin, out, append=True, partitions=k % 3 + 1, start=start, rows=k)
        assert summary.version == k
    expected = run_ids(0)
    for k, start in enumerate(starts, start=1):
        if k > 1:
            expected = expected + run_ids(start, rows=k)
        ds = recordmill.open(str(out), version=k)
        assert ds.version == k and len(ds) == len(expected)
        assert ds.to_arrow()["id"].to_pylist() == expected
        assert [row["id"] for row in ds.iter_rows()] == expected
        assert ds.manifest["plugin"]["options"]["start"] == start
        assert ds.manifest["total_rows"] == len(expected)
    assert ids(out) == expected
    with pytest.raises(OutputError, match="has no version 7: its versions are 1 to 6"):
        recordmill.open(str(out), version=7)
    assert verify(out) == []
    history = run_writer_cli("history", out)
    assert len(history) == 6 and history[2].startswith("version 3  ")
    assert "+9 rows  1 partition  plugin grow: " in history[2] and "start=200" in history[2]


def run_writer_cli(*args) -> list[str]:
    import contextlib
    import io

    from recordmill.cli import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main([str(a) for a in args]) == 0
    return buffer.getvalue().splitlines()


def test_a_reader_keeps_its_version_during_an_append(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out, partitions=3, rows=200)
    reader = recordmill.open(str(out))
    batches = reader.iter_batches(batch_size=50, columns=["id"])
    seen = list(next(batches)["id"])
    write(plugin, out, append=True, partitions=2, start=10_000)
    seen += [i for batch in batches for i in batch["id"]]
    assert seen == run_ids(0, rows=200) and len(reader) == 600 and reader.version == 1
    assert reader[599]["id"] == 599 and reader.take([0, 599])["id"].to_pylist() == [0, 599]
    assert ids(out) == run_ids(0, rows=200) + run_ids(10_000)


def cli_write(plugin, out, *flags):
    """A write in a process of its own (in-process writes to the moto server are refused once
    this process wrote locally before the server's credentials were set)."""
    result = run_writer("--script", plugin, "--output", out, "--quiet", "--workers", "1", *flags)
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_appends_on_s3(s3, plugin, fmt):
    uri = s3(f"append/{fmt}")
    cli_write(plugin, uri, "--partitions", "2", "--format", fmt)
    reader = recordmill.open(uri)
    first = reader[0]["id"]
    cli_write(plugin, uri, "--append", "--partitions", "2", "--start", "1000", "--announce")
    assert first == 0 and reader.to_arrow()["id"].to_pylist() == run_ids(0)  # its version
    assert recordmill.open(uri).version == 2
    assert ids(uri) == run_ids(0) + run_ids(1000) and ids(uri, 1) == run_ids(0)
    flags = ["--start", "2000", "--reject", "--on-bad-input", "skip"]
    cli_write(plugin, uri, "--append", *flags)
    assert ids(uri) == run_ids(0) + run_ids(1000) + run_ids(2000)
    sources = [r["source"] for r in recordmill.read_rejects(uri)]
    assert sources == [f"input {2000 + t}" for t in range(3)]
    assert verify(uri) == []
    store = Store.at(uri)
    assert not store.sibling(layout.staging_folder(store.name)).exists()
    assert sorted(store.listdir()) == [
        f"_manifest.{fmt}",
        f"_rejects-v0003.{fmt}",
        f"part-00000-of-00002.{fmt}",
        f"part-00001-of-00002.{fmt}",
        f"part-v0002-00000-of-00002.{fmt}",
        f"part-v0002-00001-of-00002.{fmt}",
        f"part-v0003-00000-of-00001.{fmt}",
    ]


@pytest.mark.parametrize("settings", [{}, {"shuffle": True, "seed": 3}])
def test_workers_1_and_2_append_the_same_files(plugin, tmp_path, settings):
    sums = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        write(plugin, out, partitions=2, workers=workers)
        write(plugin, out, append=True, partitions=3, start=500, workers=workers, **settings)
        sums.append(checksums(out))
    assert sums[0] == sums[1]


def test_shuffle_shuffles_only_the_appended_rows(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out, partitions=2)
    write(plugin, out, append=True, partitions=2, start=500, shuffle=True, seed=1)
    found = ids(out)
    assert found[:60] == run_ids(0)
    assert sorted(found[60:]) == run_ids(500) and found[60:] != run_ids(500)


def test_an_arrow_dataset_is_appended_as_arrow_with_its_compression(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out, format="arrow", compression="zstd", row_group_size=7)
    summary = write(plugin, out, append=True, start=100)
    settings = recordmill.read_manifest(out)["settings"]
    assert summary.manifest["format"] == "arrow" and settings["compression"] == "zstd"
    assert settings["row_group_size"] == 7 and verify(out) == []
    assert ids(out) == run_ids(0) + run_ids(100)


def unchanged(out):
    """What a refused append must leave: the same files, no staging folder."""
    return sorted((p.name, p.stat().st_mtime_ns) for p in out.iterdir()), sorted(
        p.name for p in out.parent.iterdir()
    )


def test_a_declared_schema_that_differs_is_one_line_and_changes_nothing(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out)
    before = unchanged(out)
    with pytest.raises(SchemaError, match="field 'label' is int32 in the dataset, int64 in"):
        write(plugin, out, append=True, wide=True)
    assert unchanged(out) == before
    result = run_writer("--script", plugin, "--output", out, "--append", "--wide", "--quiet")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "recordmill: error: cannot --append: field 'label' is int32 in the dataset, int64 in "
        "this plugin's declared schema"
    ]
    assert unchanged(out) == before


def test_an_append_past_the_partitions_a_dataset_holds_is_refused(plugin, tmp_path, monkeypatch):
    """A reader refuses a manifest of more than MAX_PARTITIONS: no append makes one."""
    from recordmill.dataset import manifest

    out = tmp_path / "out"
    write(plugin, out)
    before = unchanged(out)
    count = len(recordmill.read_manifest(out)["partitions"])
    monkeypatch.setattr(manifest, "MAX_PARTITIONS", count + 1)
    with pytest.raises(OutputError) as caught:
        write(plugin, out, append=True, partitions=2)
    assert str(caught.value) == (
        f"cannot --append 2 partitions to {out}: it has {count}, and a dataset holds at most "
        f"{count + 1}; give fewer --partitions"
    )
    assert unchanged(out) == before


def test_an_inferred_schema_that_differs_is_refused_before_publishing(tmp_path):
    plugin = make_plugin(tmp_path / "inferred", INFERRED)
    out = tmp_path / "out"
    recordmill.write(plugin, out, workers=1, progress=False)
    before = unchanged(out)
    with pytest.raises(SchemaError, match="field 'score' is int64 in the dataset, float64 in"):
        recordmill.write(
            plugin, out, append=True, options={"floats": True}, workers=1, progress=False
        )
    assert unchanged(out) == before
    recordmill.write(plugin, out, append=True, options={"start": 50}, workers=1, progress=False)
    assert ids(out) == list(range(20)) + list(range(50, 70))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--format", "arrow"], "cannot --append --format arrow to "),
        (["--compression", "zstd"], "cannot --append --compression zstd to "),
        (["--row-group-size", "3"], "cannot --append --row-group-size 3 to "),
        (["--overwrite"], "--append adds a version to a dataset and --overwrite replaces it"),
    ],
)
def test_bad_appends_are_one_line(plugin, tmp_path, flags, message):
    out = tmp_path / "out"
    write(plugin, out)
    before = unchanged(out)
    result = write_here("--script", plugin, "--output", out, "--append", "--quiet", *flags)
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    assert message in result.stderr
    assert unchanged(out) == before


def test_an_append_to_a_format_1_dataset_is_refused(plugin, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / layout.OLD_MANIFEST).write_text('{"format_version": 1}')
    with pytest.raises(OutputError, match="it is in format version 1") as e:
        write(plugin, out, append=True)
    assert "\n" not in str(e.value)


def test_an_append_to_a_folder_that_is_no_dataset_writes_version_1(plugin, tmp_path):
    summary = write(plugin, tmp_path / "new", append=True, partitions=2)
    plain = write(plugin, tmp_path / "plain", partitions=2)
    assert summary.version == 1 and summary.line().startswith("recordmill: wrote 60 rows")
    assert checksums(tmp_path / "new") == checksums(tmp_path / "plain")
    assert plain.manifest["version"] == 1 and len(plain.manifest["history"]) == 1


def test_overwrite_starts_a_new_history_and_says_so(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out)
    write(plugin, out, append=True, start=100)
    summary = write(plugin, out, overwrite=True, start=7)
    assert "; version 1 of a new history (it replaced version 2)" in summary.line()
    assert recordmill.read_manifest(out)["version"] == 1 and ids(out) == run_ids(7)
    assert not list(out.glob("part-v*")) and verify(out) == []


def test_each_version_keeps_its_rejects(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out, reject=True, on_bad_input="skip")
    write(plugin, out, append=True)  # no rejects
    summary = write(plugin, out, append=True, start=100, reject=True, on_bad_input="skip")
    assert "; 3 inputs rejected, listed by" in summary.line()
    found = recordmill.read_rejects(out)
    assert [(r["source"], r.get("version")) for r in found] == [
        ("input 0", None),
        ("input 1", None),
        ("input 2", None),
        ("input 100", 3),
        ("input 101", 3),
        ("input 102", 3),
    ]
    assert sorted(p.name for p in out.glob("_rejects*")) == [
        "_rejects-v0003.parquet",
        "_rejects.parquet",
    ]
    assert recordmill.open(str(out), version=2).manifest["rejects"]["count"] == 3
    assert verify(out) == []


def test_a_second_writer_is_refused(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out)
    lock = OutputLock(Store.at(str(out)))
    lock.take()
    try:
        with pytest.raises(OutputError, match="another recordmill run is writing"):
            write(plugin, out, append=True)
    finally:
        lock.release()


def test_a_resumed_append_with_nothing_staged_is_a_plain_append(plugin, tmp_path):
    """An --append killed in its first second staged nothing: the same command with --resume
    appends (the latest version is not its own); once written, it is "already written"."""
    out = tmp_path / "out"
    write(plugin, out)
    write(plugin, out, append=True, start=100)
    again = write(plugin, out, append=True, start=100, resume=True)  # finished: nothing to do
    assert again.phases == {"already written": 0.0} and again.version == 2
    third = write(plugin, out, append=True, start=200, resume=True)
    assert third.version == 3 and "already written" not in third.phases
    assert recordmill.open(str(out)).version == 3
    again = write(plugin, out, append=True, start=200, resume=True)
    assert again.phases == {"already written": 0.0} and again.version == 3
    assert again.line() == (
        f"recordmill: already written: nothing to do ({out}, version 3: 60 rows in 1 partition)"
    )


def test_dedup_rejects_keys_in_the_dataset_and_earlier_in_the_run(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out, rows=5, tasks=2)  # ids 0..9, keys k0..k9
    # ids 5..34 with keys modulo 12: k5..k11 new, then k0..k11 again and again
    summary = write(plugin, out, append=True, start=5, rows=10, tasks=3, keys=12, dedup_key="key")
    assert ids(out) == [*range(10), 10, 11]  # k10 and k11, the only new keys
    assert summary.rows == 2 and summary.duplicates == 28
    assert "; 28 inputs rejected (28 duplicates), listed by: recordmill rejects" in summary.line()
    found = recordmill.read_rejects(out)
    assert found[0] == {
        "task_id": 0,
        "source": "row 0 of task 0",
        "reason": "duplicate of version 1, row 5",
        "row": 0,
        "field": "key",
        "value": "'k5'",
        "version": 2,
    }
    # the last, id 34 (task 2, row 9), has key k10, first seen as id 10 (task 0, row 5)
    assert found[-1]["reason"] == "duplicate of task 0, row 5 of this run" and found[-1]["row"] == 9
    assert verify(out) == []
    manifest = recordmill.read_manifest(out)
    assert [t["rows"] for t in manifest["tasks"]] == [5, 5, 2, 0, 0]


def test_dedup_keeps_the_first_whatever_the_workers(plugin, tmp_path):
    sums = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        write(plugin, out, keys=25, workers=workers, dedup_key="key", partitions=2)
        sums.append(checksums(out))
        assert ids(out) == list(range(25))
    assert sums[0] == sums[1]
    # a key of two fields: (n % 14, n % 7) repeats every 14 rows
    write(plugin, tmp_path / "two", keys=14, dedup_key="key,label")
    assert ids(tmp_path / "two") == list(range(14))


def test_without_dedup_key_duplicates_are_rows(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out, keys=5)
    write(plugin, out, append=True, keys=5)
    assert len(ids(out)) == 120


def test_dedup_key_must_name_plain_fields(plugin, tmp_path):
    with pytest.raises(ConfigError, match="--dedup-key names field 'nope'"):
        write(plugin, tmp_path / "out", dedup_key="nope")
    with pytest.raises(ConfigError, match="--dedup-key must name fields"):
        write(plugin, tmp_path / "out", dedup_key=" , ")


def test_torch_refuses_a_state_of_another_version(plugin, tmp_path):
    pytest.importorskip("torch", reason="PyTorch is not installed here")
    torch_module = pytest.importorskip("recordmill.torch")
    out = tmp_path / "out"
    write(plugin, out)
    loader = torch_module.DataLoader(
        torch_module.MapDataset(str(out), columns=["id"]), batch_size=8
    )
    next(iter(loader))
    state = loader.state_dict()
    assert state["version"] == 1
    write(plugin, out, append=True, start=100)
    newer = torch_module.DataLoader(torch_module.MapDataset(str(out), columns=["id"]), batch_size=8)
    with pytest.raises(ValueError, match="saved state is of version 1 of the dataset, this one"):
        newer.load_state_dict(state)
    older = torch_module.MapDataset(str(out), columns=["id"], version=1)
    pinned = torch_module.DataLoader(older, batch_size=8)
    pinned.load_state_dict(state)  # its own version: resumes
    pinned.load_state_dict({k: v for k, v in state.items() if k != "version"})  # from before
    assert [int(i) for b in pinned for i in b["id"]] == list(range(8, 60))


def test_history_and_info_say_the_version(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out)
    assert run_writer_cli("info", out)[1] == "version 1"
    write(plugin, out, append=True, start=100, partitions=2)
    info = run_writer_cli("info", out)
    assert info[1] == f"version 2: a write and 1 append (recordmill history {out})"
    # the plugin and settings shown are the last append's: labelled as that version's
    assert any(line.startswith("plugin of version 2: grow (") for line in info), info
    assert any(line.startswith("settings of version 2: ") for line in info), info
    lines = run_writer_cli("history", out)
    assert [line.split("  ")[0] for line in lines] == ["version 1", "version 2"]
    assert "+60 rows  2 partitions  plugin grow: " in lines[1] and "start=100" in lines[1]
    assert versions.current(recordmill.read_manifest(out)) == 2
    assert os.path.exists(out / "part-v0002-00001-of-00002.parquet")


def test_an_append_of_nothing_but_duplicates_adds_no_version_and_says_so(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out, rows=5, tasks=2)
    before = recordmill.read_manifest(out)
    summary = write(plugin, out, append=True, rows=5, tasks=2, dedup_key="key")
    assert (summary.rows, summary.partitions, summary.version) == (0, 0, 1)
    assert summary.duplicates == summary.rejects == 10
    assert summary.line() == (
        f"recordmill: nothing new: every row is a duplicate of the dataset's (10 duplicates); "
        f"{out} stays at version 1"
    )
    assert (
        recordmill.read_manifest(out) == before
        and not (tmp_path / ".out.recordmill-partial").exists()
    )
    one = write(plugin, out, append=True, start=9, rows=2, tasks=1, dedup_key="key")
    assert one.version == 2 and one.rows == 1 and one.rejects == 1 and "(1 duplicate)" in one.line()


@pytest.mark.parametrize("then", ["another history, same version", "an older version"])
def test_a_staged_append_on_a_dataset_replaced_since_is_refused(plugin, tmp_path, then):
    from recordmill.engine.commit import KILL_AT

    out, other = tmp_path / "out", tmp_path / "other"
    write(plugin, out, start=0)
    write(plugin, out, start=100, append=True)  # version 2
    common = ["--script", plugin, "--output", out, "--workers", "1", "--quiet", "--start", "200"]
    killed = run_writer(*common, "--append", env={KILL_AT: "staged"})
    assert killed.returncode != 0  # an append to version 3, staged, not published
    # The dataset is replaced by another one's files: version 2 of another history, or version 1.
    write(plugin, other, start=500)
    if then == "another history, same version":
        write(plugin, other, start=600, append=True)
    for name in os.listdir(out):
        os.remove(out / name)
    for name in os.listdir(other):
        os.link(other / name, out / name)
    before = checksums(out)
    done = run_writer(*common, "--append", "--resume")
    assert done.returncode == 1
    line = done.stderr.strip().splitlines()[-1]
    now = "another version 2 now" if then.startswith("another") else "version 1 now"
    assert f"it was made on version 2 of the dataset, which holds {now} (it was replaced" in line
    assert checksums(out) == before and ids(out) == ids(other)  # nothing published


def test_a_duplicate_names_the_first_row_of_its_key_in_a_dataset_that_has_ties(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out, rows=5, tasks=2, keys=3)  # no dedup: keys k0 k1 k2 k0 k1 k2 ...
    write(plugin, out, append=True, start=2, rows=1, tasks=2, dedup_key="key")  # k2 and k3
    (found,) = recordmill.read_rejects(out)
    assert found["reason"] == "duplicate of version 1, row 2"  # the first k2, not the last (8)
    assert ids(out) == [*range(10), 3]


def test_max_rejects_counts_the_duplicates_exactly(plugin, tmp_path):
    base = tmp_path / "base"
    write(plugin, base, rows=5, tasks=2)
    for limit, fails in ((27, True), (28, False)):  # the append below has 28 duplicates
        out = tmp_path / f"out{limit}"
        shutil.copytree(base, out)
        settings = dict(append=True, start=5, rows=10, tasks=3, keys=12, dedup_key="key")
        if fails:
            with pytest.raises(
                recordmill.RecordmillError, match="28 inputs rejected, more than --max-rejects 27"
            ):
                write(plugin, out, max_rejects=limit, **settings)
            assert ids(out) == list(range(10))  # nothing added
        else:
            assert write(plugin, out, max_rejects=limit, **settings).duplicates == 28
