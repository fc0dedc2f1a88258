"""The disk cache: datasets on S3 (a moto server behind a counting proxy) and in Parquet, read
from parts kept on local disk; bytes and requests counted on the wire."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import recordmill
from recordmill.dataset.sizes import human_size
from recordmill.dataset.storage import Store
from recordmill.read import options, order
from recordmill.read.files import open_files
from recordmill.read.machine import cache as module
from recordmill.read.machine import cache_folder
from recordmill.read.machine.cache import _cached_bytes, cache_location
from recordmill.read.machine.cache_folder import Folder
from tests.conftest import REPO, make_plugin, written
from tests.s3proxy import CountingProxy

PLUGIN = """
    import numpy as np

    def task_number():
        return 6

    def schema():
        return {"id": {"type": "int64"}, "img": {"type": "uint8", "shape": [16, 16, 3]}}

    def dict_data(task_id):
        rng = np.random.default_rng(task_id)
        for i in range(200):
            yield {"id": task_id * 200 + i, "img": rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)}
"""
ROWS = 1200

# One epoch in a process of its own (a new job): prints the ids it read, in order.
EPOCH = """
import json, sys
import recordmill

if __name__ == "__main__":
    uri, cache, limit, seed, epoch = sys.argv[1:]
    ds = recordmill.open(uri, cache_dir=cache, cache_limit=int(limit) if limit != "-" else None)
    order = ds.shuffled(int(seed), int(epoch))
    ids = []
    for lo in range(0, len(order), 100):
        ids += ds.take(order[lo : lo + 100]).column("id").to_pylist()
    print(json.dumps({"ids": ids, "fetched": ds.cache.fetched_parts}))
