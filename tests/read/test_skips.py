"""on_error="skip": truncated and empty JPEGs among good ones (made with Pillow here) are left
out of training, listed, and the batches stay full and resume exactly."""

from __future__ import annotations

import itertools
import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
import recordmill.decode

import recordmill
from recordmill.read.skips import ReadReject
from tests.conftest import make_plugin
from tests.read.damaged_jpegs import BAD, PLUGIN

# 4 of the 100 rows fail: more than the 1% an epoch's warning is for (its own test sees it)
pytestmark = pytest.mark.filterwarnings("ignore::recordmill.read.torch.chunks.RejectsWarning")

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch==2.13.0)")
from recordmill.torch import DataLoader, IterableDataset, MapDataset, Sampler  # noqa: E402

from recordmill.read.torch.chunks import Chunk, Rebatcher, RejectsWarning, TooManyRejects  # noqa: E402
from recordmill.read.torch.loader import _Pieces  # noqa: E402

DECODE = {"data": recordmill.decode.image}


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("skips")
    out = root / "ds"
    recordmill.write(
        make_plugin(root / "p", PLUGIN), out, partitions=2, row_group_size=10, progress=False
    )
    return str(out)


def ids(row):
    return row["id"]


def loader(images, kind="iterable", workers=0, transform=ids, **kwargs):
    skip = {"decode": DECODE, "transform": transform, "on_error": "skip"}
    if kind == "iterable":
        data = IterableDataset(images, shuffle=True, seed=1, **skip)
        return DataLoader(data, batch_size=8, num_workers=workers, **kwargs)
    return DataLoader(
        MapDataset(images, **skip),
        batch_size=8,
        shuffle=True,
        seed=1,
        num_workers=workers,
        **kwargs,
    )


@pytest.mark.parametrize("kind", ["iterable", "map"])
@pytest.mark.parametrize("workers", [0, 1, 2])
def test_the_bad_rows_are_left_out_and_listed_and_batches_stay_full(images, kind, workers):
    data = loader(images, kind, workers)
    assert len(data) == 13  # counted before a row is read: 100 rows, its rejects not yet known
    batches = [b.tolist() for b in data]
    assert [len(b) for b in batches] == [8] * 12  # 96 good rows
    seen = [i for b in batches for i in b]
    assert sorted(seen) == sorted(set(range(100)) - BAD)  # the EXIF-damaged row decodes: kept
    assert {r.row for r in data.rejects} == BAD
    by_row = {r.row: r for r in data.rejects}
    assert by_row[30].error.startswith("ValueError: Pillow does not recognise these bytes")
    assert "Truncated" in by_row[7].error or "truncated" in by_row[7].error
    assert {r.column for r in data.rejects} == {"data"}
    assert {r.version for r in data.rejects} == {1} and {r.rank for r in data.rejects} == {0}
    assert {r.worker for r in data.rejects} <= ({None} if workers == 0 else set(range(workers)))
    # The same batches as with no worker: the order does not depend on them.
    assert batches == [b.tolist() for b in loader(images, kind, 0)]
    # Batch k holds the good rows k*8 to k*8+7 of the order.
    order = recordmill.open(images).shuffled(1, 0)
    assert seen == [int(i) for i in order if i not in BAD]


@pytest.mark.parametrize("kind", ["iterable", "map"])
def test_an_epochs_rejects_are_its_own_after_a_pass_left_off_or_a_resume(images, kind):
    data = loader(images, kind, max_read_rejects=len(BAD))  # an epoch may have them all
    for _ in data:  # a pass left off after its first reject (Lightning's limit_train_batches)
        if data.state_dict()["read_rejects"]:
            break
    before = len(data.rejects)
    data.set_epoch(1)
    assert len(list(data)) == 12  # not one reject too many: the last epoch's are not counted
    assert len(data.rejects) - before == len(BAD)
    ended = loader(images, kind)
    it = iter(ended)
    for _ in range(12):
        next(it)  # the epoch's last batch; the loop asks for no more
    state = ended.state_dict()
    assert (state["epoch"], state["position"], state["read_rejects"]) == (0, 100, len(BAD))
    resumed = loader(images, kind)
    resumed.load_state_dict(state)
    assert (resumed.state_dict()["epoch"], resumed.state_dict()["read_rejects"]) == (1, 0)
    assert len(loader(images, kind, drop_last=True)) == 12  # 100 // 8, as torch counts


