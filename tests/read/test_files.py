"""recordmill.read.files: a dataset's partition files, opened and checked against its manifest,
and the map of its row groups that numbers every row."""

from __future__ import annotations

import base64
import copy
import errno
import os
import resource
import shutil
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from recordmill.dataset import manifest as manifest_file
from recordmill.dataset.checksum import batch_crc32
from recordmill.dataset.storage import Store
from recordmill.errors import OutputError
from recordmill.read.files import Files, check_structure, group_rows, open_files
from tests.conftest import each_format, edit_manifest, python_prints, refused, written
from tests.engine.test_pipeline import EMPTY
from tests.read.test_read_refusals import FORTY

# Two tasks of 23 rows, a partition each, in row groups of 5: 5, 5, 5, 5 and 3 rows.
SOURCE = """
    def task_number():
        return 2

    def dict_data(task_id):
        for i in range(23):
            n = task_id * 23 + i
            yield {"id": n, "name": f"row {n}"}
"""
SIZES = [5, 5, 5, 5, 3]
DAMAGED = "the dataset is damaged (recordmill verify tells more)"


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("files")
    return each_format(root, SOURCE, partitions=2, row_group_size=5, workers=0)


def files_of(path: Path, change=None, checksums: bool = True) -> Files:
    """The files of the dataset at ``path``, opened against its manifest as ``change`` leaves it."""
    store = Store.at(str(path))
    manifest = copy.deepcopy(manifest_file.load(store))
    if change is not None:
        change(manifest)
    return Files(store, manifest, checksums)