"""


@pytest.fixture(scope="module")
def remote(s3, tmp_path_factory):
    """A Parquet and an Arrow dataset on S3, written directly; read through the proxy."""
    root = tmp_path_factory.mktemp("remote")
    plugin = make_plugin(root / "p", PLUGIN)
    proxy = CountingProxy.in_front_of(s3("x"))
    uris = {}
    for fmt in ("parquet", "arrow"):
        uri = s3(f"cache/{fmt}")
        settings = dict(partitions=3, format=fmt, row_group_size=20, progress=False)
        recordmill.write(plugin, uri, **settings)
        uris[fmt] = proxy.through(uri)
    yield uris, proxy.counts
    proxy.close()


def local_parquet(tmp_path, **settings) -> None:
    """The test dataset as Parquet on local disk, at ``tmp_path / "pq"``."""
    recordmill.write(
        make_plugin(tmp_path / "p", PLUGIN), tmp_path / "pq", progress=False, **settings
    )


def size(uri: str) -> int:
    return sum(p["bytes"] for p in recordmill.read_manifest(uri)["partitions"])


def epoch(uri, cache, limit=None, seed=0, number=0):
    script = Path(cache).parent / "epoch.py"
    script.write_text(EPOCH)
    args = [uri, str(cache), str(limit) if limit else "-", str(seed), str(number)]
    done = subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_an_epoch_pulls_the_dataset_once_and_the_next_job_nothing(remote, tmp_path, fmt):
    uris, counts = remote
    uri, total = uris[fmt], size(uris[fmt])
    counts.take()
    first = epoch(uri, tmp_path / "cache")
    requests, pulled = counts.take()
    assert sorted(first["ids"]) == list(range(ROWS)) and first["fetched"] > 4
    assert pulled <= 1.15 * total, (pulled, total)
    parts, partitions = first["fetched"], 3
    # one ranged GET a part; the manifest, a HEAD and a footer a partition besides
    assert requests <= parts + 3 * partitions + 5, (requests, parts)
    counts.seen.clear()
    second = epoch(uri, tmp_path / "cache", number=1)  # a new process: the cache is there
    _, again = counts.take()
    assert sorted(second["ids"]) == list(range(ROWS)) and second["fetched"] == 0
    assert again <= 0.05 * total, (again, total)
    assert first["ids"] != second["ids"]  # another epoch, another order
    # Not one request to a partition: a Parquet partition's footer (its row groups' sizes,
    # which size the parts) is kept in the cache too, checked against the manifest's CRC-32C.
    names = [p["file"] for p in recordmill.read_manifest(uri)["partitions"]]
    touched = [(method, path) for method, path in counts.seen if any(n in path for n in names)]
    assert touched == [], touched


def test_a_cache_of_a_third_of_the_dataset_pulls_at_most_one_and_a_half_per_epoch(remote, tmp_path):
    uris, counts = remote
    uri, total = uris["parquet"], size(uris["parquet"])
    limit = int(0.3 * total)
    counts.take()
    for number in range(3):
        seen = epoch(uri, tmp_path / "cache", limit, seed=7, number=number)
        _, pulled = counts.take()
        assert sorted(seen["ids"]) == list(range(ROWS))
        assert pulled <= 1.5 * total, (number, pulled, total)
        held = sum(f.stat().st_size for f in (tmp_path / "cache").rglob("*.arrow"))
        assert held <= limit + max(f.stat().st_size for f in (tmp_path / "cache").rglob("*.arrow"))


def test_processes_side_by_side_fetch_each_part_once(remote, tmp_path):
    uris, counts = remote
    uri, total = uris["parquet"], size(uris["parquet"])
    script = tmp_path / "epoch.py"
    script.write_text(EPOCH)
    counts.take()
    runs = [
        subprocess.Popen(
            [sys.executable, script, uri, tmp_path / "cache", "-", str(seed), "0"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for seed in (1, 2, 3)
    ]
    results = [json.loads(run.communicate(timeout=120)[0]) for run in runs]
    assert all(sorted(r["ids"]) == list(range(ROWS)) for r in results)
    _, pulled = counts.take()
    parts = len(recordmill.open(uri, cache_dir=tmp_path / "cache").cache.parts)
    assert sum(r["fetched"] for r in results) == parts  # never two fetches of one part
    assert pulled <= 1.15 * total


def test_a_damaged_or_half_written_part_is_fetched_again(remote, tmp_path):
    uris, _ = remote
    uri = uris["arrow"]
    expected = recordmill.open(uri).to_arrow()
    recordmill.open(uri, cache_dir=tmp_path / "cache").to_arrow()
    files = sorted((tmp_path / "cache").rglob("*.arrow"))
    data = bytearray(files[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    files[0].write_bytes(bytes(data))
    files[1].write_bytes(files[1].read_bytes()[:100])  # as a killed writer's copy would be
    (files[2].parent / f".{files[2].name.split('.')[0]}.99.partial").write_bytes(b"half")
    ds = recordmill.open(uri, cache_dir=tmp_path / "cache")
    assert ds.to_arrow().equals(expected)
    assert ds.cache.fetched_parts == 2


def test_a_kept_footer_that_does_not_match_its_checksum_is_read_again(remote, tmp_path):
    """A Parquet partition's footer kept in the cache is trusted only when its bytes match the
    CRC-32C the manifest records for them: a damaged one (or one of another size) is read from
    the partition again, and kept again."""
    uris, counts = remote
    uri = uris["parquet"]
    expected = recordmill.open(uri).to_arrow()
    recordmill.open(uri, cache_dir=tmp_path / "cache").to_arrow()
    footers = sorted((tmp_path / "cache").rglob("footer-*"))
    assert len(footers) == 3  # one a partition
    good = footers[0].read_bytes()
    footers[0].write_bytes(good[:-9] + bytes([good[-9] ^ 0xFF]) + good[-8:])
    footers[1].write_bytes(good[:100])
    counts.seen.clear()
    ds = recordmill.open(uri, cache_dir=tmp_path / "cache")
    assert ds.to_arrow().equals(expected) and ds.cache.fetched_parts == 0
    names = [p["file"] for p in recordmill.read_manifest(uri)["partitions"]]
    ranged = sorted(path for method, path in counts.seen if method == "GET" and "part-" in path)
    assert [path.rsplit("/", 1)[1] for path in ranged] == names[:2], ranged
    assert footers[0].read_bytes() == good  # kept again as read


def test_an_overwritten_dataset_never_serves_the_older_parts(s3, tmp_path):
    uri = s3("cache/overwritten")
    first = make_plugin(tmp_path / "a", PLUGIN)
    second = make_plugin(
        tmp_path / "b", PLUGIN.replace("task_id * 200 + i", "-(task_id * 200 + i)")
    )
    recordmill.write(first, uri, partitions=2, progress=False)
    old = recordmill.open(uri, cache_dir=tmp_path / "cache")
    assert old.to_arrow().column("id").to_pylist() == list(range(ROWS))
    recordmill.write(second, uri, partitions=2, overwrite=True, progress=False)
    new = recordmill.open(uri, cache_dir=tmp_path / "cache")
    assert new.to_arrow().column("id").to_pylist() == [-i for i in range(ROWS)]
    assert new.cache.root != old.cache.root


def test_a_local_parquet_dataset_reads_as_arrow_ipc_from_the_cache(tmp_path):
    local_parquet(tmp_path, partitions=2)
    plain = recordmill.open(tmp_path / "pq")
    cached = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "cache")
    assert cached.to_arrow().equals(plain.to_arrow())
    assert cached[777]["id"] == 777 and np.array_equal(cached[777]["img"], plain[777]["img"])
    assert cached.stats.groups_read == 0  # no Parquet group decoded: all from the cache


def test_mistakes_are_one_clear_line(tmp_path):
    local_parquet(tmp_path, partitions=2)
    (tmp_path / "file").write_text("")
    with pytest.raises(recordmill.ConfigError, match=r"cannot use .*file.* as a cache folder"):
        recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "file" / "below")
    with pytest.raises(recordmill.ConfigError, match=r"smaller than one part .* cache_limit=\d+"):
        recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "cache", cache_limit=1000)


FULL_DISK = """
import sys