@pytest.mark.parametrize("kind", ["iterable", "map"])
@pytest.mark.parametrize("stop", [1, 3, 6, 12])
def test_a_job_stopped_after_a_skip_resumes_with_the_same_batches(images, kind, stop):
    full = [b.tolist() for b in loader(images, kind)]
    first = loader(images, kind, workers=2)
    it = iter(first)
    head = [next(it).tolist() for _ in range(stop)]
    state = json.loads(json.dumps(first.state_dict()))  # as a checkpoint keeps it
    del it
    listed = {r.row for r in first.rejects}
    again = loader(images, kind, workers=1)
    again.load_state_dict(state)
    if stop == len(full):  # saved after the epoch's last batch: the next epoch comes
        assert again.state_dict()["epoch"] == 1 and head == full
        return
    assert head + [b.tolist() for b in again] == full
    # Each reject is listed once over the two jobs, and the state counts those before it.
    assert listed | {r.row for r in again.rejects} == BAD
    assert not listed & {r.row for r in again.rejects}
    assert state["read_rejects"] == len(listed)


def test_a_transform_that_raises_is_a_reject_of_the_transform(images):
    def odd(row):
        if row["id"] % 10 == 3:
            raise KeyError("a shape this transform never met")
        return row["id"]

    data = loader(images, transform=odd, max_read_rejects=None)  # 14 of 100: no bound
    seen = [i for b in data for i in b.tolist()]
    transform = {r.row for r in data.rejects if r.column == "transform"}
    assert transform == {i for i in range(100) if i % 10 == 3} - BAD
    assert not set(seen) & (transform | BAD)
    assert str(data.rejects[0]).startswith("row ") and "KeyError" in " ".join(
        map(str, data.rejects)
    )


def test_a_flood_of_rejects_is_one_error_naming_the_first(images):
    def broken(row):
        raise RuntimeError("no such field")

    with pytest.raises(TooManyRejects, match=r"max_read_rejects=3 allows: .* the first: row \d+ "):
        list(loader(images, transform=broken, max_read_rejects=3))
    with pytest.raises(TooManyRejects, match=r"more than max_read_rejects=0\.03"):
        list(loader(images, max_read_rejects=0.03))  # 4 of 100 rows fail: more than 3
    assert len([b for b in loader(images, max_read_rejects=4)]) == 12  # 4 is allowed
    with pytest.raises(ValueError, match="max_read_rejects must be a count or a fraction"):
        loader(images, max_read_rejects=-1)


def test_the_rejects_log_takes_the_lines_of_two_ranks_writing_at_once(images, tmp_path):
    log = tmp_path / "rejects.jsonl"
    script = f"""
import sys, recordmill.decode
from recordmill.torch import DataLoader, IterableDataset
rank = int(sys.argv[1])
data = IterableDataset({images!r}, decode={{"data": recordmill.decode.image}}, on_error="skip",
                       shuffle=True, seed=1, rank=rank, world_size=2)
for _ in range(20):  # many epochs: many lines at once
    list(DataLoader(data, batch_size=4, rejects_log={str(log)!r}))
"""
    ranks = [subprocess.Popen([sys.executable, "-c", script, str(r)]) for r in (0, 1)]
    assert all(p.wait(timeout=120) == 0 for p in ranks)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 20 * len(BAD)
    assert {line["row"] for line in lines} == BAD
    assert {line["rank"] for line in lines} == {0, 1}
    assert sorted(lines[0]) == ["column", "error", "rank", "row", "source", "version", "worker"]


