"""dataset/versions.py on manifests built as runs build them: a history of appends, each
version read back as the dataset was when it was current, and what identifies its rows."""

from __future__ import annotations

import hashlib

import pytest

from recordmill.dataset import versions
from recordmill.dataset.manifest import task_entries
from recordmill.errors import OutputError


def run(n: int, rows: list[int], tasks: list[list[int]], rejected: int = 0) -> dict:
    """The manifest a run builds for its own partitions (run ``n``)."""
    return {
        "schema": f"schema {n}",
        "created": f"day {n}",
        "plugin": {"name": f"plugin {n}"},
        "settings": {"run": n},
        "versions": {"recordmill": f"0.{n}"},
        "partitions": [
            {"file": f"part {n}.{i}", "rows": r, "checksum": f"sum {n}.{i}"}
            for i, r in enumerate(rows)
        ],
        "total_rows": sum(rows),
        "tasks": task_entries(tasks),
        "rejects": {"count": rejected, "file": f"_rejects-{n}" if rejected else None},
    }


RUNS = [
    run(1, [3, 2], [[1, 5]], rejected=2),
    run(2, [4], [[4, 1], [0, 2]]),
    run(3, [1, 1, 1], [[3, 1]], rejected=1),
]


def history_of(runs: list[dict]) -> list[dict]:
    """The manifest after each run: the first written, the others appended."""
    manifests = [versions.first(runs[0])]
    for own in runs[1:]:
        manifests.append(versions.appended(manifests[-1], own))
    return manifests


def test_each_version_adds_its_runs_partitions_rows_tasks_and_rejects_after_the_others():
    one, two, three = history_of(RUNS)
    assert [versions.current(m) for m in (one, two, three)] == [1, 2, 3]
    assert [p["version"] for p in three["partitions"]] == [1, 1, 2, 3, 3, 3]
    assert [p["file"] for p in three["partitions"]] == [
        "part 1.0",
        "part 1.1",
        "part 2.0",
        "part 3.0",
        "part 3.1",
        "part 3.2",
    ]
    assert three["total_rows"] == 12 and three["schema"] == "schema 1"
    assert [t["task_id"] for t in three["tasks"]] == list(range(9))
    assert [t["rows"] for t in three["tasks"]] == [1] * 5 + [4, 0, 0, 3]
    assert three["rejects"] == {
        "count": 3,
        "file": "_rejects-1",
        "files": ["_rejects-1", "_rejects-3"],
    }
    assert three["plugin"] == {"name": "plugin 3"} and three["created"] == "day 3"
    entry = three["history"][1]
    assert entry == {
        "version": 2,
        "created": "day 2",
        "rows": 4,
        "partitions": 1,
        "tasks": 3,
        "rejects": {"count": 0, "file": None},
        "plugin": {"name": "plugin 2"},
        "settings": {"run": 2},
        "recordmill": "0.2",
        "checksums": ["sum 2.0"],
    }
    assert versions.latest_run(three)["version"] == 3
    assert [h["version"] for h in three["history"]] == [1, 2, 3]
    assert [h["tasks"] for h in three["history"]] == [5, 3, 1]
    assert one["version"] == 1 and one["history"][0]["version"] == 1
    assert versions.rejects_files(three) == ["_rejects-1", "_rejects-3"]


def test_a_version_read_back_is_the_dataset_as_it_was_when_current():
    manifests = history_of(RUNS)
    latest = manifests[-1]
    for version, then in enumerate(manifests, 1):
        back = versions.at_version(latest, version)
        for key in ("total_rows", "partitions", "tasks", "plugin", "settings", "created"):
            assert back[key] == then[key], (version, key)
        assert back["version"] == version and back["history"] == then["history"]
        assert back["rejects"]["count"] == then["rejects"]["count"]
        assert versions.rejects_files(back) == versions.rejects_files(then)
        assert versions.fingerprint(back) == versions.fingerprint(then)
    assert versions.at_version(latest, None) is latest


def test_a_version_that_never_was_is_named_with_the_versions_there_are():
    latest = history_of(RUNS)[-1]
    with pytest.raises(
        OutputError, match=r"^the dataset has no version 9: its versions are 1 to 3 "
    ):
        versions.at_version(latest, 9)
    for version in (0, 4, -1):
        with pytest.raises(OutputError) as refused:
            versions.at_version(latest, version, where="out/xyz")
        assert str(refused.value) == (
            f"out/xyz has no version {version}: its versions are 1 to 3 (recordmill history "
            "out/xyz lists them)"
        )


def test_a_manifest_from_before_versions_is_version_one():
    old = run(1, [3, 2], [[1, 5]], rejected=2)
    assert versions.current(old) == 1 and versions.version_of(old["partitions"][0]) == 1
    assert versions.history(old) == [versions.entry(old, 1)]
    assert versions.rejects_files(old) == ["_rejects-1"]
    assert versions.rejects_files(run(1, [1], [[1, 1]])) == []
    appended = versions.appended(old, run(2, [4], [[4, 1]]))
    assert [p["version"] for p in appended["partitions"]] == [1, 1, 2]
    assert versions.at_version(appended, 1)["total_rows"] == 5


def test_the_fingerprint_names_the_rows_checksums_in_order():
    one = history_of(RUNS)[-1]
    other = {**one, "partitions": list(reversed(one["partitions"]))}
    assert versions.fingerprint(one) != versions.fingerprint(other)
    # The definition, fixed: loader states saved by one release name their rows by it
    text = "".join(f"{p['checksum']}\n" for p in one["partitions"]).encode()
    assert versions.fingerprint(one) == hashlib.sha256(text).hexdigest()[:16]
    same = {"partitions": [{"checksum": p["checksum"]} for p in one["partitions"]]}
    assert versions.fingerprint(same) == versions.fingerprint(one)


def test_tasks_past_the_listed_count_are_cut_by_runs():
    assert versions._cut([[1, 5], [2, 3]], 6) == [[1, 5], [2, 1]]
    assert versions._cut([[1, 5], [2, 3]], 5) == [[1, 5]]
    assert versions._cut([[1, 5]], 0) == []
    assert versions._runs([{"rows": 4, "count": 3}, {"rows": 1}]) == [[4, 3], [1, 1]]