# No bytecode written under the file size limit: Python does not check a short write, and a
# cut .pyc would be left for every process after (a module compiled for the first time here).
sys.dont_write_bytecode = True
import resource, signal
import recordmill

if __name__ == "__main__":
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails: EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    ds = recordmill.open(sys.argv[1], cache_dir=sys.argv[2])
    print(ds.to_arrow().num_rows)
"""


def test_a_cache_that_cannot_be_filled_is_a_warning_and_the_read_goes_on(tmp_path):
    local_parquet(tmp_path, partitions=2)
    script = tmp_path / "full.py"
    script.write_text(FULL_DISK)
    done = subprocess.run(
        [sys.executable, script, tmp_path / "pq", tmp_path / "cache"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(ROWS)
    assert done.stderr.count("RecordmillWarning: cannot fill the cache") == 1, done.stderr
    said = (  # once, whole: where, why (EFBIG), and from where the rows come instead
        rf"RecordmillWarning: cannot fill the cache in {re.escape(str(tmp_path / 'cache'))}/"
        rf"user-{os.geteuid()}/[^/:]+: [^\n]*File too large; reading on from "
        rf"{re.escape(str(tmp_path / 'pq'))}\n"
    )
    assert len(re.findall(said, done.stderr)) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert not list((tmp_path / "cache").rglob("*.arrow"))


def test_the_environment_names_the_default_cache_folder(tmp_path, monkeypatch):
    local_parquet(tmp_path, partitions=2)
    monkeypatch.setenv("RECORDMILL_CACHE_DIR", str(tmp_path / "env"))
    ds = recordmill.open(tmp_path / "pq")
    assert ds.cache is not None and str(ds.cache.root).startswith(str(tmp_path / "env"))
    assert os.path.isdir(ds.cache.root)


def test_shuffles_through_a_small_cache_are_block_orders_of_every_row(tmp_path):
    local_parquet(tmp_path, partitions=3, row_group_size=20)
    ds = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c")
    limit = 3 * ds.cache.largest
    small = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c2", cache_limit=limit)
    assert small.cache.capacity == 3 < len(small.cache.parts)
    full, block = ds.shuffled(5), small.shuffled(5)
    assert sorted(block.tolist()) == list(range(ROWS)) and not np.array_equal(full, block)
    assert np.array_equal(full, np.random.default_rng(5).permutation(ROWS))  # all fit: as before
    spans = order.spans([p.rows for p in small.cache.parts], 0, ROWS)
    assert order.same_part_neighbours(block, spans) > order.same_part_neighbours(full, spans)
    ids = [
        i
        for b in small.iter_batches(50, shuffle=True, seed=5, format="arrow")
        for i in b.column("id").to_pylist()
    ]
    assert ids == block.tolist()


def test_a_cache_holding_every_part_is_laid_end_to_end_once_for_all_gathers(tmp_path, monkeypatch):
    import pyarrow as pa

    from recordmill.read import gather

    local_parquet(tmp_path, partitions=3, row_group_size=20)  # 60 row groups
    truth = recordmill.open(tmp_path / "pq", cache_dir=False).to_arrow()
    laid = []  # the row groups of each Columns made
    init = gather.Columns.__init__
    monkeypatch.setattr(gather.Columns, "__init__", lambda self, batches, *a, **k: laid.append(
        len(batches)) or init(self, batches, *a, **k))  # fmt: skip
    ds = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c")
    probe = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "probe").cache
    small = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c2",
                            cache_limit=2 * probe.largest)  # fmt: skip
    for view, every in ((ds, True), (small, False)):
        laid.clear()
        order = view.shuffled(1, blocks=0)
        taken = [view.take(order[lo : lo + 100]) for lo in range(0, ROWS, 100)]
        assert pa.concat_tables(taken).equals(truth.take(order))
        rows = view.rows(order[:30])
        assert [r["id"] for r in rows] == truth.column("id").take(order[:30]).to_pylist()
        # Every part mapped: one layout of all 60 groups, taken from by every later gather;
        # else each of the 13 gathers lays out the groups it takes from.
        if every:
            assert laid.count(60) == 1 and laid[-1] == 60 and len(laid) < 13, laid
        else:
            assert max(laid) < 60 and len(laid) == 13, laid


def test_a_part_another_thread_evicted_before_its_own_eviction_is_no_error(tmp_path):
    # Two threads of one gather fill parts at once: B's eviction may take A's new part before
    # A evicts for it (seen in a shuffled read through a cache of three parts).
    folder = Folder(tmp_path, "v")
    parts = folder.root / "parts"
    for n, name in enumerate(("a.0.arrow", "b.0.arrow")):
        (parts / name).write_bytes(b"x" * 100)
        os.utime(parts / name, ns=(n * 10**9, n * 10**9))
    folder.evict(parts / "b.0.arrow", limit=100)
    assert sorted(p.name for p in parts.iterdir()) == ["b.0.arrow"]
    folder.evict(parts / "a.0.arrow", limit=100)
    assert sorted(p.name for p in parts.iterdir()) == ["b.0.arrow"]


def test_forked_dataloader_workers_read_s3_through_clients_of_their_own(remote, tmp_path):
    """Workers forked after the dataset was opened shared the parent's S3 connections (kept
    open by the proxy, as by real S3), and their replies mixed: checksum errors."""
    pytest.importorskip("torch", reason="PyTorch is not installed")
    import recordmill.torch as rtorch

    uris, _ = remote
    for fmt in ("parquet", "arrow"):
        data = rtorch.MapDataset(uris[fmt], columns=["id"], cache_dir=tmp_path / fmt)
        loader = rtorch.DataLoader(data, batch_size=64, shuffle=True, seed=1, num_workers=2)
        ids = [i for batch in loader for i in batch["id"].tolist()]
        assert sorted(ids) == list(range(ROWS))


def test_eviction_sweeps_the_partials_of_dead_fillers_and_counts_the_live_ones(tmp_path):
    """A reader killed while filling leaves ``.PART.PID.partial``: removed once its process is
    gone; a part being filled holds disk space, so it counts against the limit."""
    folder = Folder(tmp_path, "v")
    parts = folder.root / "parts"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for n, (name, size) in enumerate(
        [
            ("a.0.arrow", 100),
            ("b.0.arrow", 100),
            (f".c.{dead.pid}.partial", 500),
            (f".d.{os.getpid()}.partial", 100),
        ]
    ):
        (parts / name).write_bytes(b"x" * size)
        os.utime(parts / name, ns=(n * 10**9, n * 10**9))
    folder.evict(parts / "b.0.arrow", limit=250)
    # b (kept) + the live partial = 200: a goes; the dead filler's partial goes
    assert sorted(p.name for p in parts.iterdir()) == sorted(
        ["b.0.arrow", f".d.{os.getpid()}.partial"]
    )


def test_a_reader_lets_go_of_parts_another_reader_evicted(tmp_path):
    """Mapped files removed by another reader keep their disk blocks until unmapped: a reader
    unmaps them at its next load, so the folder's limit is what the disk holds."""
    import gc

    local_parquet(tmp_path, partitions=2, row_group_size=50)
    probe = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "probe").cache
    limit = 2 * probe.largest
    first = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c", cache_limit=limit).cache
    second = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c", cache_limit=limit).cache
    assert len(first.parts) >= 5
    first.batches(0), first.batches(1)
    second.batches(2), second.batches(3)  # evicts 0 and 1, which the first still maps
    del second
    gc.collect()

    def deleted_maps():
        with open("/proc/self/maps") as maps:
            return [line for line in maps if str(tmp_path / "c") in line and "(deleted)" in line]

    assert deleted_maps()  # parts 0 and 1: gone from the folder, still on the disk
    first.batches(4)
    gc.collect()
    assert deleted_maps() == []