@pytest.mark.parametrize("kind", ["iterable", "map"])
def test_ranks_that_skip_resume_each_from_its_own_state(images, kind):
    def ranked(rank, workers):
        if kind == "iterable":
            data = IterableDataset(
                images,
                decode=DECODE,
                transform=ids,
                on_error="skip",
                shuffle=True,
                seed=1,
                rank=rank,
                world_size=2,
            )
            return DataLoader(data, batch_size=8, num_workers=workers)
        data = MapDataset(images, decode=DECODE, transform=ids, on_error="skip")
        return DataLoader(
            data,
            batch_size=8,
            num_workers=workers,
            sampler=Sampler(data, seed=1, rank=rank, world_size=2),
        )

    seen, counted = [], []
    for rank in (0, 1):
        full = [b.tolist() for b in ranked(rank, 0)]
        # as many batches, as full, as without rejects (50 rows a rank): DDP's steps in step
        assert [len(b) for b in full] == [8] * 6 + [2] == [len(b) for b in ranked(rank, 0)]
        seen += [i for b in full for i in b]
        first = ranked(rank, 2)
        it = iter(first)
        head = [next(it).tolist() for _ in range(3)]
        state = first.state_dict()
        del it
        assert state["rank"] == rank and state["stream"] >= 24
        again = ranked(rank, 1)
        again.load_state_dict(state)
        assert len(again) == len(full)  # the whole epoch's, as Lightning counts them
        if kind == "iterable":  # the rank's rows still to read
            assert len(again.dataset) == len(ranked(rank, 0).dataset) - state["stream"]
        rest = iter(again)
        following = next(rest).tolist()
        # the epoch's rejects counted on from the state's, not from none
        counted.append((state["read_rejects"], again.state_dict()["read_rejects"]))
        assert head + [following] + [b.tolist() for b in rest] == full
        with pytest.raises(
            ValueError, match=f"is rank {rank} of 2's and this is rank {1 - rank} of 2"
        ):
            ranked(1 - rank, 0).load_state_dict(state)
        alone = {k: v for k, v in state.items() if k not in ("rank", "world_size")}
        with pytest.raises(ValueError, match=f"state names no rank and this is rank {rank} of 2"):
            ranked(rank, 0).load_state_dict(alone)
        # a state saved after the rank's last batch (zip, islice) resumes at the next epoch
        ended = ranked(rank, 0)
        last = [b.tolist() for b in itertools.islice(ended, len(ended))]
        resumed = ranked(rank, 0)
        resumed.load_state_dict(ended.state_dict())
        assert last == full and resumed.state_dict()["epoch"] == 1
        assert len(list(resumed)) == len(full)
    # every good row, and in place of the 4 bad ones the first good rows of the order again
    assert set(seen) == set(range(100)) - BAD and len(seen) == 100
    assert all(after >= saved for saved, after in counted) and any(s for s, _ in counted)


def test_ranks_stay_in_step_when_one_ranks_share_is_all_bad(images):
    """Rank 1's rows all fail: it hands out as many batches as rank 0, of the good rows of the
    order from its first (where once it gave none, and DDP waited for its steps forever)."""

    def even_only(row):
        if row["id"] % 2:
            raise ValueError("an odd row")
        return row["id"]

    def ranked(rank):
        data = MapDataset(images, decode=DECODE, transform=even_only, on_error="skip")
        sampler = Sampler(data, shuffle=False, rank=rank, world_size=2)
        return DataLoader(data, batch_size=8, sampler=sampler, max_read_rejects=None)

    good = [i for i in range(0, 100, 2) if i not in BAD]
    batches = [[b.tolist() for b in ranked(rank)] for rank in (0, 1)]
    assert [len(b) for b in batches[0]] == [len(b) for b in batches[1]] == [8] * 6 + [2]
    assert [i for b in batches[0] for i in b] == good + good[:2]  # 48 good rows of its 50
    assert [i for b in batches[1] for i in b] == good + good[:2]  # read again, in order
    epoch = ranked(1)
    list(epoch)
    assert {r.row for r in epoch.rejects} == set(range(1, 100, 2))  # its share, each once
    for stop in (2, 4):  # stopped while it reads the order again: resumed where it was
        first = ranked(1)
        rows = iter(first)
        head = [next(rows).tolist() for _ in range(stop)]
        state = first.state_dict()
        assert state["padded"] >= 16 * stop  # the order's rows read again: half are odd
        again = ranked(1)
        again.load_state_dict(state)
        assert head + [b.tolist() for b in again] == batches[1]


@pytest.mark.parametrize("drop", [False, True])
def test_a_share_of_whole_batches_ends_on_a_full_batch(images, drop):
    """50 rows a rank in batches of 10: five full batches each, the last too, rows skipped or
    not (a last batch of the share's remainder, 0 rows, was the edge of that count)."""

    def ranked(rank):
        data = MapDataset(images, decode=DECODE, transform=ids, on_error="skip")
        sampler = Sampler(data, shuffle=False, rank=rank, world_size=2)
        return DataLoader(data, batch_size=10, sampler=sampler, drop_last=drop)

    for rank in (0, 1):
        assert [len(b) for b in ranked(rank)] == [10] * 5


