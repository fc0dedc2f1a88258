"""recordmill verify, info and head on real datasets, intact and damaged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

import recordmill
from recordmill.read.verify import verify
from tests.conftest import COUNTING_PLUGIN, edit_manifest, make_plugin, recordmill_here


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("v")
    plugin = make_plugin(root / "counting", COUNTING_PLUGIN)
    recordmill.write(
        plugin, root / "ds", options={"sizes": "40,0,25"}, partitions=3, progress=False
    )
    return root / "ds"


@pytest.fixture
def copy(written, tmp_path):
    target = tmp_path / "ds"
    shutil.copytree(written, target)
    return target


def cli(*args):
    """``recordmill ARGS`` by ``main()`` in this process (the first test's as a real one)."""
    return recordmill_here(*args)


def test_an_intact_dataset_verifies(written):
    assert verify(written) == []
    result = subprocess.run(
        [sys.executable, "-m", "recordmill", "verify", str(written)], capture_output=True, text=True
    )
    assert result.returncode == 0 and "ok: 65 rows in 3 partitions" in result.stdout


def test_truncated(copy):
    part = copy / "part-00001-of-00003.parquet"
    part.write_bytes(part.read_bytes()[:-100])
    problems = verify(copy)
    assert any(
        "part-00001-of-00003.parquet: " in p and "truncated or altered" in p for p in problems
    )
    assert any("cannot be read" in p for p in problems)
    result = cli("verify", copy)
    assert result.returncode == 1 and "part-00001-of-00003.parquet" in result.stdout


def test_flipped_bytes_keep_the_size_but_not_the_checksum(copy):
    part = copy / "part-00000-of-00003.parquet"
    data = bytearray(part.read_bytes())
    data[40] ^= 0xFF  # inside the first column chunk, not the footer
    part.write_bytes(bytes(data))
    assert verify(copy) == [
        f"part-00000-of-00003.parquet: checksum {recordmill.dataset.storage.Store.at(part.parent).sha256(part.name)} does not match "
        f"the manifest's {recordmill.read_manifest(copy)['partitions'][0]['checksum']}"
    ]


def test_deleted_and_extra_files(copy):
    (copy / "part-00002-of-00003.parquet").rename(copy / "part-00009-of-00009.parquet")
    problems = verify(copy)
    assert "part-00002-of-00003.parquet: missing" in problems
    assert "part-00009-of-00009.parquet: a partition file the manifest does not list" in problems


def test_a_wrong_manifest(copy):
    def change(manifest):
        manifest["total_rows"] = 66
        manifest["partitions"][1]["rows"] = 99

    edit_manifest(copy, change)
    problems = verify(copy)
    assert "manifest: partitions hold 142 rows, total_rows says 66" in problems
    assert "part-00001-of-00003.parquet: 22 rows, the manifest says 99" in problems
    (copy / "_manifest.parquet").write_bytes(b"PAR1 not a manifest")
    assert verify(copy)[0].startswith("manifest: ")


def test_the_reader_refuses_a_partition_whose_rows_disagree(copy):
    edit_manifest(copy, lambda manifest: manifest["partitions"][0].update(rows=5))
    with pytest.raises(recordmill.OutputError, match="total_rows is 65, its partitions hold 48"):
        recordmill.open(str(copy))

    def fewer_rows(manifest):
        manifest["partitions"][0]["rows"] = 5
        manifest["total_rows"] = 48

    edit_manifest(copy, fewer_rows)
    with pytest.raises(
        recordmill.OutputError,
        match=r"\(22 rows in 1 row groups \(22\) found, 5 rows in 1 row groups \(5\) expected\)",
    ):
        recordmill.open(str(copy))[0]


def test_info_and_head(written):
    result = cli("info", written)
    assert result.returncode == 0
    assert "65 rows in 3 parquet partitions" in result.stdout
    assert "plugin counting (path): sizes='40,0,25'" in result.stdout
    assert (
        "  task: int64" in result.stdout and "part-00002-of-00003.parquet  21 rows" in result.stdout
    )
    result = cli("head", written, "-n", "2", "--columns", "name,i")
    assert result.stdout.splitlines() == ["[0] name='t0-0', i=0", "[1] name='t0-1', i=1"]
    result = cli("head", written.parent / "nothing")
    assert result.returncode == 1 and "not a recordmill dataset" in result.stderr


def test_the_reader_reports_a_flipped_byte_instead_of_wrong_data(copy):
    part = copy / "part-00000-of-00003.parquet"
    data = bytearray(part.read_bytes())
    meta = pq.ParquetFile(part).metadata
    column = meta.row_group(0).column(2)  # the "name" strings
    start = column.dictionary_page_offset or column.data_page_offset
    data[start + column.total_compressed_size - 3] ^= 0xFF  # inside the column's last page
    part.write_bytes(bytes(data))
    ds = recordmill.open(str(copy))
    with pytest.raises(
        recordmill.OutputError,
        match=r"part-00000-of-00003.parquet, row group 0, is damaged: .* \(recordmill verify tells more\)$",
    ):
        ds.to_arrow()
    assert any("checksum" in p for p in verify(copy))


def test_row_groups_other_than_the_manifest_says(copy):
    def other_groups(manifest):  # the groups' offsets and checksums left out, as older ones
        manifest["settings"]["row_group_size"] = 2
        for p in manifest["partitions"]:
            p.update(row_groups=-(-p["rows"] // 2), group_offsets=None, group_crc32c=None)

    edit_manifest(copy, other_groups)
    problems = verify(copy)
    assert problems and all("row groups, the manifest says" in p for p in problems)


def test_the_tasks_rows_are_checked_against_the_total(copy):
    edit_manifest(copy, lambda manifest: manifest["tasks"][0].update(rows=39))
    assert verify(copy) == ["manifest: tasks hold 64 rows, total_rows says 65"]


def test_the_schema_of_each_partition_is_checked(copy):
    table = pq.read_table(copy / "part-00000-of-00003.parquet")
    renamed = table.rename_columns([f"{n}_renamed" for n in table.column_names])
    pq.write_table(renamed, copy / "part-00000-of-00003.parquet")
    assert "part-00000-of-00003.parquet: its schema differs from the manifest's" in verify(copy)


def test_the_rejects_count_is_checked(tmp_path):
    plugin = make_plugin(tmp_path / "bad", BAD_ROWS)
    recordmill.write(plugin, tmp_path / "ds", on_bad_input="skip", progress=False)
    assert verify(tmp_path / "ds") == []
    edit_manifest(tmp_path / "ds", lambda manifest: manifest["rejects"].update(count=3))
    assert verify(tmp_path / "ds") == ["rejects: 2 listed, the manifest counts 3"]


BAD_ROWS = """
    def task_number():
        return 1

    def schema():
        return {"x": {"type": "uint8"}}

    def dict_data(task_id):
        for x in (1, 300, 2, -1, 3):
            yield {"x": x}
"""


def test_a_history_that_lists_other_checksums_with_the_same_rows_is_named(copy):
    def swap(manifest):
        entry = manifest["history"][0]
        entry["checksums"] = [c[::-1] for c in entry["checksums"]]  # rows and files the same

    edit_manifest(copy, swap)
    problems = verify(copy)
    assert problems == [
        "manifest: version 1's partitions have other checksums than its history lists (the same "
        "rows and files): files of another history"
    ]


def test_a_history_that_counts_other_rows_is_named(copy):
    edit_manifest(copy, lambda manifest: manifest["history"][0].update(rows=64))
    assert verify(copy) == [
        "manifest: version 1's partitions hold 65 rows in 3 files, its history says 64 rows in 3 "
        "files"
    ]


def test_each_problem_of_a_partition_is_its_whole_line(copy):
    name = "part-00001-of-00003.parquet"
    size = (copy / name).stat().st_size
    (copy / name).write_bytes((copy / name).read_bytes()[:-100])
    problems = verify(copy)
    assert problems[0] == (
        f"{name}: {size - 100} bytes, the manifest says {size} (truncated or altered)"
    )
    assert problems[1].startswith(f"{name}: checksum ") and problems[1].endswith(
        "does not match the manifest's "
        + recordmill.read_manifest(copy)["partitions"][1]["checksum"]
    )
    assert problems[2].startswith(f"{name}: cannot be read: ")
    assert len(problems) == 3


def test_a_partition_of_an_unfinished_append_and_a_history_out_of_order_are_named(copy):
    shutil.copy(copy / "part-00000-of-00003.parquet", copy / "part-v0002-00000-of-00001.parquet")
    assert verify(copy) == [
        "part-v0002-00000-of-00001.parquet: a partition of version 2, which is not published "
        "(an append that did not finish: recordmill write --append --resume finishes it)"
    ]
    (copy / "part-v0002-00000-of-00001.parquet").unlink()
    edit_manifest(copy, lambda manifest: manifest["history"][0].update(version=2))
    assert verify(copy) == ["manifest: version 1, but its history has [2]"]


def test_partitions_listed_out_of_version_order_are_named(copy):
    def two_versions(manifest):
        parts = manifest["partitions"]
        parts[0]["version"] = 2  # listed first, added by version 2
        first, second = parts[1:], parts[:1]
        entry = manifest["history"][0]
        manifest["history"] = [
            {
                **entry,
                "rows": sum(p["rows"] for p in first),
                "partitions": 2,
                "checksums": [p["checksum"] for p in first],
            },
            {
                **entry,
                "version": 2,
                "rows": second[0]["rows"],
                "partitions": 1,
                "checksums": [second[0]["checksum"]],
            },
        ]
        manifest["version"] = 2

    edit_manifest(copy, two_versions)
    assert verify(copy) == ["manifest: the partitions are not listed version by version"]


def test_a_rejects_file_that_cannot_be_read_is_named(tmp_path):
    plugin = make_plugin(tmp_path / "bad", BAD_ROWS)
    recordmill.write(plugin, tmp_path / "ds", on_bad_input="skip", progress=False)
    (tmp_path / "ds" / "_rejects.parquet").write_bytes(b"not parquet")
    problems = verify(tmp_path / "ds")
    assert len(problems) == 1
    assert problems[0].startswith(f"rejects: {tmp_path / 'ds'}/_rejects.parquet cannot be read: ")


def test_a_partition_that_is_not_a_regular_file_is_named_by_its_name(copy):
    name = "part-00002-of-00003.parquet"
    (copy / name).unlink()
    os.mkfifo(copy / name)  # read by a process of its own: a hang ends as a failure
    command = [sys.executable, "-m", "recordmill", "verify", str(copy)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    line = (
        f"{name}: is not a regular file (a FIFO, a device or a folder): a dataset's files are "
        "regular files in its folder"
    )
    assert result.returncode == 1 and result.stdout.splitlines() == [f"{copy}/{line}"]


def test_row_groups_other_than_the_manifest_says_are_named_whole(copy):
    def other_groups(manifest):
        manifest["settings"]["row_group_size"] = 2
        for p in manifest["partitions"]:
            p.update(row_groups=-(-p["rows"] // 2), group_offsets=None, group_crc32c=None)

    edit_manifest(copy, other_groups)
    rows = recordmill.read_manifest(copy)["partitions"][0]["rows"]
    assert verify(copy)[0] == (
        f"part-00000-of-00003.parquet: 1 row groups, the manifest says {-(-rows // 2)} of "
        "2 rows (the last smaller)"
    )
