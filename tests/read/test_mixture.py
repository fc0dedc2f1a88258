"""recordmill.mix(): three real datasets read as one, through the PyTorch loaders too, with
exact resume across worker and rank counts and with weights changed mid-epoch."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import recordmill
from recordmill.errors import ColumnError
from recordmill.read import mixing
from tests.conftest import make_plugin
from tests.read.dealt import dealt

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch==2.13.0)")
import recordmill.torch as rtorch  # noqa: E402

PLUGIN = """
    import numpy as np

    SOURCE, ROWS, LABEL = {source}, {rows}, "{label}"

    def task_number():
        return 2

    def schema():
        return {{"id": {{"type": "int64"}}, "x": {{"type": "float32", "shape": [2]}},
                 "label": {{"type": LABEL}}}}

    def dict_data(task_id):
        for i in range(ROWS // 2):
            n = task_id * (ROWS // 2) + i
            yield {{"id": SOURCE * 100_000 + n, "x": np.full(2, n, dtype=np.float32), "label": n % 7}}
"""
SIZES = {"a": 600, "b": 300, "c": 100}


def write(root, name, rows, source, label="int64", fmt="arrow"):
    plugin = make_plugin(root / f"p{name}", PLUGIN.format(source=source, rows=rows, label=label))
    out = root / name
    recordmill.write(plugin, out, partitions=2, row_group_size=16, format=fmt, progress=False)
    return out


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("mix")
    paths = [
        write(root, n, rows, k, fmt="parquet" if n == "b" else "arrow")
        for k, (n, rows) in enumerate(SIZES.items())
    ]
    return [str(p) for p in paths]


def ids_of(batches) -> list[int]:
    return [i for b in batches for i in (b if isinstance(b, list) else b["id"].tolist())]


def loader(mixture, workers=0, rank=None, world=None, batch=16):
    data = rtorch.IterableDataset(mixture, columns=["id"], rank=rank, world_size=world)
    return rtorch.DataLoader(data, batch_size=batch, num_workers=workers)


def test_rows_come_from_their_sources_in_the_documented_order(sources):
    m = recordmill.mix(sources, [0.6, 0.3, 0.1], seed=4, source_column="from")
    order = m.order(0)
    plan = mixing.plan_epoch([600, 300, 100], [(0, (0.6, 0.3, 0.1))], 4, 0)
    assert len(m) == len(order) == len(plan)
    source, local = m.locate(order)
    assert source.tolist() == plan.source.tolist()
    for i, path in enumerate(sources):  # each source read in its own permutation, once
        rows = local[source == i]
        assert len(set(rows.tolist())) == len(rows)
        assert rows.tolist() != sorted(rows.tolist())
        ids = recordmill.open(path).take(rows).column("id").to_pylist()
        assert ids == [i * 100_000 + r for r in rows.tolist()]  # the rows are those rows
    batch = next(m.iter_batches(50))
    assert batch["id"].tolist() == [
        s * 100_000 + r for s, r in zip(source[:50], local[:50], strict=True)
    ]
    assert batch["from"] == [["a", "b", "c"][s] for s in source[:50]]
    assert batch["x"].shape == (50, 2)


def test_epochs_differ_and_sources_read_in_stored_order_without_shuffle(sources):
    m = recordmill.mix(sources, seed=1)  # weights: each source's rows
    assert m.order(0).tolist() != m.order(1).tolist()
    plain = recordmill.mix(sources, [1, 1, 1], shuffle=False)
    source, local = plain.locate(plain.order(0))
    for i in range(3):
        assert local[source == i].tolist() == list(range(int(np.sum(source == i))))


def test_iter_batches_takes_what_a_dataset_s_takes(sources):
    """A mixture in place of a dataset: the same call, the same meanings (columns, shuffle,
    seed, format); shuffle and seed default to the mixture's own."""
    m = recordmill.mix(sources, [1, 1, 1], seed=2)
    own = ids_of(m.iter_batches(64))
    same = [b["id"].tolist() for b in m.iter_batches(64, ["id"], True, 2, "numpy")]
    assert [i for b in same for i in b] == own
    assert set(next(m.iter_batches(64, columns=["id"])).keys()) == {"id"}
    other = ids_of(m.iter_batches(64, shuffle=True, seed=3))
    assert other != own and len(set(other)) == len(other)  # another seed: another draw
    plain = ids_of(m.iter_batches(64, shuffle=False))
    stored = recordmill.mix(sources, [1, 1, 1], seed=2, shuffle=False)
    assert plain == ids_of(stored.iter_batches(64)) != own
    arrow = next(m.iter_batches(64, ["id"], format="arrow"))
    assert arrow.schema.names == ["id"] and arrow.num_rows == 64
    with pytest.raises(ValueError, match="batch_size must be a whole number"):
        next(m.iter_batches(0))


@pytest.mark.parametrize(
    "until,expect",
    [
        ("first_exhausted", "each at most once"),
        ("all_exhausted_without_replacement", "every row once"),
    ],
)
def test_how_an_epoch_ends(sources, until, expect):
    m = recordmill.mix(sources, [0.2, 0.2, 0.6], until=until)
    ids = ids_of(m.iter_batches(64))
    assert len(ids) == len(set(ids))
    if expect == "every row once":
        assert len(ids) == 1000
    else:
        assert sum(1 for i in ids if i // 100_000 == 2) == 100 and len(ids) < 200


def test_rows_per_epoch_repeat_each_source_in_a_new_shuffle(sources):
    m = recordmill.mix(sources, [0.1, 0.1, 0.8], rows=2000)
    ids = ids_of(m.iter_batches(100))
    assert len(ids) == 2000
    small = [i for i in ids if i // 100_000 == 2]
    assert abs(len(small) - 1600) <= mixing.WINDOW_TOLERANCE
    passes = [small[k : k + 100] for k in range(0, 1600, 100)]
    assert all(sorted(p) == list(range(200_000, 200_100)) for p in passes)  # each pass whole
    assert passes[0] != passes[1]  # in another order


def test_a_mixture_through_dataloader_workers_and_ranks_reads_what_the_order_deals(sources):
    m = recordmill.mix(sources, [0.5, 0.3, 0.2], seed=9)
    order = m.order(0)
    expected = m.locate(order)
    want = (expected[0] * 100_000 + expected[1]).tolist()
    for world in (1, 2):
        for workers in (0, 2):
            got = [ids_of(loader(m, workers, rank, world)) for rank in range(world)]
            for rank in range(world):  # batch b of the epoch goes to rank b % world
                batches = dealt(want, rank, world, 16)
                assert got[rank] == [i for b in batches for i in b], (world, workers, rank)


@pytest.mark.parametrize("before,after", [(0, 2), (2, 1), (1, 3)])
def test_a_state_resumes_exactly_with_another_number_of_workers(sources, before, after):
    m = recordmill.mix(sources, [0.6, 0.3, 0.1], seed=2)
    full = [b["id"].tolist() for b in loader(m)]
    first = loader(m, before)
    it = iter(first)
    head = [next(it)["id"].tolist() for _ in range(7)]
    state = pickle.loads(pickle.dumps(first.state_dict()))
    del it
    again = loader(recordmill.mix(sources, [0.6, 0.3, 0.1], seed=2), after)
    again.load_state_dict(state)
    assert head + [b["id"].tolist() for b in again] == full


def test_a_map_style_loader_over_a_mixture_resumes_on_another_world_size(sources):
    m = recordmill.mix(sources, [0.6, 0.3, 0.1], seed=5)
    full = [b["id"].tolist() for b in rtorch.DataLoader(m, batch_size=10)]
    assert len(ids_of(full)) == len(set(ids_of(full))) == len(m)
    whole = rtorch.DataLoader(m, batch_size=10)
    it = iter(whole)
    for _ in range(4):
        next(it)
    state = whole.state_dict()
    rest = []
    for rank in range(2):  # resumed on two ranks: between them, the rows not yet seen
        data = rtorch.MapDataset(m)
        sampler = rtorch.Sampler(data, rank=rank, world_size=2)
        ranked = rtorch.DataLoader(data, batch_size=5, sampler=sampler)
        ranked.load_state_dict(state)
        rest += ids_of(ranked)
    assert sorted(rest) == sorted(i for b in full[4:] for i in b)


def test_new_weights_continue_the_epoch_without_repeating_a_row(sources):
    before = recordmill.mix(sources, [0.6, 0.3, 0.1], seed=3)
    first = loader(before, 1)
    it = iter(first)
    head = ids_of([next(it) for _ in range(10)])
    state = first.state_dict()
    del it
    after = recordmill.mix(sources, [0.1, 0.1, 0.8], seed=3, until="first_exhausted")
    resumed = loader(after, 2)
    resumed.load_state_dict(state)
    rest = ids_of(resumed)
    assert len(set(head + rest)) == len(head + rest)  # no row served twice in the epoch
    shares = np.bincount([i // 100_000 for i in rest], minlength=3) / len(rest)
    assert abs(shares[2] - 0.8) < 0.05 and abs(shares[0] - 0.1) < 0.05
    # Each source goes on in its own order from where it stood: a resume with the old weights
    # and one with the new agree on each source's sequence.
    old = [i for i in ids_of(loader(before)) if i // 100_000 == 2]
    assert [i for i in head + rest if i // 100_000 == 2] == old[:100]
    # The state it saves says so: resumed again later, it goes on the same way.
    again = loader(recordmill.mix(sources, [0.1, 0.1, 0.8], seed=3), 0)
    again.load_state_dict(state)
    assert ids_of(again) == rest


def test_a_state_saved_after_a_weight_change_keeps_both_segments(sources):
    m = recordmill.mix(sources, [0.6, 0.3, 0.1], seed=8, until="all_exhausted_without_replacement")
    first = loader(m)
    it = iter(first)
    head = ids_of([next(it) for _ in range(5)])
    state = first.state_dict()
    del it
    new = recordmill.mix(
        sources, [0.2, 0.2, 0.6], seed=8, until="all_exhausted_without_replacement"
    )
    middle_loader = loader(new)
    middle_loader.load_state_dict(state)
    it = iter(middle_loader)
    middle = ids_of([next(it) for _ in range(5)])
    second = middle_loader.state_dict()
    del it
    assert [s[0] for s in second["mixture"]["steps"]] == [0, 80]
    last = loader(
        recordmill.mix(sources, [0.2, 0.2, 0.6], seed=8, until="all_exhausted_without_replacement")
    )
    last.load_state_dict(second)
    tail = ids_of(last)
    everything = head + middle + tail
    assert sorted(everything) == sorted(set(everything)) and len(everything) == 1000


def test_a_schedule_changes_the_weights_within_the_epoch(sources):
    m = recordmill.mix(sources, [(0, [1, 0, 0]), (200, [0, 0, 1])], until="first_exhausted")
    ids = ids_of(m.iter_batches(50))
    assert {i // 100_000 for i in ids[:200]} == {0} and {i // 100_000 for i in ids[200:]} == {2}
    assert len(ids) == 300


def test_a_state_of_another_mixture_is_refused(sources, tmp_path):
    m = recordmill.mix(sources, seed=1)
    state = loader(m).state_dict()
    other = write(tmp_path, "c", 100, 5)  # another dataset, the same size
    swapped = recordmill.mix([*sources[:2], str(other)], seed=1)
    with pytest.raises(ValueError, match=r"source 2 \(c\) has data '.*', the saved state's"):
        loader(swapped).load_state_dict(state)
    with pytest.raises(ValueError, match="mixture of 3 sources, this one has 2"):
        loader(recordmill.mix(sources[:2], seed=1)).load_state_dict(state)
    single = rtorch.DataLoader(rtorch.IterableDataset(sources[0]), batch_size=4)
    with pytest.raises(ValueError, match="is of a mixture, this loader reads one dataset"):
        single.load_state_dict(state)
    with pytest.raises(ValueError, match="is of one dataset, this loader reads a mixture"):
        loader(m).load_state_dict(single.state_dict())
    with pytest.raises(ValueError, match="has seed=1, this one 2"):
        loader(recordmill.mix(sources, seed=2)).load_state_dict(state)


def test_sources_must_hold_the_same_columns(sources, tmp_path):
    floats = write(tmp_path, "f", 10, 7, label="float64")
    with pytest.raises(
        ColumnError, match="column 'label' is double in source 'f' and int64 in 'a'"
    ):
        recordmill.mix([sources[0], str(floats)])
    m = recordmill.mix([sources[0], str(floats)], columns=["id", "x"])  # the ones they share
    assert m.schema.names == ["id", "x"]
    with pytest.raises(ValueError, match="weights has 2 numbers for 3 sources"):
        recordmill.mix(sources, [1, 2])
    with pytest.raises(ValueError, match="finite, at least 0 and not all 0"):
        recordmill.mix(sources, [1, -1, 1])
    with pytest.raises(ValueError, match="until must be one of"):
        recordmill.mix(sources, until="longest")
    with pytest.raises(ValueError, match="rows start at 0 and increase"):
        recordmill.mix(sources, [(0, [1, 1, 1]), (0, [1, 2, 1])])
    with pytest.raises(TypeError, match="list \\(or dict\\) of sources"):
        recordmill.mix(sources[0])


def test_named_sources_opened_datasets_and_weights_by_name(sources):
    opened = recordmill.open(sources[1]).select(["id", "x", "label"])
    m = recordmill.mix({"big": sources[0], "pq": opened}, {"big": 1, "pq": 3}, source_column="s")
    rows = m.rows(m.order(0)[:40])
    assert {r["s"] for r in rows} == {"big", "pq"}
    assert sum(r["s"] == "pq" for r in rows) == pytest.approx(30, abs=mixing.WINDOW_TOLERANCE)
    copy = pickle.loads(pickle.dumps(m))  # what a spawned DataLoader worker receives
    assert [r["id"] for r in copy.rows(m.order(0)[:40])] == [r["id"] for r in rows]


def test_a_pickled_dataset_opens_the_same_version_and_view(sources):
    ds = recordmill.open(sources[1]).select(["id"]).shard(1, 3)
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.to_arrow().equals(ds.to_arrow()) and copy.version == ds.version


def test_sources_on_s3_through_the_disk_cache_fetch_each_part_once(s3, tmp_path):
    from tests.s3proxy import CountingProxy

    proxy = CountingProxy.in_front_of(s3("x"))
    try:
        uris = []
        for k, rows in enumerate((200, 120)):
            plugin = make_plugin(
                tmp_path / f"p{k}", PLUGIN.format(source=k, rows=rows, label="int64")
            )
            uri = s3(f"mix/{k}")
            recordmill.write(plugin, uri, partitions=2, row_group_size=8, progress=False)
            uris.append(proxy.through(uri))
        total = sum(
            sum(p["bytes"] for p in recordmill.read_manifest(u)["partitions"]) for u in uris
        )
        cache = tmp_path / "cache"
        for epoch in range(2):  # a new job each epoch: the second finds every part cached
            m = recordmill.mix(uris, until="all_exhausted_without_replacement", cache_dir=cache)
            m.warm()  # manifests and footers read: what follows is the rows
            proxy.counts.take()
            ids = [i for b in m.iter_batches(32, epoch=epoch) for i in b["id"].tolist()]
            assert sorted(ids) == sorted([*range(200), *range(100_000, 100_120)])
            fetched = [ds.cache.fetched_parts for ds in m.datasets]
            parts = [len(ds.cache.parts) for ds in m.datasets]
            assert fetched == (parts if epoch == 0 else [0, 0]), (epoch, fetched, parts)
            _, pulled = proxy.counts.take()
            assert pulled <= (1.15 * total if epoch == 0 else 0.1 * total), (epoch, pulled, total)
    finally:
        proxy.close()


def test_persistent_workers_follow_a_resumed_mixture(sources):
    m = recordmill.mix(sources, [0.6, 0.3, 0.1], seed=6)
    want = [b["id"].tolist() for b in loader(m)]
    data = rtorch.IterableDataset(m, columns=["id"])
    persistent = rtorch.DataLoader(data, batch_size=16, num_workers=2, persistent_workers=True)
    assert [b["id"].tolist() for b in persistent] == want
    it = iter(persistent)  # epoch 1, the same workers
    next(it)
    del it
    state = loader(m).state_dict() | {"epoch": 0, "position": 48}
    persistent.load_state_dict(state)
    assert [b["id"].tolist() for b in persistent] == want[3:]


def test_persistent_workers_follow_a_resume_with_other_weights(sources):
    """The workers' copies of the mixture never see the resume's weights: they read the order
    the loader drew with them."""
    first = loader(recordmill.mix(sources, [0.6, 0.3, 0.1], seed=3), 1)
    it = iter(first)
    [next(it) for _ in range(5)]
    state = first.state_dict()
    del it
    after = recordmill.mix(sources, [0.1, 0.1, 0.8], seed=3)
    plain = loader(after, 0)
    plain.load_state_dict(state)
    want = ids_of(plain)
    data = rtorch.IterableDataset(after, columns=["id"])
    persistent = rtorch.DataLoader(data, batch_size=16, num_workers=2, persistent_workers=True)
    next(iter(persistent))  # the workers start, on the mixture as it was made
    persistent.load_state_dict(state)
    assert ids_of(persistent) == want


def test_a_resume_at_the_row_where_a_schedule_steps_goes_on_exactly(sources):
    steps = [(0, [1, 1, 0]), (160, [0, 1, 1])]  # the step falls where a batch of 16 begins

    def made():
        return loader(
            recordmill.mix(sources, steps, seed=3, until="all_exhausted_without_replacement")
        )

    full = [b["id"].tolist() for b in made()]
    first = made()
    it = iter(first)
    head = [next(it)["id"].tolist() for _ in range(10)]
    state = first.state_dict()
    del it
    assert state["position"] == 160
    again = made()
    again.load_state_dict(state)
    assert head + [b["id"].tolist() for b in again] == full


def test_each_source_decodes_and_skips_as_it_was_opened(sources):
    def bump(label):
        return label + 1000

    plus = recordmill.open(sources[0], decode={"label": bump})
    m = recordmill.mix({"plus": plus, "plain": sources[2]}, [1, 1])
    for skip in ("raise", "skip"):
        data = rtorch.DataLoader(rtorch.IterableDataset(m, on_error=skip), batch_size=16)
        rows = [
            (i, label)
            for b in data
            for i, label in zip(b["id"].tolist(), b["label"].tolist(), strict=True)
        ]
        assert rows and all((label >= 1000) == (i < 100_000) for i, label in rows), skip


def test_an_empty_source_ends_a_first_exhausted_epoch_and_cannot_repeat(sources, tmp_path):
    empty = write(tmp_path, "empty", 0, 9)
    m = recordmill.mix([sources[0], str(empty)], [1, 1])
    assert len(m) == 0  # its first draw finds it empty
    every = recordmill.mix(
        [sources[0], str(empty)], [1, 1], until="all_exhausted_without_replacement"
    )
    assert len(every) == 600  # it leaves the draw at once
    with pytest.raises(ValueError, match="source 'empty' has no rows, so it cannot start over"):
        recordmill.mix([sources[0], str(empty)], [1, 1], rows=10)
    assert len(recordmill.mix([sources[0], str(empty)], [1, 0], rows=10)) == 10


def test_a_mixtures_order_is_drawn_once_a_machine_by_all_it_depends_on(
    sources, monkeypatch, tmp_path
):
    from recordmill.read.machine import shared_orders

    unshared = {}
    for weights, shuffle in (
        ((0.6, 0.3, 0.1), True),
        ((0.2, 0.3, 0.5), True),
        ((0.6, 0.3, 0.1), False),
    ):
        for epoch in (0, 1):
            m = recordmill.mix(sources, list(weights), seed=4, shuffle=shuffle)
            unshared[weights, shuffle, epoch] = m.order(epoch).tolist()
    monkeypatch.setattr(shared_orders, "SHARE_ROWS", 1)
    monkeypatch.setenv("RECORDMILL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RECORDMILL_ORDER_LOG", str(tmp_path / "drawn"))
    drawn = tmp_path / "drawn"
    for _job in range(2):  # a second job finds every order drawn
        for (weights, shuffle, epoch), expected in unshared.items():
            m = recordmill.mix(sources, list(weights), seed=4, shuffle=shuffle)
            assert m.order(epoch).tolist() == expected
        # 6 mixture orders, and each source's shuffled order of each epoch (one for both weights)
        assert len(drawn.read_text().splitlines()) == 6 + 3 * 2


PADDED = """
    def task_number():
        return 4

    def schema():
        return {"id": {"type": "int64"}, "pad": {"type": "bytes"}}

    def dict_data(task_id):
        for i in range(100):
            yield {"id": task_id * 100 + i, "pad": bytes(2000)}
"""


def test_shards_of_one_source_are_told_apart_by_the_machines_orders(monkeypatch, tmp_path):
    """Two shards of a source have its identity; through a small disk cache each has a block
    order of its own rows, which one drawn for the other must not stand in for."""
    from recordmill.read.machine import shared_orders

    recordmill.write(make_plugin(tmp_path / "p", PADDED), tmp_path / "ds", partitions=4,
                     row_group_size=10, progress=False)  # fmt: skip
    cache = {"cache_dir": str(tmp_path / "cache"), "cache_limit": 60_000}  # 2 parts of 10

    def mixtures():
        ds = recordmill.open(str(tmp_path / "ds"), **cache)
        return [recordmill.mix([ds.shard(rank, 2), ds.shard(rank, 2)], seed=1) for rank in (0, 1)]

    assert mixtures()[0].datasets[0].order_blocks() > 0
    unshared = [m.order(0).tolist() for m in mixtures()]
    assert unshared[0] != unshared[1]
    monkeypatch.setattr(shared_orders, "SHARE_ROWS", 1)
    assert [m.order(0).tolist() for m in mixtures()] == unshared
