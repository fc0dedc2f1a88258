"""The store: outputs on object storage (an S3 server on 127.0.0.1, moto) written and read back
by URI, and its own contract on a local disk (names, whole writes, the guard, flushes, the files
it opens)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

import recordmill
from recordmill.dataset import storage
from recordmill.dataset.checksum import crc32c
from recordmill.dataset.storage import HashingSink, Store, _opened_path, open_in
from recordmill.errors import ConfigError, OutputError
from recordmill.read.verify import verify
from tests.conftest import REPO, make_plugin, refused, run_writer

PLUGIN = """
    import numpy as np

    def task_number():
        return 5

    def schema():
        return {"task": {"type": "int32"}, "i": {"type": "int32"}, "v": {"type": "float32", "shape": [3]}}

    def dict_data(task_id):
        for i in range(17 * task_id):
            yield {"task": task_id, "i": i, "v": np.full(3, i, dtype=np.float32)}
"""


# The same rows with their counts announced: partitions written straight from the rows.
COUNTED = (
    PLUGIN
    + """
    def task_rows(task_id):
        return 17 * task_id
"""
)


# The store's own contract on a local disk and a mock filesystem: names, whole writes, the
# guard before every change, folders flushed as made, and files that are regular files only.


def test_a_store_names_its_paths_and_children(tmp_path, monkeypatch):
    store = Store.at(tmp_path / "a")
    assert store.root == str(tmp_path / "a") and store.local and str(store) == store.root
    assert store.path("b", "c") == f"{tmp_path}/a/b/c" and store.name == "a"
    assert store.child("b").root == f"{tmp_path}/a/b"
    assert store.child("b").sibling("c").root == f"{tmp_path}/a/c"
    assert store.parent.root == str(tmp_path) and Store.at("/x").parent.root == "/"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Store.at("rel").root == str(tmp_path / "rel")  # made absolute
    assert Store.at("~/h").root == str(tmp_path / "home" / "h")
    mock = Store(pafs._MockFileSystem(), "bucket/x")
    assert str(mock) == "mock://bucket/x" and not mock.local
    assert Store.at("file:///data/x/").root == "/data/x"  # a URI's root, without its last /


def test_a_location_pyarrow_cannot_use_is_one_line():
    line = refused(lambda: Store.at("nosuch://bucket/x"), ConfigError)
    assert line.startswith("cannot use the location nosuch://bucket/x: ") and "\n" not in line
    with pytest.raises(pa.ArrowInvalid):  # what the line names: pyarrow's own words
        pafs.FileSystem.from_uri("nosuch://bucket/x")


def test_an_s3_uri_asks_for_one_put_a_small_file_unless_it_says_otherwise(monkeypatch):
    monkeypatch.setattr(storage, "_delays_opens", lambda: True)
    assert storage._small_puts("s3://b/x") == "s3://b/x?allow_delayed_open=true"
    assert storage._small_puts("s3://b/x?region=r") == "s3://b/x?region=r&allow_delayed_open=true"
    said = "s3://b/x?allow_delayed_open=false"
    assert storage._small_puts(said) == said
    assert storage._small_puts("gs://b/x") == "gs://b/x"
    monkeypatch.setattr(storage, "_delays_opens", lambda: False)  # pyarrow 19 and 20
    assert storage._small_puts("s3://b/x") == "s3://b/x"


def test_a_hashing_sink_keeps_each_marked_runs_start_and_crc(tmp_path):
    store = Store.at(tmp_path)
    sink = HashingSink(store.output("f"))
    assert sink.write(b"head") == 4  # before the first mark: no run
    sink.mark()
    assert sink.write(bytearray(b"one")) == 3 and sink.write(memoryview(b"-1")) == 2
    sink.mark()
    sink.write(b"two")
    assert sink.tell() == sink.size == 12 and sink.writable()
    sink.close()
    sink.close()  # once: the footer's run is not kept twice
    assert (tmp_path / "f").read_bytes() == b"headone-1two"
    assert sink.offsets == [4, 9] and sink.crc32c == [crc32c(b"one-1"), crc32c(b"two")]
    assert sink.checksum == store.sha256("f") and sink.closed
    plain = HashingSink(store.output("g"))
    plain.write(b"x")
    plain.close()
    assert plain.offsets == [] and plain.crc32c == []


def test_a_store_writes_a_file_whole_and_lists_its_folder(tmp_path):
    store = Store.at(tmp_path / "a")
    store.makedirs("b")
    store.write_text("b/t", "text")
    assert store.read_text("b", "t") == "text" and store.size("b", "t") == 4
    assert sorted(p.name for p in (tmp_path / "a" / "b").iterdir()) == ["t"]  # no .partial
    store.write_bytes("z", b"")
    assert store.listdir() == ["b", "z"] and store.listdir("b") == ["t"]
    assert store.listdir("none") == [] and store.listdir("z") == []  # no folder, a file
    assert store.exists("b") and not store.is_file("b") and store.is_file("z")
    assert not store.exists("none") and not store.is_file("none")
    store.delete("z")
    store.delete("z")  # already gone: nothing to do
    store.delete_tree("none")
    store.delete_tree("b")
    assert store.listdir() == []


def test_the_guard_is_asked_before_every_change(tmp_path):
    asked = []

    def guard():
        asked.append(1)
        if len(asked) > 1:
            raise OutputError("the lease is lost")

    store = Store(Store.at(tmp_path).fs, str(tmp_path), guard=guard)
    store.write_bytes("kept", b"x")  # asked once, allowed
    changes = [
        lambda: store.write_bytes("new", b"y"),
        lambda: store.output("new"),
        lambda: store.delete("kept"),
        lambda: store.child("c").delete_tree(),
    ]
    for change in changes:
        with pytest.raises(OutputError, match="the lease is lost"):
            change()
    assert len(asked) == 1 + len(changes)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]  # nothing else changed


def test_folders_made_and_files_written_are_flushed_each_once(tmp_path, monkeypatch):
    folders, files = [], []
    monkeypatch.setattr(storage, "fsync_dir", folders.append)
    monkeypatch.setattr(storage, "_flush_file", files.append)
    store = Store.at(tmp_path / "a", fsync=True)
    store.makedirs("b", "c")  # a, b and c made: each flushed into its parent
    assert folders == [str(tmp_path), f"{tmp_path}/a", f"{tmp_path}/a/b"]
    folders.clear()
    store.makedirs("b")  # there already: nothing made, nothing flushed
    with store.output("b", "f") as f:
        f.write(b"data")
    f.close()  # closed again: flushed once
    assert files == [f"{tmp_path}/a/b/f"] and folders == []
    store.flush_dir("b")
    assert folders == [f"{tmp_path}/a/b"]
    files.clear()
    folders.clear()
    store.flush_tree()  # every file, then the folders, deepest first
    assert files == [f"{tmp_path}/a/b/f"]
    assert folders == [f"{tmp_path}/a/b/c", f"{tmp_path}/a/b", f"{tmp_path}/a"]
    files.clear()
    folders.clear()
    unflushed = Store.at(tmp_path / "u")
    unflushed.makedirs("b")
    unflushed.write_bytes("f", b"x")
    unflushed.flush_tree()
    with unflushed.output("g") as f:
        f.write(b"x")
    assert files == folders == []


def test_a_folder_made_meanwhile_by_another_worker_is_no_error(tmp_path, monkeypatch):
    made = os.makedirs

    def racing(path, *args, **kwargs):  # another worker makes it first
        os.mkdir(path)
        return made(path, *args, **kwargs)

    monkeypatch.setattr(os, "makedirs", racing)
    Store.at(tmp_path / "a", fsync=True).makedirs("b")
    assert (tmp_path / "a" / "b").is_dir()
    assert not Store(pafs.LocalFileSystem(), str(tmp_path)).flushes  # flushed only when asked


def test_a_whole_write_is_flushed_where_the_store_flushes_unless_asked_not_to(
    tmp_path, monkeypatch
):
    synced = []
    monkeypatch.setattr(storage, "_fdatasync", synced.append)
    flushing, plain = Store.at(tmp_path, fsync=True), Store.at(tmp_path)
    flushing.write_bytes("a", b"x")
    flushing.write_text("b", "x")
    assert len(synced) == 2  # by default: before its rename
    flushing.write_bytes("c", b"x", flush=False)  # a file whose loss costs only work again
    plain.write_bytes("d", b"x", flush=True)  # a store that does not flush: never
    assert len(synced) == 2 and (tmp_path / "d").read_bytes() == b"x"


def test_object_storage_has_no_folders_to_make():
    made = []

    class S3Like:  # pyarrow's S3 filesystem as far as makedirs asks it
        type_name = "s3"

        def create_dir(self, path, recursive=True):
            made.append(path)

    Store(S3Like(), "bucket/x").makedirs("y")
    assert made == []  # a key's prefix exists once an object is written under it


def test_a_file_opened_is_named_by_its_descriptor_not_its_path(tmp_path):
    (tmp_path / "a").write_bytes(b"x")
    fd = os.open(tmp_path / "a", os.O_RDONLY)
    try:  # whatever stands at the name now
        assert _opened_path(fd, str(tmp_path / "b")) == str(tmp_path / "a")
    finally:
        os.close(fd)


def test_a_folder_is_flushed_through_a_descriptor_of_its_own(tmp_path, monkeypatch):
    flushed = []
    monkeypatch.setattr(os, "fsync", lambda fd: flushed.append(os.readlink(f"/proc/self/fd/{fd}")))
    storage.fsync_dir(str(tmp_path))
    assert flushed == [str(tmp_path)]
    (tmp_path / "f").write_bytes(b"x")
    with pytest.raises(NotADirectoryError):  # a folder's, only
        storage.fsync_dir(str(tmp_path / "f"))


def test_s3_uris_ask_for_one_put_where_this_pyarrow_can_and_it_is_asked_once():
    storage._delays_opens.cache_clear()
    assert storage._delays_opens() == (int(pa.__version__.split(".")[0]) >= 21)
    storage._delays_opens()
    assert storage._delays_opens.cache_info().misses == 1  # asked of pyarrow once a process


def test_an_abandoned_stream_is_kept_unclosed_for_good(tmp_path):
    stream = Store.at(tmp_path).output("x")
    Store.abandon(stream)
    assert stream in storage._ABANDONED and not stream.closed  # never collected, never closed


def test_only_a_regular_file_of_the_folder_itself_is_opened(tmp_path):
    ds = tmp_path / "ds"
    ds.mkdir()
    (ds / "real").write_bytes(b"data")
    (tmp_path / "outside").write_bytes(b"secret")
    (ds / "link").symlink_to(tmp_path / "outside")
    (ds / "sub").mkdir()
    os.mkfifo(ds / "fifo")  # opened, it must not wait for a writer
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "f").write_bytes(b"secret")
    (ds / "in").symlink_to(tmp_path / "elsewhere")  # a link in the path, not at the file
    store = Store.at(ds)
    fd = open_in(store, "real")
    assert os.read(fd, 10) == b"data"
    os.close(fd)
    rule = "a dataset's files are regular files in its folder"
    opened = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    for name, what in [
        ("link", "a symbolic link"),
        ("fifo", "not a regular file (a FIFO, a device or a folder)"),
        ("sub", "not a regular file (a FIFO, a device or a folder)"),
        ("in/f", "outside the folder (a link in its path)"),
    ]:
        line = refused(lambda name=name: open_in(store, *name.split("/")), OutputError)
        assert line == f"{ds}/{name} is {what}: {rule}"
    if opened is not None:  # each file refused was closed
        assert len(os.listdir("/proc/self/fd")) == opened
    with pytest.raises(FileNotFoundError):
        open_in(store, "missing")
    assert store.read_bytes("real") == b"data"
    with pytest.raises(OutputError, match="is a symbolic link"):
        store.read_bytes("link")


@pytest.mark.parametrize(
    ("source", "fmt"),
    [(PLUGIN, "parquet"), (COUNTED, "parquet"), (COUNTED, "arrow")],
    ids=["staged", "direct", "direct-arrow"],
)
def test_write_to_s3_and_read_back(s3, tmp_path, source, fmt):
    plugin = make_plugin(tmp_path / "xyz", source)
    common = ["--script", plugin, "--partitions", "3", "--format", fmt, "--quiet"]
    recordmill.write(plugin, tmp_path / "local", partitions=3, format=fmt, progress=False)
    uri = s3(f"runs/xyz-{fmt}-{source is COUNTED}")
    remote = run_writer(*common, "--output", uri, "--workers", "2")
    assert remote.returncode == 0, remote.stderr
    assert "s3://data/runs/xyz" in remote.stdout
    store = Store.at(uri)
    assert store.listdir() == [
        f"_manifest.{fmt}",
        f"part-00000-of-00003.{fmt}",
        f"part-00001-of-00003.{fmt}",
        f"part-00002-of-00003.{fmt}",
    ]
    assert not store.sibling(f".{store.name}.recordmill-partial").exists()
    ours = recordmill.open(uri)
    theirs = recordmill.open(str(tmp_path / "local"))
    assert ours.to_arrow().equals(theirs.to_arrow())
    assert [p["checksum"] for p in ours.manifest["partitions"]] == [
        p["checksum"] for p in theirs.manifest["partitions"]
    ]
    assert ours[40]["v"].tolist() == theirs[40]["v"].tolist()
    table = ours.to_arrow()  # and what the plugin yields
    expected = [(t, i) for t in range(5) for i in range(17 * t)]
    assert list(zip(table["task"].to_pylist(), table["i"].to_pylist(), strict=True)) == expected
    assert table["v"].to_pylist() == [[float(i)] * 3 for _, i in expected]


def test_a_write_to_s3_deletes_no_staged_file_one_by_one(s3, tmp_path):
    """Each object deleted on its own costs a request, and pyarrow adds one more (the folder's
    marker); the staging folder's files go with it at the end, many keys to a request. Counted
    on the wire, through a proxy in front of the S3 server."""
    from tests.s3proxy import CountingProxy

    uri = s3("runs/counted")
    proxy = CountingProxy.in_front_of(uri)
    try:
        counted = proxy.through(uri)
        plugin = make_plugin(tmp_path / "xyz", PLUGIN)  # staged: fragments, then partitions
        recordmill.write(plugin, counted, partitions=3, progress=False)
        seen = list(proxy.counts.seen)
    finally:
        proxy.close()
    assert verify(uri) == [] and recordmill.open(uri).to_arrow().num_rows == 170
    deleted = [path for method, path in seen if method == "DELETE"]
    assert not [p for p in deleted if "/_tasks/task-" in p or "/part-" in p], deleted
    copied = [p for method, p in seen if method == "PUT" and "/runs/counted/part-" in p]
    assert len(copied) == 3  # each partition written once into the output
    assert any(method == "POST" and "delete" in path for method, path in seen)


def test_s3_overwrite_and_refusal(s3, tmp_path):
    plugin = make_plugin(tmp_path / "xyz", PLUGIN)
    uri = s3("again")
    first = run_writer("--script", plugin, "--output", uri, "--quiet", "--workers", "1")
    assert first.returncode == 0, first.stderr
    refused = run_writer("--script", plugin, "--output", uri, "--quiet", "--workers", "1")
    assert refused.returncode == 1 and "--overwrite" in refused.stderr
    again = run_writer(
        "--script", plugin, "--output", uri, "--partitions", "2", "--overwrite", "--quiet"
    )
    assert again.returncode == 0, again.stderr
    assert len(recordmill.open(uri).manifest["partitions"]) == 2
    assert len(Store.at(uri).listdir()) == 3


def test_verify_info_and_rejects_on_s3(s3, tmp_path):
    plugin = make_plugin(tmp_path / "tasks", PLUGIN)
    uri = s3("runs/checked")
    result = run_writer("--script", plugin, "--output", uri, "--partitions", "2", "--quiet")
    assert result.returncode == 0, result.stderr
    assert verify(uri) == []
    assert recordmill.read_manifest(uri)["total_rows"] == 170
    assert recordmill.read_rejects(uri) == []
    cli = subprocess.run(
        ["recordmill", "verify", uri], capture_output=True, text=True, env=os.environ
    )
    assert cli.returncode == 0 and "170 rows in 2 partitions match" in cli.stdout
    store = Store.at(uri)
    name = "part-00001-of-00002.parquet"
    with store.fs.open_input_stream(store.path(name)) as f:
        data = f.read()
    with store.output(name) as f:
        f.write(data[:-100])  # truncated
    problems = verify(uri)
    assert any(p.startswith(f"{name}: {len(data) - 100} bytes") for p in problems)
    cli = subprocess.run(
        ["recordmill", "verify", uri], capture_output=True, text=True, env=os.environ
    )
    location, query = uri.split("?")
    lines = cli.stdout.splitlines()
    assert cli.returncode == 1 and lines[0].startswith(f"{location}/{name}: "), lines
    assert lines[-1] == f"(files read with ?{query})" and "?" not in "".join(lines[:-1])


def test_a_hashing_sink_gives_the_checksum_of_what_it_wrote(tmp_path):
    import pyarrow.parquet as pq

    store = Store.at(str(tmp_path))
    sink = HashingSink(store.output("t.parquet"))
    pq.write_table(pa.table({"x": list(range(1000)), "b": [b"y" * 100] * 1000}), sink)
    sink.close()
    assert sink.checksum == store.sha256("t.parquet") and sink.size == store.size("t.parquet")
    assert pq.read_table(tmp_path / "t.parquet")["x"].to_pylist() == list(range(1000))


# Tasks wait for the gate file the test makes once it is done with the run that holds the lease:
# however busy the machine, that run is still running meanwhile (a sleep can be outlasted).
SLOW = """
    import os
    import time

    def task_number():
        return 4

    def dict_data(task_id):
        deadline = time.monotonic() + 120
        while not os.path.exists(__file__ + ".go") and time.monotonic() < deadline:
            time.sleep(0.01)
        yield {"task": task_id}
