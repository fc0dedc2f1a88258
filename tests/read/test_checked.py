"""What a machine has checked (read/machine/checked.py): each row group's bytes summed once a machine,
whatever the processes reading them, counted across processes with ``RECORDMILL_CHECK_LOG``; and
a byte changed after its check still never comes back as data."""

from __future__ import annotations

import gc
import os
import time

import numpy as np
import pytest

import recordmill
from recordmill.read.machine import checked
from tests.conftest import make_plugin

torch = pytest.importorskip("torch")
import recordmill.torch as rt  # noqa: E402

PLUGIN = """
    import numpy as np

    def task_number():
        return 4

    def dict_data(task_id):
        for i in range(40):
            n = task_id * 40 + i
            yield {"id": n, "blob": np.full(3000 + n, n % 251, dtype=np.uint8).tobytes()}
"""
SETTLED = 0.3


@pytest.fixture
def arrow(tmp_path, monkeypatch):
    """A local Arrow IPC dataset whose files settled (older than ``SETTLED_NS``), a cache folder
    of the test's own and the check log."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(checked.CHECK_LOG_ENV, str(tmp_path / "checked.log"))
    monkeypatch.setattr(checked, "SETTLED_NS", int(SETTLED * 1e9))
    out = tmp_path / "out"
    plugin = make_plugin(tmp_path / "plugin", PLUGIN)
    recordmill.write(
        plugin, out, partitions=2, row_group_size=16, format="arrow", workers=0, progress=False
    )
    time.sleep(SETTLED + 0.05)
    return out


def group_bytes(out) -> int:
    parts = recordmill.read_manifest(out)["partitions"]
    return sum(p["group_offsets"][-1] - p["group_offsets"][0] for p in parts)


def logged(tmp_path) -> tuple[int, int]:
    """(bytes checked, processes that checked) since the log was last taken."""
    log = tmp_path / "checked.log"
    if not log.exists():
        return 0, 0
    lines = [line.split() for line in log.read_text().splitlines()]
    log.unlink()
    return sum(int(size) for _, size in lines), len({pid for pid, _ in lines})


def map_epoch(out, epoch: int, workers: int = 4) -> list[int]:
    loader = rt.DataLoader(rt.MapDataset(str(out)), batch_size=8, shuffle=True,
                           num_workers=workers)  # fmt: skip
    loader.set_epoch(epoch)
    return sorted(i for batch in loader for i in batch["id"].tolist())


def test_a_machine_checks_each_group_once_whatever_its_processes(arrow, tmp_path):
    total = group_bytes(arrow)
    assert map_epoch(arrow, 0) == list(range(160))
    checked_bytes, _ = logged(tmp_path)
    assert checked_bytes == total  # four workers, each reading rows of every group: once
    assert map_epoch(arrow, 1) == list(range(160))  # new workers: nothing checked again
    assert logged(tmp_path) == (0, 0)
    ds = recordmill.open(str(arrow))  # another job on the machine
    assert len(ds.to_arrow()) == 160 and ds.stats.bytes_checked == 0


def test_a_process_reads_a_files_record_once_not_once_a_group(arrow, tmp_path, monkeypatch):
    assert len(recordmill.open(str(arrow)).to_arrow()) == 160  # every group recorded
    groups = sum(len(p["group_offsets"]) - 1 for p in recordmill.read_manifest(arrow)["partitions"])
    opened = []
    record_open = checked.Checked._open
    monkeypatch.setattr(checked.Checked, "_open", lambda self, key: opened.append(key)
                        or record_open(self, key))  # fmt: skip
    ds = recordmill.open(str(arrow))  # another job: every group found checked
    assert len(ds.rows(range(160))) == 160 and ds.stats.bytes_checked == 0  # (one thread)
    assert groups == 10 and len(opened) == len(set(opened)) == 2  # one look a partition file


def test_without_the_record_each_process_checks_for_itself(arrow, tmp_path, monkeypatch):
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder"))  # cannot be used
    assert map_epoch(arrow, 0, workers=2) == list(range(160))
    assert logged(tmp_path) == (2 * group_bytes(arrow), 2)


def test_a_byte_changed_after_its_check_is_caught(arrow, tmp_path, monkeypatch):
    # PyTorch waits this long for each worker of a loader that raised to exit (20 s for 4).
    monkeypatch.setattr(torch.utils.data._utils, "MP_STATUS_CHECK_INTERVAL", 0.2)
    assert map_epoch(arrow, 0) == list(range(160))
    part = sorted(arrow.glob("part-*"))[1]
    before = os.stat(part)
    data = bytearray(part.read_bytes())
    offsets = recordmill.read_manifest(arrow)["partitions"][1]["group_offsets"]
    data[offsets[1] + (offsets[2] - offsets[1]) // 2] ^= 0x10  # inside group 1's values
    part.write_bytes(bytes(data))
    os.utime(part, ns=(before.st_atime_ns, before.st_mtime_ns))  # as if untouched, but ctime
    with pytest.raises(
        recordmill.OutputError,
        match=r"part-00001-of-00002.arrow, record batch 1: its bytes do not match",
    ):
        map_epoch(arrow, 1)
    gc.collect()  # the failed loader's workers shut down while the interval is short


def test_a_file_changed_moments_ago_is_not_recorded(arrow, tmp_path, monkeypatch):
    monkeypatch.setattr(checked, "SETTLED_NS", 3600 * 10**9)  # every file is "just changed"
    for _ in range(2):
        ds = recordmill.open(str(arrow))
        assert len(ds.to_arrow()) == 160 and ds.stats.bytes_checked == group_bytes(arrow)


def test_a_planted_record_is_not_trusted(arrow, tmp_path):
    record = checked.Checked.at()
    entry = recordmill.read_manifest(arrow)["partitions"][0]
    key = checked.file_key(arrow / entry["file"], entry["checksum"])
    planted = tmp_path / "planted"
    planted.write_bytes(b"\x01" * 64)  # "every group checked"
    os.symlink(planted, record.folder.path / key)  # a link in the record's place: not followed
    ds = recordmill.open(str(arrow))
    ds.to_arrow()
    assert ds.stats.bytes_checked == group_bytes(arrow)
    os.unlink(record.folder.path / key)
    os.chmod(record.folder.path, 0o777)  # a record folder others may write: not used at all
    assert checked.Checked.at() is None
    assert recordmill.open(str(arrow)).to_arrow().num_rows == 160


def test_a_disk_cache_part_is_checked_once_a_machine(tmp_path, monkeypatch):
    monkeypatch.setenv(checked.CHECK_LOG_ENV, str(tmp_path / "checked.log"))
    monkeypatch.setattr(checked, "SETTLED_NS", int(SETTLED * 1e9))
    plugin = make_plugin(tmp_path / "plugin", PLUGIN)
    recordmill.write(
        plugin, tmp_path / "pq", partitions=2, row_group_size=16, workers=0, progress=False
    )
    cache = tmp_path / "cache"
    first = recordmill.open(str(tmp_path / "pq"), cache_dir=cache)
    ids = np.sort(first.to_arrow()["id"].to_numpy())
    assert ids.tolist() == list(range(160)) and first.cache.fetched_parts > 0
    time.sleep(SETTLED + 0.05)
    logged(tmp_path)
    second = recordmill.open(str(tmp_path / "pq"), cache_dir=cache)  # maps each part: checks it
    second.to_arrow()
    assert second.cache.fetched_parts == 0 and logged(tmp_path)[0] > 0
    third = recordmill.open(str(tmp_path / "pq"), cache_dir=cache)  # the machine checked them
    third.to_arrow()
    assert third.cache.fetched_parts == 0 and logged(tmp_path) == (0, 0)


def test_a_record_read_before_another_process_checked_is_looked_at_again_under_the_lock(
    tmp_path,
):
    """Two processes' records of one file: the first read it before the second checked item 3;
    its own copy says "not checked", but under the item's lock it reads the byte again and does
    not check a second time. The return value says whether it checked."""
    first, second = (checked.Checked.at(tmp_path / "cache") for _ in range(2))
    calls = []
    key = "f" * 40
    assert not first.seen(key, 3)  # read now: nothing set
    assert second.once(key, 4, lambda: calls.append("second 4")) is True
    assert second.once(key, 3, lambda: calls.append("second")) is True
    assert first.once(key, 3, lambda: calls.append("first")) is False
    assert second.once(key, 3, lambda: calls.append("again")) is False
    third = checked.Checked.at(tmp_path / "cache")  # reads the record as it is now: set
    assert third.once(key, 3, lambda: calls.append("third")) is False
    assert calls == ["second 4", "second"]
    assert checked.Checked.at(tmp_path / "cache").seen(key, 3)
    assert not checked.Checked.at(tmp_path / "cache").seen(key, 2)


def test_a_check_that_fails_records_nothing(tmp_path):
    record = checked.Checked.at(tmp_path / "cache")

    def damaged():
        raise ValueError("the bytes do not match")

    with pytest.raises(ValueError):
        record.once("e" * 40, 0, damaged)
    assert not checked.Checked.at(tmp_path / "cache").seen("e" * 40, 0)
    assert record.once("e" * 40, 0, lambda: None) is True


def test_where_a_files_record_cannot_be_opened_every_call_checks(tmp_path):
    record = checked.Checked.at(tmp_path / "cache")
    planted = tmp_path / "planted"
    planted.write_bytes(b"\x01")
    os.symlink(planted, record.folder.path / ("d" * 40))  # a link in its place: never followed
    calls = []
    assert record.once("d" * 40, 0, lambda: calls.append(1)) is True
    assert record.once("d" * 40, 0, lambda: calls.append(1)) is True
    assert calls == [1, 1]


def test_a_files_key_waits_until_its_last_change_settled(tmp_path):
    path = tmp_path / "part"
    path.write_bytes(b"x")
    now = os.stat(path)
    settled = 2 * 10**9  # "a file changed in the last two seconds is not recorded"

    def key(age_ns: int) -> str | None:
        when = time.time_ns() - age_ns
        fields = list(now)
        info = os.stat_result((*fields[:7], when // 10**9, when // 10**9, when // 10**9),
                              {"st_mtime_ns": when, "st_ctime_ns": when})  # fmt: skip
        return checked.file_key(path, "c", info)

    assert key(settled - 5 * 10**8) is None
    assert key(settled + 5 * 10**8) is not None
    assert key(settled + 5 * 10**8) != checked.file_key(path, "other", os.stat(path))
