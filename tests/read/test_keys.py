"""Every field a key names matters: the record of checked files (read/machine/checked.py) and the
disk cache's folder of one dataset version (read/machine/cache.py), each field changed alone.
A field dropped from a key would let a file changed since, or another version's parts, pass as
the one checked or cached."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from recordmill.read.machine import cache, checked

STAT = {"st_dev": 1, "st_ino": 2, "st_size": 3, "st_mtime_ns": 4, "st_ctime_ns": 5}


@pytest.mark.parametrize("field", [*STAT, "checksum", "path"])
def test_every_field_of_a_checked_files_key_changes_it(tmp_path, field):
    path, checksum = tmp_path / "part-0.parquet", "ab" * 32

    def key(**change):
        info = SimpleNamespace(**{**STAT, **{k: v for k, v in change.items() if k in STAT}})
        return checked.file_key(change.get("path", path), change.get("checksum", checksum), info)

    assert key() == key() is not None  # (settled: its times are long past)
    changed = {"checksum": "cd" * 32, "path": tmp_path / "other.parquet"}.get(field, 99)
    assert key(**{field: changed}) != key()


def files(root: str, entries: list[tuple[str, str]]) -> SimpleNamespace:
    store = type("Store", (), {"name": "ds", "__str__": lambda self: root})()
    return SimpleNamespace(
        store=store, manifest={"partitions": [{"file": f, "checksum": c} for f, c in entries]}
    )


@pytest.mark.parametrize(
    "change",
    [
        ("s3://b/other", [("part-0", "a1"), ("part-1", "b2")]),  # another place
        ("s3://b/ds", [("part-0", "a1"), ("part-1", "b3")]),  # a partition rewritten
        ("s3://b/ds", [("part-0", "a1"), ("part-2", "b2")]),  # another file, the same bytes
        ("s3://b/ds", [("part-0", "a1")]),  # a partition fewer
    ],
)
def test_every_field_of_a_cached_versions_key_changes_it(change):
    base = cache._version_key(files("s3://b/ds", [("part-0", "a1"), ("part-1", "b2")]))
    assert base == cache._version_key(files("s3://b/ds", [("part-0", "a1"), ("part-1", "b2")]))
    assert cache._version_key(files(*change)) != base