def test_a_share_without_rejects_reads_no_row_of_the_order_again(images):
    """A rank whose rows all pass hands out its share as it is, the last batch short, and its
    state after that batch counts no row of the order read again (``padded``)."""
    data = MapDataset(images, transform=ids, on_error="skip")
    sampler = Sampler(data, shuffle=False, rank=1, world_size=2)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    rows = iter(loader)
    batches = [next(rows).tolist() for _ in range(len(loader))]
    state = loader.state_dict()
    assert [len(b) for b in batches] == [8] * 6 + [2]
    assert [i for b in batches for i in b] == list(range(1, 100, 2))  # rank 1's share
    assert (state["batches"], state["padded"]) == (7, 0)


def test_an_epoch_without_a_good_row_is_an_error_naming_its_rejects(images):
    def broken(row):
        raise OSError("no such codec")

    for world in (1, 2):
        data = MapDataset(images, decode=DECODE, transform=broken, on_error="skip")
        sampler = Sampler(data, shuffle=True, seed=1, rank=0, world_size=world)
        loader = DataLoader(data, batch_size=8, sampler=sampler, max_read_rejects=None)
        with pytest.raises(TooManyRejects) as caught:
            list(loader)
        assert str(caught.value).startswith(
            f"every row of this epoch's {100 // world} failed to decode or transform "
        )
        assert "no batch to hand out; the first: row " in str(caught.value)
    # fewer good rows than a batch, drop_last: no batch, and no such error (96 rows were good)
    few = DataLoader(
        MapDataset(images, decode=DECODE, transform=ids, on_error="skip"),
        batch_size=128,
        drop_last=True,
    )
    assert list(few) == [] and len(few.rejects) == len(BAD)


def test_a_tenth_of_an_epochs_rows_failing_is_an_error_by_default_and_a_hundredth_a_warning(
    images,
):
    def some(row):
        if row["id"] % 10 == 3:
            raise KeyError("a shape this transform never met")
        return row["id"]

    with pytest.raises(TooManyRejects, match=r"more than max_read_rejects=0\.1 allows"):
        list(loader(images, transform=some))  # 14 of 100 rows
    data = loader(images)  # 4 of 100 rows, over two epochs: one warning each
    with pytest.warns(RejectsWarning) as warned:
        list(data), list(data)
    assert [str(w.message).split(";")[0] for w in warned] == [
        "2 of this epoch's 100 rows failed to decode or transform and were left out (more than 1%)"
    ] * 2


def test_a_mixture_names_the_source_of_a_reject(images):
    m = recordmill.mix({"photos": images, "again": images}, [1, 1], decode=DECODE)
    data = DataLoader(IterableDataset(m, transform=ids, on_error="skip"), batch_size=8)
    rows = [i for b in data for i in b.tolist()]
    assert len(rows) + len(data.rejects) == len(m)
    assert {r.source for r in data.rejects} <= {"photos", "again"} and data.rejects


def test_mistakes_are_one_clear_line(images):
    with pytest.raises(ValueError, match="on_error must be one of raise, skip, got 'ignore'"):
        MapDataset(images, on_error="ignore")
    with pytest.raises(TypeError, match="give cache_dir, cache_limit and on_error to the dataset"):
        DataLoader(MapDataset(images), on_error="skip")
    data = DataLoader(images, on_error="skip", batch_size=10)  # a path: a MapDataset of it
    assert sum(len(b["id"]) for b in data) == 100  # nothing decodes, nothing fails
    # Without skip, a bad row raises, as before.
    with pytest.raises(ValueError, match="Pillow"):
        list(DataLoader(MapDataset(images, decode=DECODE, transform=ids), batch_size=8))


def test_a_plain_torch_dataloader_gets_the_good_rows_in_short_batches(images):
    good = sorted(set(range(100)) - set(BAD))
    for data in (
        IterableDataset(images, decode=DECODE, transform=ids, on_error="skip"),
        MapDataset(images, decode=DECODE, transform=ids, on_error="skip"),
    ):
        batches = list(torch.utils.data.DataLoader(data, batch_size=10))
        assert sorted(i for b in batches for i in b.tolist()) == good
        assert min(len(b) for b in batches) < 10  # where a row was left out