"""


def test_two_runs_on_one_s3_output_cannot_both_write(s3, tmp_path):
    """The lease (a conditional write): the second run is refused whatever its flags, and the
    first one finishes; its advice (wait) is all there is to follow."""
    plugin = make_plugin(tmp_path / "slow", SLOW)
    uri = s3("runs/leased")
    args = ["--script", plugin, "--output", uri, "--quiet", "--workers", "1"]
    first = subprocess.Popen(
        [sys.executable, str(REPO / "writer.py"), *map(str, args)],
        stderr=subprocess.PIPE,
        text=True,
    )
    store = Store.at(uri)
    lease = store.sibling(".leased.recordmill-lease")
    deadline = time.monotonic() + 30
    while not lease.exists():
        assert time.monotonic() < deadline and first.poll() is None, "no lease was taken"
        time.sleep(0.1)
    for flags in ([], ["--overwrite"], ["--resume"]):
        second = run_writer(*args, *flags)
        assert second.returncode == 1
        assert "another recordmill run is writing" in second.stderr, second.stderr
        assert "wait for it to finish" in second.stderr
    (plugin / "plugin.py.go").touch()
    assert first.wait(timeout=60) == 0, first.stderr.read()
    assert recordmill.open(uri).manifest["total_rows"] == 4
    assert not lease.exists()  # released
    after = run_writer(*args, "--overwrite")
    assert after.returncode == 0, after.stderr


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_an_s3_reader_sees_one_version_or_a_clear_error(s3, tmp_path, fmt):
    """Object stores replace files in place: a reader that opened the first version reads it to
    the end or fails clearly; it never returns rows of the second."""
    first = make_plugin(tmp_path / "first", PLUGIN)
    second = make_plugin(tmp_path / "second", PLUGIN.replace("np.full(3, i,", "np.full(3, -i,"))
    uri = s3(f"runs/replaced-{fmt}")
    # The versions written in this process (the readers are what is tested here).
    settings = dict(partitions=3, format=fmt, row_group_size=8, progress=False)
    recordmill.write(first, uri, **settings)
    ds = recordmill.open(uri)
    batches = ds.iter_batches(8, format="arrow")
    seen = [next(batches)]
    recordmill.write(second, uri, overwrite=True, **settings)
    try:
        seen += list(batches)
    except recordmill.RecordmillError as e:
        assert "replaced" in str(e) or "damaged" in str(e)
    values = [v[0] for b in seen for v in b.column("v").to_pylist()]
    assert all(v >= 0 for v in values), "rows of the second version were returned"
    assert recordmill.open(uri)[40]["v"][0] <= 0


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_an_s3_reader_never_mixes_versions_of_the_same_byte_size(s3, tmp_path, fmt):
    """A partition replaced by one of exactly its size (the second version adds 1024 to the values,
    uncompressed): the reader's checks of the bytes it fetches against its manifest catch it,
    for single rows and for passes whose read-ahead is smaller than the dataset (before them,
    an S3 reader returned rows of both versions here). Versions of other sizes:
    test_an_s3_reader_sees_one_version_or_a_clear_error."""
    first = make_plugin(tmp_path / "first", PLUGIN)
    second = make_plugin(
        tmp_path / "second", PLUGIN.replace("np.full(3, i,", "np.full(3, i + 1024,")
    )
    uri = s3(f"runs/same-size-{fmt}")
    settings = dict(partitions=2, format=fmt, row_group_size=8, compression="none", progress=False)
    recordmill.write(first, uri, **settings)
    sizes = [p["bytes"] for p in recordmill.read_manifest(uri)["partitions"]]
    readers = [recordmill.open(uri, read_ahead_bytes=200, cache_bytes=200) for _ in range(2)]
    assert readers[0][3]["v"][0] < 1000  # the first row group fetched before the overwrite
    recordmill.write(second, uri, overwrite=True, **settings)
    # the case the checks must catch: no size differs
    assert [p["bytes"] for p in recordmill.read_manifest(uri)["partitions"]] == sizes
    values = []
    for i in (2, 40, 80, 120, 150):
        try:
            values.append(readers[0][i]["v"][0])
        except recordmill.RecordmillError as e:
            assert "replaced" in str(e), str(e)
    try:
        values += [row["v"][0] for row in readers[1]]
    except recordmill.RecordmillError as e:
        assert "replaced" in str(e), str(e)
    assert all(v < 1000 for v in values), "rows of the second version were returned"
    assert min(row["v"][0] for row in recordmill.open(uri)) >= 1000  # a new reader: the new version


def test_a_store_flushes_only_when_asked_and_only_on_a_local_disk(tmp_path):
    local = Store.at(tmp_path / "a", fsync=True)
    assert local.flushes and local.child("b").sibling("c").parent.flushes
    assert not Store.at(tmp_path / "a").flushes
    local.makedirs("b", "c")  # the folders it made, flushed into their parents
    local.child("b").write_bytes("f", b"data")
    with local.output("b", "g") as f:
        f.write(b"more")
    assert (tmp_path / "a" / "b" / "g").read_bytes() == b"more"
    local.flush_tree()
    elsewhere = Store(pafs._MockFileSystem(), "bucket/x", fsync=True)
    assert not elsewhere.flushes
    elsewhere.makedirs()
    elsewhere.write_bytes("f", b"data")
    elsewhere.flush_dirs()  # nothing to flush: a completed write there is durable
    assert elsewhere.read_bytes("f") == b"data"
