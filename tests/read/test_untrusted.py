"""A dataset made by someone else is data, never a way into the machine: manifests forged as a
forger would (re-signed: ``edit_manifest`` writes the manifest's own checksum again), links,
FIFOs, bad offsets and huge counts are each one clear error, at once."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import recordmill
from recordmill.read.verify import verify
from tests.conftest import COUNTING_PLUGIN, edit_manifest, make_plugin

PART = "part-00000-of-00002.{}"


@pytest.fixture(scope="module", params=["parquet", "arrow"])
def written(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    plugin = make_plugin(root / "counting", COUNTING_PLUGIN)
    recordmill.write(
        plugin, root / "ds", partitions=2, format=request.param, progress=False, workers=0
    )
    return root / "ds"


@pytest.fixture
def ds(written, tmp_path):
    """A copy of the dataset, two folders deep, with a secret file beside the folders."""
    target = tmp_path / "a" / "ds"
    shutil.copytree(written, target)
    return target


def cli(*args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "recordmill", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_error_line(result, phrase):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result
    assert len(lines) == 1 and lines[0].startswith("recordmill: error: "), result.stderr
    assert phrase in lines[0], lines[0]


def forge(ds, name, data):
    """Put ``data`` in place of partition ``name`` and re-sign the manifest for it, leaving out
    the optional checksums (as a dataset from before them has)."""
    (ds / name).write_bytes(data)

    def change(m):
        for p in m["partitions"]:
            p.update(group_offsets=None, group_crc32c=None, batch_crc32=None)
            if p["file"] == name:
                p.update(bytes=len(data), checksum="sha256:" + hashlib.sha256(data).hexdigest())

    edit_manifest(ds, change)


def test_a_partition_named_outside_the_folder_is_refused(ds, tmp_path):
    fmt = ds.glob("part-*").__next__().suffix[1:]
    shutil.copy(ds / PART.format(fmt), tmp_path / f"secret.{fmt}")
    manifest = next(ds.glob("_manifest.*"))
    intact = manifest.read_bytes()
    for name in (f"../../secret.{fmt}", "../../../../../etc/passwd"):
        manifest.write_bytes(intact)
        edit_manifest(ds, lambda m, name=name: m["partitions"][0].update(file=name))
        with pytest.raises(recordmill.OutputError, match="not a partition file name"):
            recordmill.open(str(ds))
        for command in ("head", "info"):
            one_error_line(cli(command, ds), "not a partition file name")
        result = cli("verify", ds)
        assert result.returncode == 1 and "not a partition file name" in result.stdout
        assert "sha256" not in result.stdout + result.stderr  # nothing said of the target


def test_a_symbolic_link_in_the_folder_is_refused(ds, tmp_path):
    fmt = ds.glob("part-*").__next__().suffix[1:]
    name = PART.format(fmt)
    shutil.move(ds / name, tmp_path / "moved")  # the same bytes: every check would pass
    (ds / name).symlink_to(tmp_path / "moved")
    with pytest.raises(recordmill.OutputError, match=f"{name} is a symbolic link"):
        recordmill.open(str(ds))[0]
    one_error_line(cli("head", ds), "is a symbolic link")
    result = cli("verify", ds)
    assert result.returncode == 1 and f"{name}: is a symbolic link" in result.stdout
    (ds / name).unlink()
    shutil.move(tmp_path / "moved", ds / name)
    manifest = next(ds.glob("_manifest.*"))
    shutil.move(manifest, tmp_path / "manifest")
    manifest.symlink_to(tmp_path / "manifest")
    one_error_line(cli("info", ds), "is a symbolic link")


def test_a_fifo_is_refused_at_once(ds):
    fmt = ds.glob("part-*").__next__().suffix[1:]
    name = PART.format(fmt)
    (ds / name).unlink()
    os.mkfifo(ds / name)  # nothing ever writes it: a read of it would never end
    for command in ("info", "head"):
        one_error_line(cli(command, ds), "not a regular file")
    result = cli("verify", ds)
    assert result.returncode == 1 and f"{name}: is not a regular file" in result.stdout


def test_a_rejects_file_outside_the_folder_is_refused(ds):
    edit_manifest(ds, lambda m: m["rejects"].update(count=1, file="../../../../../dev/zero"))
    with pytest.raises(recordmill.OutputError, match="not a rejects file name"):
        recordmill.read_rejects(ds)
    one_error_line(cli("rejects", ds), "not a rejects file name")


def test_a_claimed_billion_row_groups_is_refused_before_any_list_is_built(ds):
    edit_manifest(ds, lambda m: m["partitions"][0].update(row_groups=10**9, group_offsets=None))
    one_error_line(cli("info", ds), "1,000,000,000 row groups in")


def test_arrow_offsets_past_the_end_are_an_error_never_memory(ds, tmp_path):
    if not list(ds.glob("*.arrow")):
        pytest.skip("an Arrow IPC dataset's test")
    name = PART.format("arrow")
    table = pa.ipc.open_file(ds / name).read_all()
    column = table.column("name").combine_chunks()
    # Offsets that stay within the values at the end (a cheap check passes) but point far past
    # them in between: reading row 1 would read beyond the mapped file.
    offsets = [0] + [100_000] * (len(column) - 1) + [len(column.buffers()[2])]
    bad = pa.Array.from_buffers(
        pa.string(),
        len(column),
        [None, pa.py_buffer(pa.array(offsets, pa.int32()).buffers()[1]), column.buffers()[2]],
    )
    forged = table.set_column(table.schema.get_field_index("name"), "name", bad)
    forged = pa.Table.from_arrays(forged.columns, schema=table.schema)  # the field's nullability
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(forged, max_chunksize=table.num_rows)
    forge(ds, name, sink.getvalue().to_pybytes())
    reading = subprocess.run(
        [sys.executable, "-c", f"import recordmill; print(recordmill.open({str(ds)!r})[1])"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert reading.returncode == 1, reading  # not -11: no segfault, no bytes from past the end
    assert "OutputError" in reading.stderr
    assert f"{name}, record batch 0 is damaged: " in reading.stderr
    assert "(recordmill verify tells more)" in reading.stderr
    one_error_line(cli("head", ds), "is damaged")
    assert any(name in p and "is damaged" in p for p in verify(ds))
    if importlib.util.find_spec("matplotlib"):  # the show extra; not in .ci/oldest.sh
        # show's statistics read the file's columns themselves: checked as every read is
        one_error_line(cli("show", ds, "--output", tmp_path / "page.html"), f"{name}, record batch")
        assert not (tmp_path / "page.html").exists()


def test_a_parquet_partition_of_another_schema_is_refused_not_cast(ds):
    if not list(ds.glob("*.parquet")):
        pytest.skip("a Parquet dataset's test")
    name = PART.format("parquet")
    table = pq.read_table(ds / name)
    other = table.set_column(0, "task", table.column("task").cast(pa.string()))
    sink = pa.BufferOutputStream()
    pq.write_table(other, sink)
    forge(ds, name, sink.getvalue().to_pybytes())
    with pytest.raises(recordmill.OutputError, match="another schema"):
        recordmill.open(str(ds))[0]


def test_manifest_strings_reach_the_terminal_escaped(ds):
    title = "\x1b]0;owned\x07\x1b[2J\x9b31mverify ok"

    def change(m):
        m.update(created=title)
        m["plugin"].update(name=title)
        m["history"][0].update(created=title)
        m["history"][0]["plugin"].update(name=title)

    edit_manifest(ds, change)
    for command in ("info", "history"):
        result = cli(command, ds)
        assert result.returncode == 0, result.stderr
        assert not any(c in result.stdout for c in "\x1b\x07\x9b"), result.stdout
        assert "\\x1b]0;owned\\x07" in result.stdout


def test_a_manifest_past_its_bounds_is_refused_before_it_is_read(ds, monkeypatch):
    """A manifest of 88 MB (300,000 partitions) was refused after 9-19 s and 790 MB: its bytes
    are bounded before it is read, its partitions before a list of them is built."""
    from recordmill.dataset import manifest as manifest_file

    name = next(p.name for p in ds.glob("_manifest.*"))
    size = (ds / name).stat().st_size
    monkeypatch.setattr(manifest_file, "MAX_MANIFEST_BYTES", size)  # at the bound: read
    assert len(recordmill.open(ds).manifest["partitions"]) == 2
    monkeypatch.setattr(manifest_file, "MAX_MANIFEST_BYTES", size - 1)
    monkeypatch.setattr(manifest_file, "parse", lambda *_: pytest.fail("read and parsed"))
    with pytest.raises(recordmill.OutputError) as caught:
        recordmill.open(ds)
    assert str(caught.value) == (
        f"the manifest of {ds} is damaged: {name} holds {size:,} bytes, more than a manifest "
        f"may ({size - 1:,}); it is not read"
    )
    monkeypatch.undo()
    monkeypatch.setattr(manifest_file, "MAX_PARTITIONS", 2)  # at the bound: opened
    assert len(recordmill.open(ds).manifest["partitions"]) == 2
    monkeypatch.setattr(manifest_file, "MAX_PARTITIONS", 1)
    with pytest.raises(recordmill.OutputError) as caught:
        recordmill.open(ds)
    assert str(caught.value) == (
        f"the manifest of {ds} is damaged: it lists 2 partitions, more than a dataset may have (1)"
    )


def test_a_partition_is_checked_as_opened_not_by_its_path(ds, tmp_path):
    """What is checked is the file opened: a FIFO is refused at once (its open waits for no
    writer), a link at its name is refused, and a partition swapped for a link after it was
    opened is not read through the link."""
    from recordmill.dataset.storage import Store, open_in

    store = Store.at(str(ds))
    name = next(p.name for p in ds.glob("part-*"))
    fd = open_in(store, name)
    secret = tmp_path / "secret"
    secret.write_bytes(b"the user's own file")
    os.replace(ds / name, tmp_path / "moved")
    os.symlink(secret, ds / name)  # swapped after the open
    assert os.pread(fd, 4, 0) in (b"PAR1", b"ARRO")  # the partition's bytes, not the secret's
    os.close(fd)
    with pytest.raises(recordmill.OutputError, match=f"{name} is a symbolic link: a dataset's"):
        open_in(store, name)
    os.unlink(ds / name)
    os.mkfifo(ds / name)
    with pytest.raises(recordmill.OutputError, match="is not a regular file \\(a FIFO, a dev"):
        open_in(store, name)  # at once: were it waiting for a writer, the test would hang
