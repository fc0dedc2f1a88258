"""read/order.py's contract, stated exactly: what each order is, computed here with numpy from
its definition (the mutants mutmut left alive in it, each closed by one of these: see
docs/development.md)."""

from __future__ import annotations

import numpy as np
import pytest

from recordmill.read import order


@pytest.mark.parametrize(
    ("rows", "seed", "epoch"), [(10, 0, 0), (1000, 3, 2), ((1 << 20) + 3, 1, 1)]
)
def test_a_permutation_is_numpys_from_seed_plus_epoch(rows, seed, epoch):
    """Past 2**20 rows too: the row numbers are filled a million at a time."""
    expected = np.random.default_rng(seed + epoch).permutation(rows)
    assert np.array_equal(order.permutation(rows, seed, epoch), expected)


def test_windows_of_one_or_none_keep_the_order():
    for window in (0, 1):
        assert order.within_windows(7, window, 5, 1).tolist() == list(range(7))


@pytest.mark.parametrize(("count", "window"), [(10, 2), (11, 3), (5, 8)])
def test_each_window_holds_its_own_rows_shuffled_by_seed_epoch_and_window(count, window):
    got = order.within_windows(count, window, seed=4, epoch=2)
    runs = [got[lo : lo + window].tolist() for lo in range(0, count, window)]
    assert [sorted(run) for run in runs] == [
        list(range(lo, min(count, lo + window))) for lo in range(0, count, window)
    ]
    keys = np.random.default_rng([4, 2, window]).random(count)
    expected = [
        sorted(range(lo, min(count, lo + window)), key=lambda i: keys[i])
        for lo in range(0, count, window)
    ]
    assert runs == expected


def block(parts, capacity, seed, epoch):
    """The block order by its definition: parts in part_order, in windows of half the capacity,
    each window's rows permuted by the generator of (seed, epoch, 1)."""
    taken = order.part_order(len(parts), capacity, seed, epoch)
    rng = np.random.default_rng([seed, epoch, 1])
    window = max(1, capacity // 2)
    pieces = [
        rng.permutation(np.concatenate([np.arange(*parts[k]) for k in taken[lo : lo + window]]))
        for lo in range(0, len(taken), window)
    ]
    return np.concatenate(pieces)


PARTS = [(0, 5), (5, 12), (12, 13), (13, 20), (20, 26), (26, 30), (30, 37)]


@pytest.mark.parametrize("capacity", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("epoch", [0, 1, 3])
def test_a_block_order_takes_its_parts_in_windows_of_half_the_cache(capacity, epoch):
    got = order.block_order(PARTS, capacity, seed=9, epoch=epoch)
    assert np.array_equal(got, block(PARTS, capacity, 9, epoch))
    assert sorted(got.tolist()) == list(range(37))


def test_a_cache_that_holds_every_part_gives_a_full_permutation():
    for capacity in (7, 8):
        assert np.array_equal(
            order.block_order(PARTS, capacity, 2, 1), np.random.default_rng(3).permutation(37)
        )


@pytest.mark.parametrize(
    ("count", "capacity", "kept"),
    [(10, 4, 4), (9, 4, 3), (9, 5, 5), (3, 8, 3), (10, 1, 1), (7, 3, 3)],
)
def test_the_parts_carried_over_are_the_last_window_and_whole_windows_beside_it(
    count, capacity, kept
):
    assert order.carried(count, capacity) == kept


def test_a_later_epoch_starts_with_the_parts_the_last_one_ended_with():
    count, capacity = 10, 4
    kept = order.carried(count, capacity)
    for epoch in range(1, 4):
        before, now = (
            order.part_order(count, capacity, 1, epoch - 1),
            order.part_order(count, capacity, 1, epoch),
        )
        assert sorted(now[:kept].tolist()) == sorted(before[-kept:].tolist())
        assert sorted(now.tolist()) == list(range(count))
        rng = np.random.default_rng([1, epoch, 0])
        expected = np.concatenate(
            [rng.permutation(before[-kept:]), rng.permutation(before[:-kept])]
        )
        assert np.array_equal(now, expected)


def test_spans_are_each_parts_rows_within_a_view():
    parts = [range(0, 5), range(5, 9), range(9, 15)]
    assert order.spans(parts, 3, 11) == [(0, 2), (2, 6), (6, 8)]
    assert order.spans(parts, 10, 12) == [(0, 0), (0, 0), (0, 2)]  # empty spans kept


def test_same_part_neighbours_is_the_fraction_of_adjacent_rows_of_one_part():
    parts = [(0, 3), (3, 6)]
    assert order.same_part_neighbours(np.arange(6), parts) == pytest.approx(4 / 5)
    assert order.same_part_neighbours(np.array([0, 3, 1, 4, 2, 5]), parts) == 0.0
    assert order.same_part_neighbours(np.array([2]), parts) == 0.0


def test_the_first_epochs_part_order_is_a_permutation_of_its_own_seed():
    for seed in (0, 5):
        expected = np.random.default_rng([seed, 0, 0]).permutation(9)
        assert np.array_equal(order.part_order(9, 4, seed, 0), expected)
    assert np.array_equal(order.block_order(PARTS, 4, 9), order.block_order(PARTS, 4, 9, epoch=0))


def test_two_rows_of_one_part_are_neighbours():
    assert order.same_part_neighbours(np.array([0, 1]), [(0, 3), (3, 6)]) == 1.0
