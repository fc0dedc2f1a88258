"""How an epoch's rows are dealt to distributed ranks in batches (``recordmill.torch``'s
``IterableDataset`` and ``TokenBlocks``), so that every rank takes as many steps.

The rows left of an epoch's order are cut into rounds of ``world`` batches of ``size`` rows, batch
``k`` of a round going to rank ``k``. What is left after the last whole round (fewer than
``world * size`` rows) is cut, with ``even`` set, into ``world`` equal pieces, one a rank, as its
last batch: ``"pad"`` first makes it a whole number of rows a rank with the order's first rows
again (a ``DistributedSampler``'s way), ``"drop"`` leaves its last rows out. With ``even=None`` it is
cut into batches of ``size`` dealt in turn, the last one short: ranks may then differ by a batch,
which DDP waits for.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["EVEN", "batches", "check_even", "extent", "rank_rows"]

EVEN = (None, "pad", "drop")


def check_even(even: str | None) -> str | None:
    if even not in EVEN:
        raise ValueError(f"even must be 'pad', 'drop' or None, got {even!r}")
    return even


def extent(rows: int, size: int, world: int, even: str | None) -> int:
    """The rows dealt out of ``rows`` left: more (``"pad"``) or fewer (``"drop"``) where the rest
    after the last whole round is not a whole number of rows a rank."""
    rest = rows % (size * world)
    odd = rest % world
    if even is None or not odd:
        return rows
    return rows + world - odd if even == "pad" else rows - odd


def batches(rows: int, size: int, rank: int, world: int, even: str | None) -> Iterator[range]:
    """Rank ``rank``'s batches of ``rows`` rows dealt (``extent()``'s count), as ranges of them."""
    rounds, rest = divmod(rows, size * world)
    for k in range(rounds):
        lo = (k * world + rank) * size
        yield range(lo, lo + size)
    start = rounds * size * world
    if not rest:
        return
    if even is None:  # batches of size in turn: at most one is this rank's
        lo = start + rank * size
        if lo < rows:
            yield range(lo, min(lo + size, rows))
        return
    piece = rest // world
    if piece:
        yield range(start + rank * piece, start + (rank + 1) * piece)


def rank_rows(rows: int, size: int, rank: int, world: int, even: str | None) -> int:
    """The rows of ``batches()``, counted without going through them."""
    rounds, rest = divmod(rows, size * world)
    if even is not None:
        return rounds * size + rest // world
    lo = rounds * size * world + rank * size
    return rounds * size + max(0, min(size, rows - lo))