def groups_of(size: int):
    """A change that makes the manifest say row groups of ``size`` rows."""

    def change(manifest):
        manifest["settings"]["row_group_size"] = size
        for entry in manifest["partitions"]:
            entry["row_groups"] = -(-entry["rows"] // size)

    return change


def unlisted(manifest):
    """The manifest of an older layout: no partition records its row groups."""
    for entry in manifest["partitions"]:
        entry.update(row_groups=None, group_offsets=None, group_crc32c=None)


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_the_row_group_map_numbers_every_row_across_groups_and_partitions(datasets, fmt):
    files = files_of(datasets[fmt]).ready()
    assert [(g.partition, g.index, g.rows) for g in files.groups] == [
        (p, i, n) for p in (0, 1) for i, n in enumerate(SIZES)
    ]
    assert files.index.total == 46
    places = [(g, row) for g, group in enumerate(files.groups) for row in range(group.rows)]
    assert [files.locate(row) for row in range(46)] == places
    assert files.entry(4)["file"] == f"part-00000-of-00002.{fmt}"
    assert files.entry(5)["file"] == f"part-00001-of-00002.{fmt}"
    ids = [i for g in range(len(files.groups)) for i in files.read(g, ["id"]).column(0).to_pylist()]
    assert ids == list(range(46))
    # Where the manifest does not record the groups, each file's footer gives the same map.
    footers = files_of(datasets[fmt], unlisted).ready()
    assert footers.groups == files.groups and footers._starts == files._starts
    assert group_rows(footers.handle(1)) == SIZES


def test_a_parquet_file_of_other_row_groups_is_refused_naming_both(datasets):
    path = datasets["parquet"]
    name = f"{path}/part-00000-of-00002.parquet"
    found = "23 rows in 5 row groups (5, 5, 5, 5, ...) found"
    for change, expected in [
        (groups_of(4), "23 rows in 6 row groups (4, 4, 4, 4, ...) expected"),
        (groups_of(6), "23 rows in 4 row groups (6, 6, 6, 5) expected"),  # four: no "..."
        (
            lambda m: m["partitions"][0].update(rows=24),
            "24 rows in 5 row groups (5, 5, 5, 5, ...) expected",
        ),
    ]:
        files = files_of(path, change).ready()  # the manifest's groups: no file read yet
        line = refused(lambda files=files: files.handle(0), OutputError)
        assert line == f"{name} does not match the manifest ({found}, {expected}): {DAMAGED}"
    files = files_of(path, lambda m: (unlisted(m), m["partitions"][0].update(rows=22)))
    line = refused(files.ready, OutputError)  # the footers read for the map, and checked
    assert line == f"{name} does not match the manifest ({found}, 22 rows expected): {DAMAGED}"


def test_an_arrow_file_of_other_record_batches_is_refused_naming_both(datasets):
    path = datasets["arrow"]
    name = f"{path}/part-00000-of-00002.arrow"
    for size, count in [(4, 6), (6, 4)]:
        files = files_of(path, groups_of(size)).ready()
        line = refused(lambda files=files: files.handle(0), OutputError)
        assert line == (
            f"{name} does not match the manifest (5 record batches found, {count} record "
            f"batches expected): {DAMAGED}"
        )
    # As many batches as the manifest says, the last one short: refused when it is read.
    files = files_of(path, lambda m: m["partitions"][0].update(rows=24)).ready()
    assert files.read(3, ["id"]).num_rows == 5
    assert refused(lambda: files.read(4, ["id"]), OutputError) == (
        f"{name}, record batch 4, holds 3 rows, the manifest says 4: {DAMAGED}"
    )
    files = files_of(path, lambda m: (unlisted(m), m["partitions"][1].update(rows=22)))
    assert refused(files.ready, OutputError) == (
        f"{path}/part-00001-of-00002.arrow does not match the manifest (23 rows in 5 row groups "
        f"(5, 5, 5, 5, ...) found, 22 rows expected): {DAMAGED}"
    )


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
@pytest.mark.parametrize("listed", [True, False])
def test_a_file_of_another_schema_is_refused_never_cast(datasets, fmt, listed):
    other = pa.schema([("id", pa.int64(), False), ("name", pa.large_string(), False)])

    def change(manifest):
        manifest["schema"]["arrow"] = base64.b64encode(other.serialize().to_pybytes()).decode()
        if not listed:
            unlisted(manifest)

    files = files_of(datasets[fmt], change)
    line = refused(lambda: files.ready().handle(0), OutputError)  # (or at ready(): unlisted)
    assert line == (
        f"{datasets[fmt]}/part-00000-of-00002.{fmt} does not match the manifest (another schema "
        f"found, the manifest's expected): {DAMAGED}"
    )


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_a_file_of_another_size_is_refused_when_opened(datasets, fmt):
    name = f"part-00001-of-00002.{fmt}"
    size = (datasets[fmt] / name).stat().st_size
    for said in (size + 1, size - 1):  # shorter than the manifest says, and longer
        line = refused(
            lambda said=said: files_of(
                datasets[fmt], lambda m: m["partitions"][1].update(bytes=said)
            ),
            OutputError,
        )
        assert line == (
            f"{datasets[fmt]}/{name} holds {size} bytes, the manifest says {said}: the dataset "
            "was replaced while it was read (open it again), or it is damaged (recordmill verify "
            "tells more)"
        )


def test_a_manifest_whose_group_count_disagrees_with_its_rows_is_refused(datasets):
    path = datasets["arrow"]
    files = files_of(path, lambda m: m["partitions"][1].update(row_groups=4))
    assert refused(files.ready, OutputError) == (
        f"the manifest of {path} is damaged: part-00001-of-00002.arrow has 23 rows in 4 row "
        "groups of 5 (recordmill verify tells more)"
    )


def test_a_manifest_whose_total_is_not_its_partitions_is_refused(datasets, tmp_path):
    shutil.copytree(datasets["parquet"], tmp_path / "copy")
    edit_manifest(tmp_path / "copy", lambda m: m.update(total_rows=47))
    line = refused(lambda: open_files(Store.at(str(tmp_path / "copy")), True), OutputError)
    assert line == (
        f"the manifest of {tmp_path / 'copy'} is damaged: total_rows is 47, its partitions hold "
        "46 (recordmill verify tells more)"
    )


def test_a_damaged_parquet_row_group_is_refused_naming_it(datasets, tmp_path):
    copied = shutil.copytree(datasets["parquet"], tmp_path / "copy")
    entry = manifest_file.load(Store.at(str(copied)))["partitions"][0]
    end = entry["group_offsets"][2]  # where row group 1 ends
    part = copied / entry["file"]
    data = bytearray(part.read_bytes())
    data[end - 4] ^= 0xFF  # a byte of row group 1's last page
    part.write_bytes(bytes(data))
    files = files_of(copied).ready()
    assert files.read(0, ["id"]).column(0).to_pylist() == [0, 1, 2, 3, 4]
    line = refused(lambda: files.read(1, ["id", "name"]), OutputError)
    assert line.startswith(f"{part}, row group 1, is damaged: ")
    assert line.endswith(" (recordmill verify tells more)") and "\n" not in line
    assert files.read(2, ["id"]).column(0).to_pylist() == [10, 11, 12, 13, 14]


def test_arrow_checksums_are_checked_once_a_process_unless_asked_again(datasets):
    path = datasets["arrow"]

    def recorded(bad: int | None):
        def change(manifest):  # each batch's column checksums, as older layouts recorded them
            for p, entry in enumerate(manifest["partitions"]):
                reader = files_of(path).handle(p)
                sums = [batch_crc32(reader.get_batch(i)) for i in range(reader.num_record_batches)]
                if bad is not None and p == 1:
                    sums[2][bad] ^= 1
                entry["batch_crc32"] = sums

        return change

    files = files_of(path, recorded(None)).ready()
    for g in range(len(files.groups)):
        files.verify(g, files.read(g, ["id", "name"]))
    for column, name in enumerate(["id", "name"]):
        files = files_of(path, recorded(column)).ready()
        files.verify(7, files.read(7, ["id"] if column else ["name"]))  # the other column: intact
        both = files.read(7, ["id", "name"])  # the one checked already, then the damaged one
        line = refused(lambda files=files, both=both: files.verify(7, both), OutputError)
        assert line == (
            f"{path}/part-00001-of-00002.arrow, record batch 2, column {name!r}: its checksum "
            "does not match the manifest: the file is damaged, or was replaced while it was read "
            "(recordmill verify tells more)"
        )
    files = files_of(path, recorded(None)).ready()
    files.verify(7, files.read(7, ["id"]))
    changed = files.read(8, ["id"])  # another batch's values, checked as group 7's
    files.verify(7, changed)  # checked once: not again
    with pytest.raises(OutputError, match="record batch 2, column 'id': its checksum"):
        files.verify(7, changed, again=True)
    files_of(path, recorded(0), checksums=False).ready().verify(7, changed)


def test_a_structure_check_refuses_offsets_outside_the_buffers_not_bad_text():
    def strings(kind, offsets, data):
        width = np.int64 if kind in (pa.large_string(), pa.large_binary()) else np.int32
        buffers = [None, pa.py_buffer(np.array(offsets, width).tobytes()), pa.py_buffer(data)]
        return pa.Array.from_buffers(kind, len(offsets) - 1, buffers)

    for kind in (pa.string(), pa.large_string(), pa.binary(), pa.large_binary()):
        check_structure(pa.record_batch([strings(kind, [0, 2, 3], b"\xff\xfeA")], ["t"]), "here")
        bad = pa.record_batch([pa.array([1, 2]), strings(kind, [0, 3, 1], b"abc")], ["i", "t"])
        line = refused(lambda bad=bad: check_structure(bad, "a batch"), OutputError)
        assert line.startswith("a batch is damaged: ") and "\n" not in line
        assert line.endswith(" (recordmill verify tells more)")


def test_the_open_file_limit_is_raised_as_far_as_the_hard_limit_and_half_is_pinned(tmp_path):
    if sys.platform != "linux":
        pytest.skip("the limits of open files are Linux's here")
    many = written(tmp_path, FORTY, partitions=40, workers=0)
    shown = python_prints(
        textwrap.dedent(
            f"""
            import os, resource
            from recordmill.dataset.storage import Store
            from recordmill.read.files import _allow_open_files, open_files
            limit = resource.RLIMIT_NOFILE

            def pinned(hard):  # 40 partitions: 2 * 40 + 256 files asked for
                resource.setrlimit(limit, (64, hard))
                files = open_files(Store.at({str(many)!r}), True)
                print(len(files._pinned), resource.getrlimit(limit))
                return files

            files = pinned(1000)
            hog = []  # every file this process may open, open: a map takes one more
            while True:
                try:
                    hog.append(open(os.devnull))
                except OSError:
                    break
            try:
                files.mapped(0)
            except Exception as e:
                print(type(e).__name__, e)
            for f in hog:
                f.close()
            del files  # (its files closed)
            resource.setrlimit(limit, (64, 200))
            for count in (50, 64, 100, 300):
                print(count, _allow_open_files(count), resource.getrlimit(limit))
            pinned(64)
            """
        )
    )
    assert shown.splitlines() == [
        "40 (336, 1000)",  # every partition pinned
        f"OutputError cannot open {many}/part-00000-of-00040.parquet: too many open files (the "
        "dataset has 40 partitions; the process may open 336 files: ulimit -n)",
        "50 64 (64, 200)",  # enough already: left as it is
        "64 64 (64, 200)",
        "100 100 (100, 200)",  # raised to what is asked
        "300 200 (200, 200)",  # as far as the hard limit
        "32 (64, 64)",  # half of what the process may open
    ]


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_the_map_and_the_readers_are_made_once_a_process(datasets, fmt):
    files = files_of(datasets[fmt]).ready()
    groups, handle = files.groups, files.handle(1)
    assert files.ready().groups is groups and files.handle(1) is handle
    # Arrow IPC memory-mapped where it lies (a row costs its bytes); Parquet read with pread
    mapped = isinstance(files.raw(1), pa.MemoryMappedFile)
    assert mapped == (fmt == "arrow")


def test_a_partition_is_mapped_once_whole(datasets, monkeypatch):
    from recordmill.read import files as module

    path = datasets["arrow"]
    files = files_of(path).ready()
    whole = (path / "part-00001-of-00002.arrow").read_bytes()
    view = files.mapped(1)
    assert bytes(view) == whole and files.mapped(1) is view
    # pyarrow 19 and 20 have no working OSFile.fileno(): the file is mapped by its name
    files = files_of(path).ready()

    class NoFileno:
        def fileno(self):
            raise AttributeError("fileno")

    monkeypatch.setattr(files, "raw", lambda partition: NoFileno())
    assert bytes(files.mapped(1)) == whole

    def failing(error):
        def mapped(*args):
            raise OSError(error, os.strerror(error))

        return mapped

    monkeypatch.setattr(module, "_mapped", failing(errno.EMFILE))
    line = refused(lambda: files_of(path).ready().mapped(0), OutputError)
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert line == (
        f"cannot open {path}/part-00000-of-00002.arrow: too many open files (the dataset has 2 "
        f"partitions; the process may open {soft:,} files: ulimit -n)"
    )
    monkeypatch.setattr(module, "_mapped", failing(errno.EIO))
    with pytest.raises(OSError) as raised:  # another error: as it is
        files_of(path).ready().mapped(0)
    assert raised.value.errno == errno.EIO


def test_an_arrow_batch_whose_offsets_point_outside_its_buffers_is_refused(datasets, tmp_path):
    copied = shutil.copytree(datasets["arrow"], tmp_path / "copy")
    part = copied / "part-00001-of-00002.arrow"
    reader = pa.ipc.open_file(pa.memory_map(str(part)))
    batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
    names = batches[2].column("name")
    end = int(np.frombuffer(names.buffers()[1], np.int32)[len(names)])
    offsets = pa.py_buffer(np.array([0] + [100_000] * (len(names) - 1) + [end], np.int32))
    forged = pa.Array.from_buffers(pa.string(), len(names), [None, offsets, names.buffers()[2]])
    batches[2] = pa.RecordBatch.from_arrays([batches[2].column("id"), forged], schema=reader.schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, reader.schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    (copied / "forged").write_bytes(sink.getvalue().to_pybytes())
    os.replace(copied / "forged", part)
    size = part.stat().st_size
    files = files_of(copied, lambda m: m["partitions"][1].update(bytes=size)).ready()
    assert files.read(7, ["id"]).column(0).to_pylist() == [33, 34, 35, 36, 37]  # not asked for
    line = refused(lambda: files.read(7, ["id", "name"]), OutputError)
    assert line.startswith(f"{part}, record batch 2 is damaged: ") and "\n" not in line
    assert line.endswith(" (recordmill verify tells more)")


def test_a_damaged_file_is_refused_by_open_files_as_it_is(datasets, tmp_path):
    copied = shutil.copytree(datasets["parquet"], tmp_path / "copy")
    part = copied / "part-00001-of-00002.parquet"
    size = part.stat().st_size
    part.write_bytes(part.read_bytes()[:-10])  # the same version all along: the file's fault
    line = refused(lambda: open_files(Store.at(str(copied)), True), OutputError)
    assert line.startswith(f"{part} holds {size - 10} bytes, the manifest says {size}: ")


def test_a_dataset_of_no_rows_has_no_groups(tmp_path):
    path = written(tmp_path, EMPTY, workers=0)  # (no task at all)
    files = open_files(Store.at(str(path)), True).ready()
    assert files.groups == [] and files.index.total == 0 and files._starts == [0]