def test_a_row_read_alone_raises_where_it_fails(images):
    """``ds[i]`` of a MapDataset made with ``on_error="skip"``: one row alone has nothing to take
    its place, so a row that fails raises its own error; a good row is given."""
    data = MapDataset(images, decode=DECODE, transform=ids, on_error="skip")
    good = next(i for i in range(100) if i not in BAD)
    assert data[good] == good
    with pytest.raises(ValueError, match="Pillow"):
        data[min(BAD)]


def test_the_rebatcher_cuts_the_good_rows_and_gives_each_reject_when_passed():
    def chunk(start, bad):
        rows = list(range(start, start + 4))
        return Chunk(
            samples=[r for r in rows if r not in bad],
            offsets=[k for k, r in enumerate(rows) if r not in bad],
            rejects=[ReadReject(r, "data", "bad") for r in rows if r in bad],
            failed=[k for k, r in enumerate(rows) if r in bad],
            rows=4,
        )

    pieces = _Pieces(list)
    cut = Rebatcher(3, pieces, drop_last=False)
    out = [*cut.feed(chunk(0, {1})), *cut.feed(chunk(4, {4, 7})), *cut.feed(chunk(8, set()))]
    assert [(b, reached, [r.row for r in rej]) for b, reached, rej in out] == [
        ([0, 2, 3], 4, [1]),
        ([5, 6, 8], 9, [4, 7]),
        ([9, 10, 11], 12, []),
    ]
    assert [(b, reached) for b, reached, _ in cut.rest()] == [(None, 12)]
    tail = Rebatcher(4, pieces, drop_last=False)  # a reject between the last two rows
    list(tail.feed(chunk(0, {2})))
    assert [(b, [r.row for r in rej]) for b, _, rej in tail.rest()] == [([0, 1, 3], [2])]
    short = Rebatcher(3, pieces, drop_last=False)
    list(short.feed(chunk(0, {1, 3})))
    assert [(b, [r.row for r in rej]) for b, _, rej in short.rest()] == [([0, 2], [1, 3])]
    last = Rebatcher(3, pieces, drop_last=True)
    list(last.feed(chunk(0, {3})))
    assert [(b, [r.row for r in rej]) for b, _, rej in last.rest()] == [(None, [3])]


def test_the_rebatcher_gives_what_was_passed_once(tmp_path):
    def chunk(rows, bad):
        good = [k for k in range(rows) if k not in bad]
        rejects = [ReadReject(k, "data", "bad") for k in sorted(bad)]
        return Chunk(samples=good, offsets=good, rejects=rejects, failed=sorted(bad), rows=rows)

    cut = Rebatcher(8, _Pieces(list), drop_last=False)
    assert list(cut.feed(chunk(4, {1}))) == [] and [r.row for r in cut.passed()] == [1]
    assert list(cut.feed(chunk(4, {0, 2}))) == [] and [r.row for r in cut.passed()] == [0, 2]
    assert cut.passed() == []