def test_eviction_takes_the_least_recently_used_first_and_no_more_than_it_must(tmp_path):
    folder = Folder(tmp_path, "v")
    parts = folder.root / "parts"
    # Five parts of 100 bytes, used at these times (two used at the same moment: the tie is
    # broken by size, then name, so that every process evicts the same ones).
    used = {"a": 50, "b": 10, "c": 30, "d": 30, "e": 40}
    for name, when in used.items():
        (parts / f"{name}.arrow").write_bytes(b"x" * (100 if name != "d" else 90))
        os.utime(parts / f"{name}.arrow", ns=(when * 10**9, when * 10**9))
    new = parts / "f.arrow"
    new.write_bytes(b"x" * 100)
    folder.evict(new, limit=390)  # 590 held: b (the oldest), then d (30, 90 bytes), then c
    assert sorted(p.name for p in parts.iterdir()) == ["a.arrow", "e.arrow", "f.arrow"]
    folder.evict(new, limit=300)  # fits already: nothing goes
    assert sorted(p.name for p in parts.iterdir()) == ["a.arrow", "e.arrow", "f.arrow"]
    folder.evict(new, limit=100)  # only the new part, which is never evicted for itself
    assert sorted(p.name for p in parts.iterdir()) == ["f.arrow"]


def test_part_order_carries_the_parts_last_used_into_the_next_epoch():
    for count, capacity in [(10, 3), (7, 1), (5, 4), (6, 6)]:
        before = order.part_order(count, capacity, seed=2, epoch=0)
        assert sorted(before.tolist()) == list(range(count))
        for epoch in range(1, 4):
            now = order.part_order(count, capacity, seed=2, epoch=epoch)
            kept = order.carried(count, capacity)  # the last two windows of half the capacity
            window = max(1, capacity // 2)  # whole windows of half the capacity
            last = count % window or window
            assert kept == min(count, last + window * ((capacity - last) // window))
            assert set(now[:kept].tolist()) == set(before[count - kept :].tolist()), epoch
            assert sorted(now.tolist()) == list(range(count))
            before = now


def test_each_epoch_after_the_first_fetches_only_the_parts_the_cache_could_not_keep(tmp_path):
    local_parquet(tmp_path, partitions=3, row_group_size=200)
    probe = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "probe")
    parts, capacity = len(probe.cache.parts), 3
    assert parts == 6  # a part a row group here
    fetched = []
    for epoch in range(4):  # a new reader each epoch, as a new job; the cache folder kept
        ds = recordmill.open(
            tmp_path / "pq", cache_dir=tmp_path / "c", cache_limit=capacity * probe.cache.largest
        )
        assert ds.cache.capacity == capacity
        shuffled = ds.shuffled(9, epoch)
        for lo in range(0, ROWS, 10):  # batches smaller than a part, as in training
            ds.take(shuffled[lo : lo + 10])
        fetched.append(ds.cache.fetched_parts)
    # The first epoch fetches every part once; each later one starts with the parts the cache
    # kept (the last `capacity` used) and fetches exactly the others.
    assert fetched == [parts] + [parts - capacity] * 3, fetched


def test_each_cached_part_is_checked_once_per_process(tmp_path, monkeypatch):
    local_parquet(tmp_path, partitions=3, row_group_size=200)
    summed = []
    real = module.crc32c
    monkeypatch.setattr(module, "crc32c", lambda data: summed.append(len(data)) or real(data))
    first = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c")
    parts = len(first.cache.parts)
    first.take(np.arange(ROWS))
    assert len(summed) == parts  # each filled part summed once, as it was written: not again
    first.take(np.arange(ROWS)[::-1])
    assert len(summed) == parts  # read again in this process: checked already
    other = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c")  # another reader
    other.take(np.arange(ROWS))
    assert len(summed) == 2 * parts and other.cache.fetched_parts == 0  # checked once each


def test_a_reader_reads_the_folder_once_for_its_parts_and_stats_them_only_after_a_change(
    tmp_path, monkeypatch
):
    # The savings themselves: opening every cached part costs one listing of the folder, not
    # one a part, and no stat of the mapped parts while the folder is unchanged.
    local_parquet(tmp_path, partitions=2, row_group_size=50)
    warm = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c").cache
    for k in range(len(warm.parts)):  # every part cached
        warm.batches(k)
    cache = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c").cache
    calls = {"listings": 0, "stats": 0}
    names, look = cache_folder.Dir.names, cache_folder.Dir.stat

    def counted_names(self):
        calls["listings"] += 1
        return names(self)

    def counted_stat(self, name):
        calls["stats"] += 1
        return look(self, name)

    monkeypatch.setattr(cache_folder.Dir, "names", counted_names)
    monkeypatch.setattr(cache_folder.Dir, "stat", counted_stat)
    for k in range(len(cache.parts)):
        cache.batches(k)
    assert len(cache.parts) >= 5 and cache.fetched_parts == 0
    assert calls["listings"] == 1  # one listing
    # The first load looks at its one mapped part; the folder did not change after it: no
    # part is looked at again.
    assert calls["stats"] == 1
    (cache.root / "parts" / "unrelated.tmp").write_bytes(b"")  # the folder changes
    cache._open.popitem(last=False)
    cache.batches(0)
    assert calls["stats"] == 1 + len(cache._open)  # each mapped part looked at, once


EQUAL = """
    import numpy as np

    def task_number():
        return 8

    def schema():
        return {"id": {"type": "int64"}, "x": {"type": "uint8", "shape": [4096]}}

    def dict_data(task_id):
        rng = np.random.default_rng(task_id)
        for i in range(96):
            yield {"id": task_id * 96 + i, "x": rng.integers(0, 255, 4096, dtype=np.uint8)}
"""


@pytest.fixture(scope="module")
def equal_parts(tmp_path_factory):
    """768 rows of 4 KB in 8 Parquet partitions of 12 groups: 48 cache parts of one size (2
    groups, 16 rows), so that a cache holds a whole number of them."""
    root = tmp_path_factory.mktemp("equal")
    plugin = make_plugin(root / "p", EQUAL)
    recordmill.write(plugin, root / "pq", partitions=8, row_group_size=8, progress=False)
    return root / "pq"


def shuffled_epoch(reader: str, path, cache, limit: int, number: int) -> tuple[list[int], int]:
    """One epoch of ``reader`` through the cache: the ids it read and the parts it fetched."""
    options = {"cache_dir": cache, "cache_limit": limit}
    if reader == "iter_batches":  # a new seed each time: each its own epoch 0
        ds = recordmill.open(path, **options)
        ids = [i for b in ds.iter_batches(64, shuffle=True, seed=number) for i in b["id"]]
        return ids, ds.cache.fetched_parts
    if reader == "take":
        ds = recordmill.open(path, **options)
        order = ds.shuffled(5, number)
        ids = [i for lo in range(0, len(order), 64) for i in ds.take(order[lo : lo + 64])["id"]]
        return [i.as_py() for i in ids], ds.cache.fetched_parts
    import recordmill.torch as rt

    if reader == "MapDataset":
        loader = rt.DataLoader(rt.MapDataset(path, **options), batch_size=64, shuffle=True, seed=5)
    else:
        loader = rt.DataLoader(rt.IterableDataset(path, shuffle=True, seed=5, **options), 64)
    loader.set_epoch(number)
    ids = [i for b in loader for i in b["id"].tolist()]
    return ids, loader.dataset.source.dataset().cache.fetched_parts


@pytest.mark.parametrize("fraction", [0.3, 0.5])
@pytest.mark.parametrize("reader", ["iter_batches", "take", "MapDataset", "IterableDataset"])
def test_a_cache_of_a_fraction_fetches_each_part_once_an_epoch_and_keeps_the_last(
    equal_parts, tmp_path, fraction, reader
):
    """Through a cache of a fraction of many parts, with gathers that span several parts: each
    epoch fetches each part once, and a later epoch of the same seed begins with the parts the
    last one left (the block order carries them over): 48 - capacity fetches. Gathers once
    spanned more parts than the cache holds, and evicted parts the order still needed: 1.5x to
    2.2x the dataset an epoch."""
    if reader != "take":
        pytest.importorskip("torch") if reader.endswith("Dataset") else None
    probe = recordmill.open(equal_parts, cache_dir=tmp_path / "probe").cache
    parts = len(probe.parts)
    limit = int(fraction * parts * probe.largest) + 1
    capacity = limit // probe.largest
    assert (parts, capacity) == (48, int(fraction * 48))
    for number in range(3):
        ids, fetched = shuffled_epoch(reader, equal_parts, tmp_path / "c", limit, number)
        assert sorted(ids) == list(range(768))
        if reader == "iter_batches" and number:  # another seed: what it finds left is luck
            assert parts - capacity <= fetched <= parts, (number, fetched)
            continue
        # windows of 7 (0.3) or 12 (0.5) parts: the last 6 + 7, or 12 + 12, carried over
        carried = 0 if number == 0 else {0.3: 13, 0.5: 24}[fraction]
        assert fetched == parts - carried, (number, fetched)


def test_parts_are_runs_of_a_partitions_groups_of_about_the_part_size(tmp_path, monkeypatch):
    # two partitions of 23 rows in groups of 5, 5, 5, 5 and 3: groups of other sizes
    source = """
    def task_number():
        return 2

    import random

    def dict_data(task_id):
        for i in range(23):  # incompressible bytes, more in each row
            yield {"id": task_id * 23 + i, "blob": random.Random(i).randbytes(i * 40)}
    """
    files = open_files(Store.at(written(tmp_path, source, partitions=2, row_group_size=5)), True)
    entries = files.manifest["partitions"]
    total = sum(e["bytes"] for e in entries)
    monkeypatch.setattr(module, "PARTS_PER_DATASET", 5)  # a part: about a fifth of the bytes
    target = total // 5
    parts = module.plan_parts(files)
    groups = [g for part in parts for g in part.groups]
    assert groups == list(range(len(files.ready().groups)))  # every group once, in order
    rows = [r for part in parts for r in part.rows]
    assert rows == list(range(46))
    for part in parts:
        offsets = entries[part.partition]["group_offsets"]
        assert part.stored == offsets[part.stop] - offsets[part.first]
        assert len(part.rows) == sum(files.groups[g].rows for g in part.groups)
        assert [files.groups[g].partition for g in part.groups] == [part.partition] * len(
            part.groups
        )
        last = part.stop == len(offsets) - 1  # a partition's last part: what is left
        assert part.stored >= target or last
        assert offsets[part.stop - 1] - offsets[part.first] < target  # one group fewer: short
        assert part.name == f"{part.partition:05d}-{part.first:06d}-{part.stop:06d}"
    assert any(len(part.groups) > 1 for part in parts) and len({len(p.rows) for p in parts}) > 1


def test_a_default_cache_too_small_says_so_once_and_a_chosen_one_shapes_the_order(
    tmp_path, monkeypatch
):
    local_parquet(tmp_path, partitions=3, row_group_size=20)
    probe = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "probe").cache
    largest, parts = probe.largest, len(probe.parts)
    for limit, blocks in [(parts * largest, 0), (parts * largest - 1, parts - 1), (largest, 1)]:
        chosen = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c", cache_limit=limit)
        assert chosen.order_blocks() == blocks, limit  # all parts fit: a full permutation
    free = shutil.disk_usage(tmp_path).free
    monkeypatch.setattr(options, "DEFAULT_CACHE_FRACTION", 2.5 * largest / free)
    monkeypatch.setenv("RECORDMILL_CACHE_DIR", str(tmp_path / "env"))
    ds = recordmill.open(tmp_path / "pq")  # the default limit: two parts
    with pytest.warns(recordmill.RecordmillWarning) as said:
        assert ds.order_blocks() == 0 and ds.order_blocks() == 0
    assert ds.cache.capacity == 2 < parts
    assert [str(w.message) for w in said] == [
        f"{tmp_path / 'pq'} does not fit the cache's default limit ({human_size(ds.cache.limit)})"
        ", so a shuffled epoch fetches parts again and again: give cache_limit= (the same on "
        "every rank) for a shuffle that fetches each part about once"
    ]


def test_a_process_keeps_the_parts_it_used_last_mapped(tmp_path, monkeypatch):
    local_parquet(tmp_path, partitions=3, row_group_size=20)
    monkeypatch.setattr(module, "MAX_MAPPED", 2)  # (the cache on disk holds every part)
    ds = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c")
    loads, load = [], module._load
    monkeypatch.setattr(module, "_load", lambda cache, k: loads.append(k) or load(cache, k))
    for k in (0, 1, 0, 2, 0, 2, 1):
        ds.cache.batches(k)
    assert loads == [0, 1, 2, 1]  # two mapped at once: the least recently used let go


def test_a_part_is_filled_under_a_name_that_says_whose_it_is(tmp_path, monkeypatch):
    local_parquet(tmp_path, partitions=2)
    ds = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c")
    created, create = [], ds.cache.folder.create
    monkeypatch.setattr(ds.cache.folder, "create", lambda n: created.append(n) or create(n))
    ds.cache.batches(0)
    (name,) = created  # a dead filler's partial file is swept by the name (see eviction)
    assert name.endswith(".partial") and cache_folder.filler(name) == os.getpid()
    assert name.startswith(f".{ds.cache.parts[0].name}.")


def test_where_the_cache_is_given_set_or_the_users_and_for_what_datasets(
    tmp_path, monkeypatch, caplog
):

    local_parquet(tmp_path, partitions=1)
    recordmill.write(
        make_plugin(tmp_path / "p", PLUGIN), tmp_path / "arrow", format="arrow", progress=False
    )
    parquet = open_files(Store.at(tmp_path / "pq"), True)
    arrow = open_files(Store.at(tmp_path / "arrow"), True)
    monkeypatch.delenv("RECORDMILL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(cache_folder, "_SAID", set())
    users = str(tmp_path / "xdg" / "recordmill")

    def where(given, files, limit=None):
        place = cache_location(given, limit, files)
        return place and (place.folder, place.limit, place.default)

    with caplog.at_level(logging.INFO, logger="recordmill"):
        assert where(False, parquet) is None and where(False, arrow) is None
        assert where(tmp_path / "c", parquet, 5) == (str(tmp_path / "c"), 5, False)
        assert where(tmp_path / "c", arrow) == (str(tmp_path / "c"), None, False)  # as asked
        assert where(None, parquet) == where(True, parquet) == (users, None, True)
        assert where(None, arrow) is None  # local Arrow IPC is read where it lies
        monkeypatch.setenv("RECORDMILL_CACHE_DIR", "")  # set but empty: as if not set
        assert where(None, parquet) == (users, None, True)
        monkeypatch.setenv("RECORDMILL_CACHE_DIR", str(tmp_path / "env"))
        assert where(None, parquet) == where(True, arrow) == (str(tmp_path / "env"), None, False)
    assert [r.getMessage() for r in caplog.records] == [
        f"shuffled and random reads of {tmp_path / 'pq'} go through the disk cache in {users} "
        "(cache_dir=False: none; cache_dir=FOLDER: another)"
    ]


def test_a_parts_size_as_cached_is_bounded_by_its_estimate(tmp_path):
    """The capacity counts parts by the estimate: a part larger than it would let the cache
    hold more than its limit."""
    local_parquet(tmp_path, partitions=3, row_group_size=20)
    ds = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c")
    ds.to_arrow()
    ds.take(list(range(0, ROWS, 7)))  # every part, through the cache
    files = {
        f.name.split(".")[0]: f.stat().st_size for f in (ds.cache.root / "parts").glob("*.arrow")
    }
    assert len(files) == len(ds.cache.parts)
    for part in ds.cache.parts:
        estimate = _cached_bytes(ds.cache, part)
        assert files[part.name] <= estimate < files[part.name] + 4096 + 600 * len(part.groups)
