"""The page's words: the header from what the manifest holds, balance, classes."""

from __future__ import annotations

from collections import Counter

from recordmill.report import summary

MANIFEST = {
    "format": "parquet",
    "total_rows": 1234,
    "partitions": [{"file": "p0", "rows": 617, "bytes": 2_000_000}] * 2,
    "plugin": {"name": "imagenet", "source": "builtin", "options": {"image_dir": "/d"}},
    "settings": {"partitions": 2},
    "versions": {"recordmill": "0.1.0", "pyarrow": "25.0.1"},
    "created": "2026-11-25T00:00:00Z",
}


def test_the_header_says_what_the_manifest_holds_and_what_it_does_not():
    facts = dict(summary.header(MANIFEST))
    assert facts["rows"] == "1,234" and facts["partitions"] == "2"
    assert facts["size on disk"] == "4.0 MB of partitions"
    assert facts["plugin"] == "imagenet (builtin)" and facts["plugin options"] == "image_dir='/d'"
    assert facts["written by"] == "recordmill 0.1.0, pyarrow 25.0.1"
    assert "took" not in facts and "versions" not in facts


def test_a_grown_dataset_labels_the_latest_runs_facts_and_balances_each_version():
    grown = {
        **MANIFEST,
        "version": 2,
        "partitions": [
            *({"file": f"p{i}", "rows": 600, "bytes": 2_000_000, "version": 1} for i in range(2)),
            *({"file": f"a{i}", "rows": 17, "bytes": 60_000, "version": 2} for i in range(2)),
        ],
    }
    facts = dict(summary.header(grown))
    assert facts["plugin (version 2)"] == "imagenet (builtin)" and "plugin" not in facts
    assert facts["settings (version 2)"] == "partitions=2"
    assert summary.balance_by_version(grown["partitions"]) == (
        "version 1: balanced: rows 600 to 600, 2.0 MB to 2.0 MB; "
        "version 2: balanced: rows 17 to 17, 60.0 KB to 60.0 KB"
    )
    assert summary.balance([600, 600, 17], [2_000_000, 2_000_000, 60_000]).startswith("not")


def test_a_manifest_that_knows_its_duration_and_versions_shows_them():
    grown = {
        **MANIFEST,
        "elapsed_s": 12.25,
        "history": [{"version": 1, "rows": 1000}, {"version": 2, "rows": 234}],
    }
    facts = dict(summary.header(grown))
    assert facts["took"] == "12.2 s"
    assert facts["versions"] == "2: version 1, rows 1000; version 2, rows 234"


def test_balance():
    assert summary.balance([100, 101, 99], [10_000, 11_000, 9_000]).startswith("balanced")
    assert "rows differ" in summary.balance([100, 150], [10_000, 10_000])
    assert "bytes differ" in summary.balance([100, 100], [10_000, 20_000])
    assert summary.balance([5], [10]) == "1 partition: nothing to balance"


def test_classes_in_one_line():
    line = summary.classes(Counter({"a": 10, "b": 40}), nulls=2)
    assert line == "2 classes, 10 to 40 rows each, largest / smallest 4.00; 2 rows without a label"
    assert summary.classes(Counter(), 0) == "no labelled rows"


def test_numbers_and_sizes():
    assert summary.number(1234567) == "1,234,567" and summary.number(2.0) == "2"
    assert summary.number(0.123456) == "0.1235" and summary.number(None) == "-"
    assert summary.human_size(999) == "999 bytes" and summary.human_size(1500) == "1.5 KB"