def test_the_ledger_bounds_warns_and_logs_each_reject_in_whole_lines(tmp_path):
    from recordmill.read.torch.chunks import Ledger

    rejects = [ReadReject(n, "data", "OSError: bad") for n in (5, 9, 12, 40)]
    assert Ledger(0, None).limit == 0  # a count from 0: no reject at all
    for limit in (-1, True, -0.5):
        with pytest.raises(ValueError) as caught:
            Ledger(limit, None)
        assert (
            str(caught.value)
            == f"max_read_rejects must be a count or a fraction from 0, got {limit!r}"
        )
    log = tmp_path / "rejects.jsonl"
    ledger = Ledger(3, log)
    ledger.start_epoch()
    with pytest.warns(RejectsWarning) as warned:
        ledger.add(rejects[:2], 100)
    assert [str(w.message) for w in warned] == [
        "2 of this epoch's 100 rows failed to decode or transform and were left out (more than "
        "1%); the first: row 5 (data): OSError: bad; row 9 (data): OSError: bad"
    ]
    with pytest.raises(TooManyRejects) as caught:
        ledger.add(rejects[2:], 100)
    assert str(caught.value) == (
        "4 rows failed to decode or transform this epoch, more than max_read_rejects=3 allows: "
        "that many means a broken decoder or transform, not bad rows; the first: row 5 (data): "
        "OSError: bad; row 9 (data): OSError: bad; row 12 (data): OSError: bad"
    )
    lines = log.read_text().splitlines()
    assert [json.loads(line)["row"] for line in lines] == [5, 9, 12, 40]
    assert stat.S_IMODE(log.stat().st_mode) == 0o644 & ~current_umask()
    assert str(ledger.nothing_handed_out(4)) == (
        "every row of this epoch's 4 failed to decode or transform (4 rejects): no batch to hand "
        "out; the first: row 5 (data): OSError: bad; row 9 (data): OSError: bad; row 12 (data): "
        "OSError: bad"
    )
    exact = Ledger(3, None)  # at the bound: allowed; one warning an epoch
    with pytest.warns(RejectsWarning) as warned:
        exact.add(rejects[:1], 10)
        exact.add(rejects[1:3], 10)
    assert exact.epoch_count == 3 and len(warned) == 1
    ledger.start_epoch()
    assert str(ledger.nothing_handed_out(0)).endswith(
        "(0 rejects): no batch to hand out; the first: none"
    )


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_nothing_is_decoded_twice_when_nothing_fails(images, monkeypatch):
    calls = []

    def counted(data):
        calls.append(1)
        return recordmill.decode.image(data)

    fine = recordmill.open(images).take(np.array(sorted(set(range(100)) - BAD)))
    assert len(fine) == 96
    data = DataLoader(
        IterableDataset(images, decode={"data": counted}, on_error="skip"), batch_size=8
    )
    list(data)
    assert len(calls) == 100  # each row decoded once, the bad ones included


def test_batches_cut_after_a_skip_are_the_collate_of_their_rows(images):
    def sample(row):
        return {
            "image": torch.from_numpy(row["data"]),
            "name": f"r{row['id']}",
            "pair": (row["id"], 0.5),
        }

    data = loader(images, "iterable", workers=2, transform=sample)
    order = [int(i) for i in recordmill.open(images).shuffled(1, 0) if i not in BAD]
    plain = recordmill.open(images, decode=DECODE)
    for k, batch in enumerate(data):
        want = torch.utils.data.default_collate(
            [sample(plain[i]) for i in order[k * 8 : k * 8 + 8]]
        )
        assert torch.equal(batch["image"], want["image"]) and batch["name"] == want["name"]
        assert torch.equal(batch["pair"][0], want["pair"][0]) and torch.equal(
            batch["pair"][1], want["pair"][1]
        )


def test_open_with_skip_leaves_the_bad_rows_out_of_every_read(images):
    ds = recordmill.open(images, decode=DECODE, on_error="skip")
    good = sorted(set(range(100)) - BAD)
    assert [row["id"] for row in ds.iter_rows()] == good
    assert sorted(r.row for r in ds.read_rejects) == sorted(BAD)
    assert [row["id"] for row in ds.rows([5, 7, 8, 30])] == [5, 8]
    batches = list(ds.iter_batches(10))
    assert [i for b in batches for i in b["id"].tolist()] == good
    assert all(len(b["data"]) == len(b["id"]) for b in batches)  # columns cut alike
    assert [len(b["id"]) for b in batches] == [9, 10, 10, 9, 10, 9, 10, 10, 9, 10]  # rows left out
    shuffled = [i for b in ds.iter_batches(16, shuffle=True, seed=2) for i in b["id"].tolist()]
    assert sorted(shuffled) == good
    assert {r.column for r in ds.read_rejects} == {"data"} and {
        r.version for r in ds.read_rejects
    } == {1}
    with pytest.raises(ValueError, match="Pillow"):
        ds[7]  # one row asked for: nothing takes its place
    with pytest.raises(ValueError, match="on_error must be one of raise, skip, got 'drop'"):
        recordmill.open(images, on_error="drop")
    with pytest.raises(ValueError, match="Pillow"):
        list(recordmill.open(images, decode=DECODE).iter_rows())  # the default raises


def test_a_decode_of_a_column_not_read_is_no_reject(images):
    # decode= names "data", columns= leaves it out: as without skips, it is not applied.
    data = IterableDataset(images, columns=["id"], decode=DECODE, on_error="skip")
    loader = DataLoader(data, batch_size=10)
    assert sum(len(b["id"]) for b in loader) == 100 and loader.rejects == []
