"""Writing each byte once: plugins that announce their row counts (task_rows) get partitions
made straight from their rows, the same files as through staged fragments."""

from __future__ import annotations

import numpy as np
import pytest

import recordmill
from recordmill.direct import plan
from recordmill.verify import verify
from tests.conftest import make_plugin

PLUGIN = """
    import numpy as np

    SIZES = [5, 0, 12, 3, 9]

    def add_options(parser):
        parser.add_argument("--announce", default="yes")  # yes, no, or "wrong"

    def task_number():
        return len(SIZES)

    def task_rows(task_id, options):
        if options.announce == "no":
            return None
        if options.announce == "wrong" and task_id == 2:
            return SIZES[2] + 1
        return SIZES[task_id]

    def schema():
        return {"id": {"type": "int64"}, "name": {"type": "string"},
                "x": {"type": "float32", "shape": [40]}}

    def dict_data(task_id):
        first = sum(SIZES[:task_id])
        for i in range(SIZES[task_id]):
            n = first + i
            yield {"id": n, "name": f"row {n}", "x": np.full(40, n, dtype=np.float32)}
"""
TOTAL = 29


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    return make_plugin(tmp_path_factory.mktemp("direct") / "counted", PLUGIN)


def write(plugin, out, announce="yes", **settings):
    return recordmill.write(
        plugin,
        out,
        options={"announce": announce},
        partitions=settings.pop("partitions", 4),
        row_group_size=4,
        progress=False,
        **settings,
    )


def checksums(summary):
    return [p["checksum"] for p in summary.manifest["partitions"]]


def test_the_plan_balances_partitions_over_tasks():
    parts = plan([5, 0, 12, 3, 9], 4)
    assert [(lo, hi) for lo, hi, _ in parts] == [(0, 8), (8, 15), (15, 22), (22, 29)]
    first = parts[0][2]
    assert [(s.task_id, s.first, s.end) for s in first] == [(0, 0, 5), (2, 0, 3)]
    assert [(s.task_id, s.first, s.end) for s in parts[2][2]] == [(2, 10, 12), (3, 0, 3), (4, 0, 2)]
    assert sum(s.end - s.first for _, _, segments in parts for s in segments) == 29


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_the_same_files_as_through_staged_fragments_whatever_the_workers(plugin, tmp_path, fmt):
    staged = write(plugin, tmp_path / "staged", announce="no", format=fmt)
    direct = write(plugin, tmp_path / "direct", format=fmt, workers=2)
    one = write(plugin, tmp_path / "one", format=fmt, workers=1)
    assert "tasks" in staged.phases and "rows straight to partitions" in direct.phases
    assert checksums(direct) == checksums(staged) == checksums(one)
    assert direct.manifest["tasks"] == staged.manifest["tasks"]
    rows = recordmill.open(str(tmp_path / "direct")).to_arrow()
    assert rows["id"].to_pylist() == list(range(TOTAL))
    assert [p["rows"] for p in direct.manifest["partitions"]] == [8, 7, 7, 7]
    assert verify(tmp_path / "direct") == []


def test_more_partitions_than_rows(plugin, tmp_path):
    summary = write(plugin, tmp_path / "many", partitions=40)
    assert [p["rows"] for p in summary.manifest["partitions"]].count(1) == TOTAL
    ds = recordmill.open(str(tmp_path / "many"))
    assert [ds[i]["id"] for i in range(TOTAL)] == list(range(TOTAL))
    assert ds[7]["x"].tolist() == list(np.full(40, 7, dtype=np.float32))


def test_a_wrong_count_fails_naming_the_task_and_writes_nothing(plugin, tmp_path):
    with pytest.raises(recordmill.RecordmillError) as e:
        write(plugin, tmp_path / "wrong", announce="wrong", partitions=2)
    assert "task 2 failed: task_rows() announced 13 rows, dict_data() yielded 12" in str(e.value)
    assert not (tmp_path / "wrong").exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith("-lock")] == []


def test_a_shuffle_or_a_skip_policy_takes_the_staged_path(plugin, tmp_path):
    shuffled = write(plugin, tmp_path / "shuffled", shuffle=True, seed=1)
    skipping = write(plugin, tmp_path / "skipping", on_bad_input="skip")
    assert "tasks" in shuffled.phases and "tasks" in skipping.phases
