"""read/dealing.py against its definition: every row of the extent dealt once, every rank as many
batches (with ``even`` set), whole rounds in turn, and the counts it gives without dealing."""

from __future__ import annotations

import itertools

import pytest

from recordmill.read import dealing
from tests.read.dealt import dealt

CASES = list(itertools.product(range(0, 23), (1, 2, 3, 5), (1, 2, 3, 4)))


@pytest.mark.parametrize("even", dealing.EVEN)
def test_every_row_of_the_extent_is_dealt_once_and_counted(even):
    for rows, size, world in CASES:
        extent = dealing.extent(rows, size, world, even)
        dealt_rows = []
        for rank in range(world):
            mine = list(dealing.batches(extent, size, rank, world, even))
            taken = [row for batch in mine for row in batch]
            counted = dealing.rank_rows(extent, size, rank, world, even)
            assert type(counted) is int and counted == len(taken), (
                rows,
                size,
                world,
                rank,
            )
            assert all(0 < len(batch) <= size for batch in mine)
            dealt_rows += taken
        assert sorted(dealt_rows) == list(range(extent)), (rows, size, world, even)


@pytest.mark.parametrize("even", ["pad", "drop"])
def test_with_even_every_rank_takes_as_many_batches_and_rows(even):
    for rows, size, world in CASES:
        extent = dealing.extent(rows, size, world, even)
        shares = [list(dealing.batches(extent, size, r, world, even)) for r in range(world)]
        assert len({len(s) for s in shares}) == 1, (rows, size, world)
        assert len({sum(map(len, s)) for s in shares}) == 1, (rows, size, world)


def test_the_extent_pads_to_or_drops_to_a_whole_number_a_rank_after_whole_rounds():
    for rows, size, world in CASES:
        rest = rows % (size * world)
        assert dealing.extent(rows, size, world, None) == rows
        padded = dealing.extent(rows, size, world, "pad")
        dropped = dealing.extent(rows, size, world, "drop")
        assert padded - rows == -rest % world and rows - dropped == rest % world


def test_pad_deals_what_a_distributed_sampler_would():
    for rows, size, world in CASES:
        if rows < world:  # (the plain version pads from the order's first rows, fewer here)
            continue
        order = list(range(rows))
        extent = dealing.extent(rows, size, world, "pad")
        for rank in range(world):
            mine = [
                [order[i % rows] for i in b]
                for b in dealing.batches(extent, size, rank, world, "pad")
            ]
            assert mine == dealt(order, rank, world, size), (rows, size, world, rank)


def test_whole_rounds_go_in_turn_and_without_even_the_rest_in_batches_of_size():
    assert [list(b) for b in dealing.batches(14, 3, 0, 2, None)] == [
        [0, 1, 2],
        [6, 7, 8],
        [12, 13],
    ]
    assert [list(b) for b in dealing.batches(14, 3, 1, 2, None)] == [[3, 4, 5], [9, 10, 11]]
    assert dealing.rank_rows(14, 3, 0, 2, None) == 8 and dealing.rank_rows(14, 3, 1, 2, None) == 6
    # 12 whole, 2 left: a row a rank
    assert [list(b) for b in dealing.batches(14, 3, 1, 2, "drop")][-1] == [13]
    assert [list(b) for b in dealing.batches(13, 3, 1, 2, "drop")] == [[3, 4, 5], [9, 10, 11]]


def test_check_even_names_what_it_takes():
    assert dealing.EVEN == (None, "pad", "drop")
    for even in (None, "pad", "drop"):
        assert dealing.check_even(even) == even
    with pytest.raises(ValueError, match=r"^even must be 'pad', 'drop' or None, got 'odd'$"):
        dealing.check_even("odd")
