"""recordmill.torch with a real DataLoader: workers and simulated ranks read every row once."""

from __future__ import annotations

import gc
import itertools
import os
import pickle

import numpy as np
import pytest

import recordmill
from tests.conftest import make_plugin
from tests.read.dealt import dealt

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch==2.13.0)")
import recordmill.torch as rtorch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

PLUGIN = """
    import numpy as np

    def task_number():
        return 3

    def schema():
        return {
            "id": {"type": "int64"},
            "x": {"type": "float32", "shape": [4]},
            "img": {"type": "uint8", "shape": [6, 5]},  # a tensor: raw bytes on disk
        }

    def dict_data(task_id):
        for i in range(50 + task_id):
            n = task_id * 1000 + i
            yield {"id": n, "x": np.full(4, n, dtype=np.float32), "img": np.full((6, 5), n % 251)}
"""


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("torch")
    recordmill.write(
        make_plugin(root / "p", PLUGIN),
        root / "ds",
        partitions=3,
        row_group_size=10,
        progress=False,
    )
    return root / "ds"


def all_ids(dataset):
    return recordmill.open(str(dataset)).to_arrow()["id"].to_pylist()


def test_map_style_with_two_workers(dataset):
    data = rtorch.MapDataset(dataset, transform=lambda row: (torch.from_numpy(row["x"]), row["id"]))
    assert len(data) == 153
    loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=2)
    seen = []
    for x, ids in loader:
        assert x.shape[1:] == (4,) and x.dtype == torch.float32
        assert torch.equal(x[:, 0], ids.to(torch.float32))
        seen += ids.tolist()
    assert sorted(seen) == sorted(all_ids(dataset))


@pytest.mark.parametrize("shuffle", [False, True])
def test_iterable_across_workers_and_two_ranks(dataset, shuffle):
    seen = []
    for rank in range(2):
        data = rtorch.IterableDataset(
            dataset,
            columns=["id"],
            shuffle=shuffle,
            seed=3,
            rank=rank,
            world_size=2,
            batch_size=10,
            read_batch_size=8,
            even=None,  # no row twice: the ranks may differ by a batch
        )
        loader = DataLoader(data, batch_size=10, num_workers=2)
        rank_ids = [i for batch in loader for i in batch["id"].tolist()]
        assert abs(len(rank_ids) - 153 / 2) <= 10  # whole batches of 10 are dealt to ranks
        seen += rank_ids
    assert len(seen) == len(set(seen)) == 153
    assert sorted(seen) == sorted(all_ids(dataset))
    if not shuffle:
        assert seen[:5] == sorted(all_ids(dataset))[:5]  # rank 0, worker 0 starts at the first row


@pytest.mark.parametrize(("world", "even"), [(2, "pad"), (4, "pad"), (2, None), (3, None)])
def test_an_iterable_without_a_batch_size_deals_its_rows_in_turn(dataset, world, even):
    """Without ``batch_size`` (1: torch's DataLoader reads an iterable a row at a time), row k
    of the order goes to rank ``k % world_size``; with ``even="pad"`` the ranks past the last row
    are padded with the order's first rows, one each (153 rows: 1 row of padding for 2 ranks, 3
    for 4), with None not at all; each rank's ``len()`` is the rows it reads."""
    stored = all_ids(dataset)
    padded = stored + (stored[: -len(stored) % world] if even else [])
    ranks = [
        rtorch.IterableDataset(dataset, columns=["id"], rank=r, world_size=world, even=even)
        for r in range(world)
    ]
    lengths = [len(data) for data in ranks]
    got = [[int(row["id"]) for row in data] for data in ranks]
    assert got == [padded[r::world] for r in range(world)]
    assert lengths == [len(rows) for rows in got]


@pytest.mark.parametrize("kind", [rtorch.MapDataset, rtorch.IterableDataset])
def test_the_read_options_reach_the_dataset_read_and_its_pickled_copies(dataset, tmp_path, kind):
    """``cache_bytes``, ``cache_dir`` and ``cache_limit`` are those of the dataset each process
    reads, the DataLoader workers' copies included."""
    cache = {"cache_bytes": 12345, "cache_dir": tmp_path / "c", "cache_limit": 2_000_000}
    plain = recordmill.open(str(dataset), **cache)
    data = kind(dataset, **cache)
    for copy in (data, pickle.loads(pickle.dumps(data))):
        ds = copy.source.dataset()
        assert ds._groups.opened[1].cache_bytes == 12345
        assert (ds.cache.limit, ds.cache.root) == (2_000_000, plain.cache.root)


def test_the_epochs_permutation_is_of_seed_0_by_default(dataset):
    data = rtorch.MapDataset(dataset)
    order = data.shuffled(0, 0).tolist()
    assert list(rtorch.Sampler(data)) == order != list(range(len(data)))
    assert list(rtorch.Sampler(data, shuffle=False)) == list(range(len(data)))
    stored = all_ids(dataset)
    rows = rtorch.IterableDataset(dataset, columns=["id"], shuffle=True)
    assert [int(row["id"]) for row in rows] == [stored[i] for i in order]


def test_shuffle_changes_with_the_epoch_and_repeats_with_the_seed(dataset):
    data = rtorch.IterableDataset(dataset, columns=["id"], shuffle=True, seed=1)
    first = [row["id"] for row in data]
    again = [row["id"] for row in data]
    data.set_epoch(1)
    other = [row["id"] for row in data]
    assert first == again and first != other and sorted(first) == sorted(other)
    assert first != sorted(first)


def test_decode_and_transform_reach_the_rows(dataset):
    data = rtorch.MapDataset(
        dataset, columns=["x"], decode={"x": lambda v: v * 2}, transform=lambda r: r["x"].sum()
    )
    assert data[0] == pytest.approx(0.0) and data[60] == pytest.approx(
        np.float32(1010 * 2 * 4)
    )  # task 1's row 10


