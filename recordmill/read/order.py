"""The order of a shuffled epoch: a permutation of every row, drawn from a seed and the epoch.

Where every part fits the cache (or nothing is cached), it is a full permutation, drawn from
``seed + epoch``. Where the disk cache holds fewer parts than the dataset has, it is a *block*
shuffle, so that each part is fetched about once an epoch:

- the parts are taken in a seeded order, and the rows of each window of ``capacity // 2``
  consecutive parts are shuffled together (half the room: a batch that straddles two windows
  needs the parts of both at once);
- each epoch after the first begins with the ``capacity`` parts the epoch before ended with,
  which are what a cache that drops the least recently used part holds then, so an epoch
  starts from what is cached instead of fetching everything again.

The order depends only on the seed, the epoch, the parts and the capacity: every rank and
DataLoader worker computes the same one, and a job resumed mid-epoch continues it exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recordmill.read.machine.shared_orders import InPlace, Orders, shared_order


def permutation(rows: int, seed: int, epoch: int = 0, orders: Orders | None = None) -> np.ndarray:
    """A full permutation of ``rows`` rows (what every order was before the cache), numpy's
    ``default_rng(seed + epoch).permutation(rows)``; a large one drawn once a machine in
    ``orders`` (:mod:`~.read.shared_orders`)."""

    def fill(out: np.ndarray) -> None:  # what numpy's permutation does, in ``out``
        for lo in range(0, rows, 1 << 20):  # a row number at a time, never a copy of them all
            out[lo : lo + (1 << 20)] = np.arange(lo, min(rows, lo + (1 << 20)))
        np.random.default_rng(seed + epoch).shuffle(out)

    return shared_order(orders, rows, ("permutation", rows, seed + epoch), InPlace(rows, fill))


def within_windows(count: int, window: int, seed: int, epoch: int) -> np.ndarray:
    """``0 .. count - 1`` shuffled within each run of ``window`` (the last one shorter): a
    seeded order that moves nothing further than its window."""
    if window <= 1:
        return np.arange(count, dtype=np.int64)
    keys = np.random.default_rng([seed, epoch, window]).random(count)
    return np.lexsort((keys, np.arange(count, dtype=np.int64) // window)).astype(np.int64)


def block_order(
    parts: Sequence[tuple[int, int]],
    capacity: int,
    seed: int,
    epoch: int = 0,
    orders: Orders | None = None,
) -> np.ndarray:
    """Rows ``start`` to ``stop`` of each part in ``parts`` (in order, together every row),
    in the block-shuffled order of ``epoch`` for a cache of ``capacity`` parts."""
    rows = sum(stop - start for start, stop in parts)
    if capacity >= len(parts):
        return permutation(rows, seed, epoch, orders)
    key = ("blocks", tuple(parts), capacity, seed, epoch)
    return shared_order(orders, rows, key, lambda: _block_order(parts, capacity, seed, epoch))


def _block_order(
    parts: Sequence[tuple[int, int]], capacity: int, seed: int, epoch: int
) -> np.ndarray:
    order = part_order(len(parts), capacity, seed, epoch)
    rng = np.random.default_rng([seed, epoch, 1])
    window = max(1, capacity // 2)
    pieces = []
    for lo in range(0, len(order), window):
        rows = np.concatenate([np.arange(*parts[k]) for k in order[lo : lo + window]])
        pieces.append(rng.permutation(rows))
    return np.concatenate(pieces) if pieces else np.arange(0)


def part_order(count: int, capacity: int, seed: int, epoch: int) -> np.ndarray:
    """The order in which epoch ``epoch`` takes ``count`` parts: epoch 0 a permutation, each
    later one the parts of the epoch before that a cache of ``capacity`` parts is sure to hold
    at its end (``carried``: its last two windows, shuffled), then the others."""
    order = np.random.default_rng([seed, 0, 0]).permutation(count)
    kept = carried(count, capacity)
    for e in range(1, epoch + 1):
        rng = np.random.default_rng([seed, e, 0])
        last, rest = order[count - kept :], order[: count - kept]
        order = np.concatenate([rng.permutation(last), rng.permutation(rest)])
    return order


def carried(count: int, capacity: int) -> int:
    """The parts a cache of ``capacity`` parts holds for sure after an epoch of ``count`` parts
    in windows of half its capacity: the last window's, and those of the whole windows before
    it that fit beside it (of a window that fits in part, which parts were used last, parts
    loaded side by side do not say)."""
    window = max(1, capacity // 2)
    last = count % window or window
    return min(count, last + window * ((capacity - last) // window))


def spans(parts: Sequence[range], start: int, stop: int) -> list[tuple[int, int]]:
    """Each part's rows (global ``range``s) within rows ``start`` to ``stop``, as rows of
    that view (empty spans kept, so part k stays span k)."""
    out = []
    for rows in parts:
        lo, hi = max(rows.start, start), min(rows.stop, stop)
        out.append((lo - start, max(lo, hi) - start))
    return out


def same_part_neighbours(order: np.ndarray, parts: Sequence[tuple[int, int]]) -> float:
    """The fraction of adjacent rows in ``order`` that come from one part: how far an order is
    from a full shuffle (about 1 / parts for a full permutation, 1.0 for no shuffle)."""
    if len(order) < 2:
        return 0.0
    starts = np.array([start for start, _ in parts])
    owner = np.searchsorted(starts, order, side="right")
    return float(np.mean(owner[1:] == owner[:-1]))
