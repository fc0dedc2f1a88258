"""dataset/layout.py: the names recordmill writes, as its docstring lays them out, and the
properties readers count on (every version's partitions sort in order; a name is told whole)."""

from __future__ import annotations

import pytest

from recordmill.dataset import layout


def test_the_names_are_those_the_layout_documents():
    assert layout.FORMATS == ("parquet", "arrow")
    assert layout.manifest_file("parquet") == "_manifest.parquet"
    assert layout.rejects_file("arrow") == "_rejects.arrow"
    assert layout.rejects_file("parquet", 2) == "_rejects-v0002.parquet"
    assert layout.partition_file(0, 4, "parquet") == "part-00000-of-00004.parquet"
    assert layout.partition_file(1, 2, "arrow", 2) == "part-v0002-00001-of-00002.arrow"
    assert layout.partition_file(7, 123456, "parquet") == "part-000007-of-123456.parquet"
    assert layout.fragment_file(7) == "_tasks/task-000007.arrow"
    assert layout.task_record_file(7) == "_tasks/task-000007.json"
    assert layout.partition_record_file("part-00000-of-00004.parquet") == (
        "_parts/part-00000-of-00004.parquet.json"
    )
    assert layout.staging_folder("xyz") == ".xyz.recordmill-partial"
    assert layout.lock_file("xyz") == ".xyz.recordmill-lock"
    assert layout.lease_file("xyz") == ".xyz.recordmill-lease"
    assert layout.old_folder("xyz") == ".xyz.recordmill-old"
    assert layout.FAILED_MARK == "_tasks/failed.txt"
    assert layout.SCRATCH_DIRS == ("_tasks", "_parts")
    assert (layout.RUN_FILE, layout.REPLACED_MARK) == ("run.json", ".recordmill-replaced")
    assert (layout.OLD_MANIFEST, layout.MAX_VERSION) == ("manifest.json", 9999)


def test_every_partition_name_tells_its_version_and_sorts_in_version_order():
    names = []
    for version in (1, 2, 10, 999, layout.MAX_VERSION):
        for index in range(3):
            name = layout.partition_file(index, 3, "parquet", version)
            assert layout.partition_version(name) == version
            assert layout.PARTITION.fullmatch(name)
            names.append(name)
    assert sorted(names) == names


@pytest.mark.parametrize(
    "name",
    [
        "part-00000-of-00004.csv",
        "part-00000-of-00004.parquet\n",
        "x/part-00000-of-00004.parquet",
        "part-v-00000-of-00004.parquet",
        "part-00000-00004.parquet",
        "_manifest.parquet",
    ],
)
def test_a_name_that_is_not_a_partition_s_has_no_version(name):
    assert layout.partition_version(name) is None


def test_rejects_and_task_record_names_are_told_whole():
    assert layout.REJECTS.fullmatch(layout.rejects_file("parquet", 3))
    assert layout.REJECTS.fullmatch(layout.rejects_file("arrow"))
    assert not layout.REJECTS.fullmatch("_rejects-v0002.csv")
    assert not layout.REJECTS.fullmatch("x_rejects.parquet")
    assert layout.TASK_RECORD.fullmatch("task-000007.json")
    assert not layout.TASK_RECORD.fullmatch("task-000007.arrow")
    assert not layout.TASK_RECORD.fullmatch("task-.json")