@pytest.mark.parametrize("style", ["map", "iterable"])
def test_tensor_fields_arrive_as_batched_tensors(dataset, style):
    data = rtorch.MapDataset(dataset) if style == "map" else rtorch.IterableDataset(dataset)
    loader = DataLoader(data, batch_size=8, num_workers=2)
    seen = 0
    for batch in loader:
        assert batch["img"].dtype == torch.uint8 and batch["img"].shape[1:] == (6, 5)
        expected = (batch["id"] % 251).to(torch.uint8)
        assert torch.equal(batch["img"][:, 3, 4], expected) and torch.equal(
            batch["img"][:, 0, 0], expected
        )
        seen += len(batch["id"])
    assert seen == 153


def test_batches_collate_without_warnings_and_keep_their_dtype(dataset):
    import warnings

    for data in (rtorch.MapDataset(dataset), rtorch.IterableDataset(dataset)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "The given NumPy array is not writable" would raise
            batch = next(iter(DataLoader(data, batch_size=4, num_workers=0)))
        assert batch["img"].dtype == torch.uint8 and batch["x"].dtype == torch.float32


def test_a_decode_that_gives_read_only_arrays_collates_without_warnings(dataset):
    """A decoded column may hold arrays whatever its stored type (here a read-only view made of
    an int): each is made writable for torch, as the stored arrays are."""
    import warnings

    decode = {"id": lambda v: np.broadcast_to(np.int64(v), (2,))}
    for data in (
        rtorch.MapDataset(dataset, decode=decode),
        rtorch.IterableDataset(dataset, decode=decode),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "The given NumPy array is not writable" would raise
            batch = next(iter(torch.utils.data.DataLoader(data, batch_size=4)))
        assert batch["id"].tolist() == [[i, i] for i in all_ids(dataset)[:4]]


def test_only_the_columns_that_can_hold_arrays_are_looked_over_for_them(dataset, monkeypatch):
    from recordmill.read.torch import collated

    looked = []
    writable = collated.writable
    monkeypatch.setattr(collated, "writable", lambda v: looked.append(v) or writable(v))
    ids = rtorch.MapDataset(dataset, columns=["id"])
    batch = next(iter(DataLoader(ids, batch_size=4, num_workers=0)))
    assert batch["id"].tolist() == [0, 1, 2, 3] and looked == []
    rows = rtorch.IterableDataset(dataset, batch_size=4)
    batch = next(iter(DataLoader(rows, batch_size=4, num_workers=0)))
    assert batch["id"].tolist() == [0, 1, 2, 3] and batch["x"].shape == (4, 4)
    # the two array columns' values alone, one each a row read (never an id)
    shapes = [v.shape if isinstance(v, np.ndarray) else type(v) for v in looked]
    assert shapes.count((4,)) == shapes.count((6, 5)) >= 4, shapes[:3]
    assert set(shapes) == {(4,), (6, 5)}


def test_an_iterable_gathers_mapped_rows_in_whole_batches_of_a_byte_budget(
    dataset, tmp_path, monkeypatch
):
    from recordmill.read import gather, passes

    sizes = []
    values = gather.Gatherer.values
    monkeypatch.setattr(gather.Gatherer, "values", lambda self, rows, *a, **k: sizes.append(
        len(rows)) or values(self, rows, *a, **k))  # fmt: skip
    for fmt in ("arrow", "parquet"):
        out = tmp_path / fmt
        recordmill.write(make_plugin(tmp_path / "p", PLUGIN), out, partitions=3, format=fmt,
                         row_group_size=10, progress=False)  # fmt: skip
        row = recordmill.open(out)._row_bytes()
        monkeypatch.setattr(passes, "MAPPED_GATHER_BYTES", 20 * row)  # 2.5 batches of 8
        data = rtorch.IterableDataset(out, shuffle=True, cache_dir=False, read_batch_size=64)
        ids = sorted(i for batch in epoch_ids(rtorch.DataLoader(data, batch_size=8)) for i in batch)
        assert len(ids) == 153
        held = 16 if fmt == "arrow" else 64  # mapped: whole batches within the budget
        assert max(sizes) == held and sum(sizes) == 153, fmt  # else decoded groups shared
        sizes.clear()
        # Rows one at a time (torch's own DataLoader batches them): gathered 20 at once, not 1
        rows = rtorch.IterableDataset(out, shuffle=True, cache_dir=False, read_batch_size=64)
        assert sorted(row["id"] for row in rows) == ids
        assert max(sizes) == (20 if fmt == "arrow" else 64) and sum(sizes) == 153, fmt
        sizes.clear()
        # Small rows: no more than read_batch_size at once (rows are made a gather at a time)
        monkeypatch.setattr(passes, "MAPPED_GATHER_BYTES", 10**9)
        capped = rtorch.IterableDataset(out, shuffle=True, cache_dir=False, read_batch_size=30)
        assert sorted(ids_of(rtorch.DataLoader(capped, batch_size=8))) == ids
        assert max(sizes) == 24 and sum(sizes) == 153, fmt  # 3 whole batches of 8 within 30
        sizes.clear()


def ids_of(loader):
    return [i for batch in epoch_ids(loader) for i in batch]


def epoch_ids(loader):
    return [batch["id"].tolist() for batch in loader]


@pytest.mark.filterwarnings("ignore:This DataLoader will create 3 worker processes")
@pytest.mark.parametrize("style", ["map", "iterable"])
def test_the_order_of_batches_does_not_depend_on_the_workers(dataset, style):
    orders = []
    for workers in (0, 1, 3):
        if style == "map":
            data = rtorch.MapDataset(dataset, columns=["id"])
            loader = rtorch.DataLoader(
                data, batch_size=7, shuffle=True, seed=2, num_workers=workers
            )
        else:
            data = rtorch.IterableDataset(dataset, columns=["id"], shuffle=True, seed=2)
            loader = rtorch.DataLoader(data, batch_size=7, num_workers=workers)
        orders.append(epoch_ids(loader))
        assert loader.state_dict()["epoch"] == 1 and loader.state_dict()["position"] == 0
        orders.append(epoch_ids(loader))  # the next epoch: another permutation
    assert orders[0] == orders[2] == orders[4] and orders[1] == orders[3] == orders[5]
    first, second = ([i for b in batches for i in b] for batches in orders[:2])
    assert sorted(first) == sorted(second) == sorted(all_ids(dataset)) and first != second
    assert [len(b) for b in orders[0]] == [7] * 21 + [6]


# The promise to distributed training (README, "PyTorch"): with W ranks, batch b of an epoch's
# permutation goes to rank b % W and there to worker (b // W) % num_workers (IterableDataset);
# a Sampler gives rank r every W-th index of the permutation from r on. The expected batches are
# built here from that text alone: numpy's permutation of seed + epoch, cut into batches.
def permutation_ids(dataset, seed, epoch=0):
    ids = np.array(all_ids(dataset))
    return ids[np.random.default_rng(seed + epoch).permutation(len(ids))].tolist()


def formula_batches(dataset, style, rank, world, size, seed):
    """Rank ``rank``'s batches, every rank given as many rows (padded with the order's first)."""
    order = permutation_ids(dataset, seed)
    if style == "map":  # every world-th row, the order padded to a whole number a rank
        mine = (order + order[: -len(order) % world])[rank::world]
        return [mine[i : i + size] for i in range(0, len(mine), size)]
    return dealt(order, rank, world, size)


def rank_loader(dataset, style, rank, world, workers, size=7, seed=4):
    if style == "map":
        data = rtorch.MapDataset(dataset, columns=["id"])
        sampler = rtorch.Sampler(data, shuffle=True, seed=seed, rank=rank, world_size=world)
        return rtorch.DataLoader(data, batch_size=size, sampler=sampler, num_workers=workers)
    data = rtorch.IterableDataset(
        dataset, columns=["id"], shuffle=True, seed=seed, rank=rank, world_size=world
    )
    return rtorch.DataLoader(data, batch_size=size, num_workers=workers)


@pytest.mark.filterwarnings("ignore:This DataLoader will create 3 worker processes")
@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("style", ["map", "iterable"])
def test_each_rank_reads_the_batches_of_the_formula_whatever_the_workers(dataset, style, world):
    every = []
    for rank in range(world):
        expected = formula_batches(dataset, style, rank, world, 7, 4)
        for workers in (1, 2, 3):
            loader = rank_loader(dataset, style, rank, world, workers)
            assert len(loader) == len(expected)  # counted before, as Lightning does
            batches = epoch_ids(loader)
            assert batches == expected, f"rank {rank} of {world}, {workers} workers"
        every += [i for batch in expected for i in batch]
    # every row once over the ranks, and the order's first rows again to give each as many
    padded = -len(all_ids(dataset)) % world
    assert sorted(every) == sorted(all_ids(dataset) + permutation_ids(dataset, 4)[:padded])


RESUMING = """
import json, os, signal, sys

import recordmill.torch as rtorch

if __name__ == "__main__":
    path, style, workers, state_file, log_file, kill_after, rank, world = sys.argv[1:]
    ranks = {"rank": int(rank), "world_size": int(world)}
    if style == "map":
        data = rtorch.MapDataset(path, columns=["id"])
        sampler = rtorch.Sampler(data, shuffle=True, seed=5, **ranks)
        loader = rtorch.DataLoader(data, batch_size=7, sampler=sampler, num_workers=int(workers))
    else:
        data = rtorch.IterableDataset(path, columns=["id"], shuffle=True, seed=5, **ranks)
        loader = rtorch.DataLoader(data, batch_size=7, num_workers=int(workers))
    if os.path.exists(state_file):
        with open(state_file) as f:
            loader.load_state_dict(json.load(f))
    with open(log_file, "a") as log:
        for k, batch in enumerate(loader, 1):
            log.write(json.dumps(batch["id"].tolist()) + "\\n")
            log.flush()
            with open(state_file + ".tmp", "w") as f:
                json.dump(loader.state_dict(), f)
            os.replace(state_file + ".tmp", state_file)  # a checkpoint after each step
            if k == int(kill_after):
                os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("style", ["map", "iterable"])
def test_a_killed_job_resumes_at_the_next_batch_with_other_workers(dataset, style, tmp_path):
    """A job of two ranks (each rank's state is its own; one rank alone is the same code with
    rank 0 of 1), killed after batch 5 with 2 DataLoader workers, resumed with 3."""
    import json
    import signal
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text(RESUMING)
    world = 2

    def files(name, rank):
        return tmp_path / f"{name}{rank}.json", tmp_path / f"{name}{rank}.log"

    def run(workers, name, kill_after):
        """Every rank of a job, side by side; their exit codes."""
        ranks = [
            subprocess.Popen(
                [
                    sys.executable,
                    script,
                    dataset,
                    style,
                    str(workers),
                    *files(name, r),
                    str(kill_after),
                    str(r),
                    str(world),
                ]
            )
            for r in range(world)
        ]
        return [rank.wait(timeout=120) for rank in ranks]

    def log(name, rank):
        lines = files(name, rank)[1].read_text().splitlines()
        return [json.loads(line) for line in lines]

    assert run(2, "cut", 5) == [-signal.SIGKILL] * world
    assert run(3, "cut", 0) == [0] * world
    for rank in range(world):
        # batches 1-5, killed, then the rest with 3 workers: the batches of a job never killed
        # (an uninterrupted job gives the formula's: test_each_rank_reads_the_batches_*)
        uninterrupted = formula_batches(dataset, style, rank, world, 7, 5)
        assert len(log("cut", rank)) > 5 and log("cut", rank) == uninterrupted


def test_a_state_from_other_settings_is_refused(dataset):
    data = rtorch.IterableDataset(dataset, columns=["id"], shuffle=True, seed=5)
    loader = rtorch.DataLoader(data, batch_size=7)
    state = loader.state_dict()
    with pytest.raises(ValueError, match="seed=6"):
        loader.load_state_dict({**state, "seed": 6})


def test_a_wrong_path_fails_when_the_dataset_is_made(tmp_path):
    for make in (rtorch.MapDataset, rtorch.IterableDataset):
        with pytest.raises(recordmill.OutputError, match="not a recordmill dataset"):
            make(tmp_path)


def test_a_given_sampler_is_kept_and_a_position_must_be_in_the_epoch(dataset):
    data = rtorch.MapDataset(dataset, columns=["id"])
    second_rank = rtorch.Sampler(data, shuffle=False, rank=1, world_size=2)
    loader = rtorch.DataLoader(data, batch_size=10, sampler=second_rank)
    ids = [i for batch in loader for i in batch["id"].tolist()]
    # 153 rows: the second of two ranks takes the odd rows, and the first row again, to take as
    # many as the first rank
    assert ids == all_ids(dataset)[1::2] + all_ids(dataset)[:1]
    with pytest.raises(ValueError, match="position=-20; expected a whole number from 0"):
        loader.load_state_dict({**loader.state_dict(), "position": -20})


@pytest.mark.parametrize("style", ["map", "iterable", "path"])
def test_loaders_read_through_one_disk_cache_shared_by_their_workers(dataset, tmp_path, style):
    """A Parquet dataset read through the disk cache by DataLoader workers: each part cached
    once, every row once, in the dataset's own (block) order whatever the worker count."""
    probe = recordmill.open(dataset, cache_dir=tmp_path / "probe")
    limit = 4 * probe.cache.largest  # a cache of 4 of the dataset's parts: a block shuffle
    cache = {"cache_dir": tmp_path / "cache", "cache_limit": limit}
    orders = []
    for workers in (0, 2):
        if style == "map":
            data = rtorch.MapDataset(dataset, columns=["id"], **cache)
            loader = rtorch.DataLoader(
                data, batch_size=8, shuffle=True, seed=3, num_workers=workers
            )
        elif style == "iterable":
            data = rtorch.IterableDataset(dataset, columns=["id"], shuffle=True, seed=3, **cache)
            loader = rtorch.DataLoader(data, batch_size=8, num_workers=workers)
        else:
            loader = rtorch.DataLoader(
                dataset, batch_size=8, shuffle=True, seed=3, num_workers=workers, **cache
            )
        orders.append([i for batch in loader for i in batch["id"].tolist()])
    ds = recordmill.open(dataset, **cache)
    expected = ds.take(ds.shuffled(3)).column("id").to_pylist()
    assert orders[0] == orders[1] == expected and sorted(expected) == sorted(all_ids(dataset))
    assert ds.cache.capacity < len(ds.cache.parts)  # the block order, not a full permutation
    sizes = [f.stat().st_size for f in (tmp_path / "cache").rglob("*.arrow")]
    assert sizes and sum(sizes) <= limit + max(sizes)  # the bound: the limit and one part


COUNTING = """
    def task_number():
        return 4

    def add_options(parser):
        parser.add_argument("--base", type=int, default=0)
        parser.add_argument("--rows", type=int, default=75)

    def dict_data(task_id, options):
        for i in range(options.rows // 4):
            yield {"id": options.base + task_id * 1000 + i}
"""


def test_a_torch_dataset_reads_the_version_given_in_every_process(tmp_path):
    """``version=1`` of a dataset appended to since: its rows, in the dataset and in the copies
    its DataLoader workers receive."""
    plugin = make_plugin(tmp_path / "p", COUNTING)
    out = tmp_path / "ds"
    recordmill.write(plugin, out, options={"rows": 300}, progress=False, workers=0)
    first = sorted(all_ids(out))
    more = {"base": 100, "rows": 100}
    recordmill.write(plugin, out, options=more, append=True, progress=False, workers=0)
    assert len(all_ids(out)) == 400
    for data in (rtorch.MapDataset(out, version=1), rtorch.IterableDataset(out, version=1)):
        for copy in (data, pickle.loads(pickle.dumps(data))):
            assert len(copy) == 300
        batches = rtorch.DataLoader(data, batch_size=32, num_workers=2)
        assert sorted(i for b in batches for i in b["id"].tolist()) == first


@pytest.mark.parametrize("style", ["map", "iterable"])
def test_a_state_of_a_replaced_history_is_refused(tmp_path, style):
    """Version 2 of another history (--overwrite, then --append) has as many rows as the one a
    state was saved on: the state is refused, not resumed on other rows."""
    plugin = make_plugin(tmp_path / "p", COUNTING)
    out = tmp_path / "ds"

    def history(base):
        recordmill.write(
            plugin,
            out,
            options={"base": base, "rows": 300},
            overwrite=True,
            progress=False,
            workers=0,
        )
        recordmill.write(
            plugin,
            out,
            options={"base": base + 100, "rows": 100},
            append=True,
            progress=False,
            workers=0,
        )

    def loader():
        if style == "map":
            return rtorch.DataLoader(rtorch.MapDataset(out, version=2), batch_size=10, shuffle=True)
        data = rtorch.IterableDataset(out, version=2, shuffle=True)
        return rtorch.DataLoader(data, batch_size=10)

    history(0)
    first = loader()
    batches = iter(first)
    for _ in range(5):
        next(batches)
    state = first.state_dict()
    resumed = loader()
    resumed.load_state_dict(state)  # the same history: accepted
    history(50_000)
    with pytest.raises(ValueError, match=r"other rows than version 2 of .*replaced"):
        loader().load_state_dict(state)


def test_a_state_of_a_full_permutation_resumed_through_a_cache_keeps_it_in_its_workers(
    dataset, tmp_path
):
    """Saved where no cache shaped the order (a full permutation: no blocks), resumed through a
    cache of a few parts by workers: they read the saved order on, not their cache's."""
    part = recordmill.open(dataset, cache_dir=tmp_path / "probe").cache.largest

    def loader(**cache):
        data = rtorch.IterableDataset(dataset, columns=["id"], shuffle=True, seed=3, **cache)
        return rtorch.DataLoader(data, batch_size=8, num_workers=2)

    whole = epoch_ids(loader(cache_dir=False))
    first = loader(cache_dir=False)
    head = [batch["id"].tolist() for _, batch in zip(range(5), first, strict=False)]
    state = first.state_dict()
    assert state["blocks"] == 0
    cached = {"cache_dir": tmp_path / "cache", "cache_limit": 4 * part}
    assert epoch_ids(loader(**cached)) != whole  # its own order is another one
    resumed = loader(**cached)
    resumed.load_state_dict(state)
    assert head + epoch_ids(resumed) == whole


@pytest.mark.parametrize("style", ["map", "iterable"])
def test_a_state_keeps_its_block_order_when_resumed_with_another_cache_limit(
    dataset, tmp_path, style
):
    """The block shuffle's windows follow the cache's capacity: a job resumed with another
    cache_limit continues the order it was saved in, neither repeating nor skipping rows."""
    part = recordmill.open(dataset, cache_dir=tmp_path / "probe").cache.largest

    def loader(parts):
        cache = {"cache_dir": tmp_path / f"cache{parts}", "cache_limit": parts * part}
        if style == "map":
            data = rtorch.MapDataset(dataset, columns=["id"], **cache)
            return rtorch.DataLoader(data, batch_size=8, shuffle=True, seed=3)
        data = rtorch.IterableDataset(dataset, columns=["id"], shuffle=True, seed=3, **cache)
        return rtorch.DataLoader(data, batch_size=8, num_workers=2)  # told the order's blocks

    whole = epoch_ids(loader(4))
    first = loader(4)
    head = [batch["id"].tolist() for _, batch in zip(range(5), first, strict=False)]
    state = first.state_dict()
    assert state["blocks"] == 4
    resumed = loader(6)  # another limit: its own order would be another one
    assert epoch_ids(loader(6)) != whole
    resumed.load_state_dict(state)
    assert head + epoch_ids(resumed) == whole
    # In stored order the cache shapes nothing: a state names no blocks, whatever the limit.
    cache = {"cache_dir": tmp_path / "cache4", "cache_limit": 4 * part}
    if style == "map":
        plain = rtorch.DataLoader(rtorch.MapDataset(dataset, columns=["id"], **cache), batch_size=8)
    else:
        plain = rtorch.DataLoader(
            rtorch.IterableDataset(dataset, columns=["id"], **cache), batch_size=8
        )
    next(iter(plain))
    assert plain.state_dict()["blocks"] == 0


@pytest.mark.parametrize("style", ["map", "iterable"])
def test_a_job_resumes_on_another_world_size_with_every_row_once(dataset, style):
    """The position counts the rows all ranks took together: two ranks stop after 4 batches each,
    three ranks resume from either one's state and read the rest, each row once."""
    taken = []
    states = []
    for rank in range(2):
        loader = rank_loader(dataset, style, rank, 2, 0)
        taken += [
            i for _, batch in zip(range(4), loader, strict=False) for i in batch["id"].tolist()
        ]
        states.append(loader.state_dict())
    assert states[0] == states[1]  # every rank's state is the job's
    rest = []
    for rank in range(3):
        loader = rank_loader(dataset, style, rank, 3, 0)
        loader.load_state_dict(states[rank % 2])
        rest += [i for batch in epoch_ids(loader) for i in batch]
    assert len(taken) == 2 * 4 * 7
    # the 97 rows left, padded to 99 for three ranks with the order's first two
    order = permutation_ids(dataset, 4)
    assert sorted(taken + rest) == sorted(all_ids(dataset) + order[:2])


@pytest.mark.parametrize(
    ("style", "context"), [("map", "fork"), ("iterable", "fork"), ("iterable", "spawn")]
)
def test_persistent_workers_follow_the_epoch_and_a_resume(dataset, style, context):
    """Workers that outlive an epoch read where the next one starts (the position the loader
    shares with them), so epochs and a resume give the batches of a loader without them."""

    def loader(persistent):
        extra = (
            {"persistent_workers": True, "multiprocessing_context": context} if persistent else {}
        )
        if style == "map":
            data = rtorch.MapDataset(dataset, columns=["id"])
            return rtorch.DataLoader(
                data, batch_size=7, shuffle=True, seed=2, num_workers=2, **extra
            )
        data = rtorch.IterableDataset(dataset, columns=["id"], shuffle=True, seed=2)
        return rtorch.DataLoader(data, batch_size=7, num_workers=2 if persistent else 0, **extra)

    plain = loader(False)
    expected = [epoch_ids(plain), epoch_ids(plain)]
    kept = loader(True)
    assert [epoch_ids(kept), epoch_ids(kept)] == expected  # epoch 0, then epoch 1
    half = expected[0][: len(expected[0]) // 2]
    kept.load_state_dict({**kept.state_dict(), "epoch": 0, "position": 7 * len(half)})
    assert epoch_ids(kept) == expected[0][len(half) :]  # the same workers, resumed mid-epoch


@pytest.mark.filterwarnings("ignore:This DataLoader will create 3 worker processes")
@pytest.mark.parametrize("style", ["map", "iterable"])
def test_an_epochs_order_is_drawn_once_a_machine_not_by_each_rank_or_worker(
    dataset, style, monkeypatch, tmp_path
):
    """Each worker once drew the whole permutation (8 bytes a row, per worker per rank): two
    ranks of three workers each, two epochs, then a job after them, draw it once an epoch."""
    from recordmill.read.machine import shared_orders

    monkeypatch.setattr(shared_orders, "SHARE_ROWS", 1)  # the workers are forked: they see it
    monkeypatch.setenv("RECORDMILL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RECORDMILL_ORDER_LOG", str(tmp_path / "drawn"))
    drawn = tmp_path / "drawn"
    loaders = [rank_loader(dataset, style, rank, 2, workers=3) for rank in (0, 1)]
    for epoch in (0, 1):
        for rank, loader in enumerate(loaders):
            expected = formula_batches(dataset, style, rank, 2, 7, 4 + epoch)
            assert epoch_ids(loader) == expected
        assert len(drawn.read_text().splitlines()) == epoch + 1  # one draw an epoch, 2x3 readers
    assert {line.split()[1] for line in drawn.read_text().splitlines()} == {"153"}
    later = rank_loader(dataset, style, 1, 2, workers=3)  # a job after: the order is there
    assert epoch_ids(later) == formula_batches(dataset, style, 1, 2, 7, 4)
    assert len(drawn.read_text().splitlines()) == 2


@pytest.mark.parametrize("source", ["dataset", "mixture"])
def test_a_loaders_dataset_can_still_be_copied_and_pickled(dataset, source):
    """The memory a loader shares with its workers (a mixture's order too) stays behind."""
    import copy

    def made():
        if source == "dataset":
            return rtorch.IterableDataset(dataset, columns=["id"], shuffle=True, seed=4)
        mixture = recordmill.mix([dataset, dataset], [0.5, 0.5], seed=4, columns=["id"])
        return rtorch.IterableDataset(mixture)

    data = made()
    rtorch.DataLoader(data, batch_size=7, num_workers=2)  # shares memory with its workers
    expected = epoch_ids(rtorch.DataLoader(made(), batch_size=7))
    for twin in (copy.deepcopy(data), pickle.loads(pickle.dumps(data))):
        assert epoch_ids(rtorch.DataLoader(twin, batch_size=7)) == expected
    if source == "dataset":
        assert expected == formula_batches(dataset, "iterable", 0, 1, 7, 4)


def test_a_sampler_can_give_every_rank_as_many_rows():
    """DDP's steps need as many batches on every rank: even="pad" repeats the order's first
    rows, even="drop" leaves the last ones out, as a DistributedSampler does."""
    for even, lengths, total in [
        (None, [3, 3, 2, 2], 10),
        ("pad", [3] * 4, 12),
        ("drop", [2] * 4, 8),
    ]:
        ranks = [
            rtorch.Sampler(10, shuffle=True, seed=1, rank=r, world_size=4, even=even)
            for r in range(4)
        ]
        assert [len(s) for s in ranks] == lengths == [len(list(s)) for s in ranks]
        seen = [i for s in ranks for i in s]
        assert len(seen) == total
        assert set(seen) == set(range(10)) if even != "drop" else len(set(seen)) == 8
    with pytest.raises(ValueError, match="even must be 'pad', 'drop' or None, got 'yes'"):
        rtorch.Sampler(10, even="yes")


def test_a_given_batch_sampler_of_a_sampler_reads_and_resumes_as_batch_size_does(dataset):
    def made():
        data = rtorch.MapDataset(dataset, columns=["id"])
        sampler = rtorch.Sampler(data, shuffle=True, seed=2)
        batches = torch.utils.data.BatchSampler(sampler, 7, drop_last=False)
        return rtorch.DataLoader(data, batch_sampler=batches)

    whole = epoch_ids(rtorch.DataLoader(dataset, batch_size=7, shuffle=True, seed=2))
    assert epoch_ids(made()) == whole and len(made()) == len(whole)
    loader = made()
    head = [batch["id"].tolist() for batch in itertools.islice(loader, 4)]
    assert loader.state_dict()["position"] == 28
    resumed = made()
    resumed.load_state_dict(loader.state_dict())
    assert head + epoch_ids(resumed) == whole


@pytest.mark.parametrize("style", ["map", "iterable"])
def test_batch_size_none_hands_out_rows_one_at_a_time_and_resumes(dataset, style):
    def made():
        if style == "iterable":
            data = rtorch.IterableDataset(dataset, columns=["id"], shuffle=True, seed=6)
            return rtorch.DataLoader(data, batch_size=None)
        return rtorch.DataLoader(dataset, batch_size=None, shuffle=True, seed=6)

    whole = [int(row["id"]) for row in made()]
    assert whole == permutation_ids(dataset, 6)  # torch's samples, not batches
    loader = made()
    head = [int(row["id"]) for row in itertools.islice(loader, 5)]
    assert loader.state_dict()["position"] == 5
    resumed = made()
    resumed.load_state_dict(loader.state_dict())
    assert head + [int(row["id"]) for row in resumed] == whole


@pytest.mark.parametrize("rank", [0, 1])
def test_a_padded_rank_resumed_mid_epoch_pads_with_the_same_rows(dataset, rank):
    def made():
        data = rtorch.MapDataset(dataset, columns=["id"])
        sampler = rtorch.Sampler(data, shuffle=True, seed=1, rank=rank, world_size=2, even="pad")
        return rtorch.DataLoader(data, batch_size=10, sampler=sampler)

    whole = epoch_ids(made())
    assert len(all_ids(dataset)) % 2 and whole[-1][-1] == permutation_ids(dataset, 1)[rank - 1]
    loader = made()
    head = [batch["id"].tolist() for batch in itertools.islice(loader, 3)]
    resumed = made()
    resumed.load_state_dict(loader.state_dict())
    assert head + epoch_ids(resumed) == whole  # the pad: the order's first row, as unbroken


STOPS_SHORT = ["drop", "map, drop_last", "iterable, drop_last", "iterable, rank 1 of 2"]


@pytest.mark.parametrize("style", ["map", "iterable", "iterable, 2 workers", *STOPS_SHORT])
def test_a_state_saved_after_an_epochs_last_batch_resumes_into_the_next_epoch(dataset, style):
    def made():  # in the last four, the position stops short of the epoch's 153 rows
        drop = {"drop_last": "drop_last" in style}
        if style.startswith("iterable"):
            ranks = {"rank": 1, "world_size": 2} if "rank" in style else {}
            data = rtorch.IterableDataset(dataset, columns=["id"], shuffle=True, seed=4, **ranks)
            workers = 2 if "2 workers" in style else 0
            size = 9 if ranks else 10  # 17 batches: rank 1 has 8, rank 0 the last
            return rtorch.DataLoader(data, batch_size=size, num_workers=workers, **drop)
        data = rtorch.MapDataset(dataset, columns=["id"])
        if style == "drop":  # rank 0 of 2, the last rows left out
            sampler = rtorch.Sampler(data, seed=4, rank=0, world_size=2, even="drop")
            return rtorch.DataLoader(data, batch_size=10, sampler=sampler)
        return rtorch.DataLoader(data, batch_size=10, shuffle=True, seed=4, **drop)

    first = made()
    epoch0, epoch1 = epoch_ids(first), epoch_ids(first)
    loader = made()
    it = iter(loader)
    for _ in range(len(epoch0)):
        next(it)  # the last batch handed out; the loop has not yet asked for the next one
    state = loader.state_dict()
    assert state["epoch"] == 0
    resumed = made()
    resumed.load_state_dict(state)
    assert resumed.state_dict()["epoch"] == 1 and resumed.state_dict()["position"] == 0
    assert epoch_ids(resumed) == epoch1  # not an empty epoch first
    before = made()
    before.load_state_dict({**state, "position": state["position"] - 20})  # a step short
    assert before.state_dict()["epoch"] == 0
    # The loop that stopped there goes on too: its next pass is the next epoch, whole.
    assert epoch_ids(loader) == epoch1 and loader.state_dict()["epoch"] == 2
    again = made()
    assert len(list(itertools.islice(again, len(epoch0)))) == len(epoch0)  # asks no more
    again.set_epoch(0)  # handed out to its end, so not under way: it starts again
    assert epoch_ids(again) == epoch0


@pytest.mark.parametrize("style", ["map", "iterable", "iterable, 2 workers"])
def test_a_pass_left_before_its_end_is_followed_by_the_next_epoch(dataset, style):
    def made():
        if style.startswith("iterable"):
            data = rtorch.IterableDataset(dataset, columns=["id"], shuffle=True, seed=5)
            return rtorch.DataLoader(data, batch_size=10, num_workers=2 if "2" in style else 0)
        data = rtorch.MapDataset(dataset, columns=["id"])
        return rtorch.DataLoader(data, batch_size=10, shuffle=True, seed=5)

    first = made()
    epoch0, epoch1 = epoch_ids(first), epoch_ids(first)
    loader = made()
    for k, _ in enumerate(loader):  # a sanity check, limit_train_batches, a break
        if k == 2:
            break
    state = loader.state_dict()
    assert (state["epoch"], state["position"]) == (0, 30)
    # Lightning counts a pass's batches before it starts: all of them.
    assert len(loader) == len(epoch0) and state == loader.state_dict()
    # The next pass is the next epoch, a new order, as a new pass of torch's loader draws.
    assert epoch_ids(loader) == epoch1 and loader.state_dict()["epoch"] == 2
    resumed = made()  # a state saved at the break resumes there, in a new job
    resumed.load_state_dict(state)
    resumed.set_epoch(0)  # as Lightning does as the resumed epoch starts: the epoch resumed
    # len counts the whole epoch: Lightning counts the batches done before the state itself.
    assert len(resumed) == len(epoch0)
    assert epoch_ids(resumed) == epoch0[3:]
    next(iter(loader))  # another pass left off; then the state loaded in this job
    loader.load_state_dict(state)
    assert epoch_ids(loader) == epoch0[3:]
    next(iter(loader))  # a pass over epoch 1 left off
    loader.set_epoch(1)  # the epoch named (as Lightning does each epoch): from its first row
    assert epoch_ids(loader) == epoch1


def lightning_model(dataset, style):
    """A LightningModule of one weight that trains on ``dataset`` (a ``style`` loader, batches
    of 10 of the order of seed 3), validates on it in order and records the ids of each step."""
    pl = pytest.importorskip("pytorch_lightning", reason="pip install pytorch-lightning")

    class Model(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))
            self.trained, self.validated = [], []

        def training_step(self, batch, _):
            self.trained.append(batch["id"].tolist())
            return (self.w * batch["x"].sum()).sum()

        def on_validation_epoch_start(self):
            self.validated.append([])

        def validation_step(self, batch, _):
            self.validated[-1] += batch["id"].tolist()

        def predict_step(self, batch, _):
            return batch["id"]

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

        def train_dataloader(self):  # Lightning's set_epoch reaches a map-style loader only
            if style == "iterable":
                data = rtorch.IterableDataset(dataset, shuffle=True, seed=3)
                return rtorch.DataLoader(data, batch_size=10)
            return rtorch.DataLoader(str(dataset), batch_size=10, shuffle=True, seed=3)

        def val_dataloader(self):
            return rtorch.DataLoader(str(dataset), batch_size=10)

    return pl, Model()


def quiet_trainer(pl, tmp_path, **options):
    shown = {"logger": False, "enable_progress_bar": False, "enable_model_summary": False}
    return pl.Trainer(accelerator="cpu", default_root_dir=tmp_path, **shown, **options)


@pytest.mark.parametrize("style", ["map", "iterable"])
def test_lightning_validates_every_row_after_its_sanity_check(dataset, tmp_path, style):
    pl, model = lightning_model(dataset, style)
    trainer = quiet_trainer(pl, tmp_path, max_epochs=2, limit_train_batches=2)
    trainer.fit(model)
    ids = all_ids(dataset)
    sanity, *epochs = model.validated  # the sanity check reads its 2 batches and breaks off
    assert sanity == ids[:20] and epochs == [ids, ids]  # then every row, each validation
    for epoch in (0, 1):  # each epoch's first 2 batches, of its own order
        assert model.trained[2 * epoch : 2 * epoch + 2] == [
            permutation_ids(dataset, 3, epoch)[k : k + 10] for k in (0, 10)
        ]
    # predict re-makes the loader with a batch_sampler of its own around the loader's
    predicted = trainer.predict(model, rtorch.DataLoader(str(dataset), batch_size=10))
    assert [i for batch in predicted for i in batch.tolist()] == ids


@pytest.mark.parametrize("style", ["map", "iterable"])
def test_lightning_resumes_a_mid_epoch_checkpoint_at_the_next_batch(dataset, tmp_path, style):
    def fit(**options):  # 16 batches an epoch, no validation
        pl, model = lightning_model(dataset, style)
        every = pl.callbacks.ModelCheckpoint(
            tmp_path, "{step}", every_n_train_steps=20, save_top_k=-1
        )
        trainer = quiet_trainer(pl, tmp_path, max_epochs=2, limit_val_batches=0)
        trainer.callbacks.append(every)
        trainer.fit(model, **options)
        return model.trained

    whole = fit()
    resumed = fit(ckpt_path=tmp_path / "step=20.ckpt")  # epoch 1, after its 4th batch
    assert resumed == whole[20:] and len(whole) == 32
    assert sorted(i for b in whole[16:] for i in b) == sorted(all_ids(dataset))


def private_dirty() -> int:
    """The bytes of pages this process has written of its own (Linux)."""
    with open("/proc/self/smaps_rollup") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("Private_Dirty:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="Linux's smaps only")
@pytest.mark.parametrize("style", ["map", "iterable"])
def test_a_forked_worker_copies_no_page_of_what_the_loader_held(dataset, tmp_path, style):
    """A full collection in a worker leaves the objects it inherited alone (they are frozen
    while the loader forks it): without that, it writes to every one, copying its pages."""
    ballast = [{"n": i} for i in range(200_000)]  # about 40 MB of objects here, and in each worker
    frozen_here = gc.get_freeze_count()

    def collect(worker_id):
        before = private_dirty()
        gc.collect()
        (tmp_path / "worker").write_text(f"{private_dirty() - before} {gc.get_freeze_count()}")

    if style == "map":
        data = rtorch.MapDataset(dataset, columns=["id"])
    else:
        data = rtorch.IterableDataset(dataset, columns=["id"])
    loader = rtorch.DataLoader(
        data, batch_size=7, num_workers=1, multiprocessing_context="fork", worker_init_fn=collect
    )
    assert sum(len(batch["id"]) for batch in loader) == 153
    copied, frozen = map(int, (tmp_path / "worker").read_text().split())
    assert copied < 8 << 20, copied  # not 40 MB (59 without the freeze): pages it wrote itself
    assert frozen > len(ballast)  # the worker's collector holds them as frozen
    assert gc.get_freeze_count() == frozen_here  # and they are collected here again


def test_a_distributed_samplers_drop_last_and_order_are_kept(dataset):
    """A torch DistributedSampler given (as Lightning puts one in) stands for ours with its
    rank, world size, order and evenness: drop_last leaves the last rows out, else the first
    rows are read again so each rank has as many."""
    data = rtorch.MapDataset(dataset, columns=["id"])
    ids = all_ids(dataset)  # 153 rows: 51 a rank of 3, 38 a rank of 4 dropped, 39 padded
    for world, drop, share in [(4, True, 38), (4, False, 39), (3, True, 51)]:
        given = torch.utils.data.DistributedSampler(
            data, num_replicas=world, rank=world - 1, shuffle=True, seed=7, drop_last=drop
        )
        loader = rtorch.DataLoader(data, batch_size=5, sampler=given)
        got = [i for batch in loader for i in batch["id"].tolist()]
        even = "drop" if drop else "pad"
        ours = rtorch.Sampler(data, True, 7, rank=world - 1, world_size=world, even=even)
        assert len(got) == share and got == [ids[i] for i in ours]


def test_an_iterable_loader_without_batches_hands_out_rows_and_resumes_at_the_next(dataset):
    def loader():
        return rtorch.DataLoader(rtorch.IterableDataset(dataset, columns=["id"]), batch_size=None)

    first = loader()
    rows = iter(first)
    assert [int(next(rows)["id"]) for _ in range(3)] == all_ids(dataset)[:3]
    state = first.state_dict()
    assert state["position"] == 3
    again = loader()
    again.load_state_dict(state)
    assert int(next(iter(again))["id"]) == all_ids(dataset)[3]
