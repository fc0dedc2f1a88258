"""A pass of recordmill's ``DataLoader`` over a dataset made with ``on_error="skip"``: the chunks
its workers hand out (:class:`~recordmill.read.torch.chunks.Chunk`, one a batch of the order) cut into
full batches of the rows that did not fail, each moving the position to the row of the order it
reached.

With one rank, the epoch ends where its rows do (the last batch short). With several, each rank
hands out as many batches as its share of the epoch has (``len(loader)``), so that DDP's steps
stay in step: a rank whose share runs out of good rows first goes on with the good rows of the
epoch's order from its first one, read again in the loader's process (``padded`` counts them, so
that a state saved meanwhile resumes there), as a ``DistributedSampler`` pads. An epoch in which
no row is good is an error naming the rejects.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from recordmill.read.torch.chunks import Chunk, Rebatcher

__all__ = ["skipping_pass"]


def skipping_pass(loader: Any, chunks: Iterator[Chunk], world: int) -> Iterator[Any]:
    """The batches of ``loader``'s pass (``chunks``: its workers')."""
    p, ledger = loader.position, loader.ledger
    size, pieces, drop = loader.cut
    cut = Rebatcher(size, pieces, drop)
    position, stream, handed = p.position, p.stream, 0
    share = loader._share_rows()  # this rank's rows of the epoch, for a fraction of them
    for chunk in chunks:
        for batch, reached, rejects in [*cut.feed(chunk)]:
            ledger.add(rejects, share)
            if world == 1:
                p.position = position + reached
            else:
                p.stream, p.taken = stream + reached, p.taken + 1
            handed += 1
            yield batch
    if world > 1:
        ledger.add(cut.passed(), share)  # the rest of the share's rejects
        yield from _padded(loader, cut, share, stream)
        return
    for batch, reached, rejects in cut.rest():
        ledger.add(rejects, share)
        p.position = position + reached
        if batch is not None:
            handed += 1
            yield batch
    if not handed and not position and cut.seen and ledger.epoch_count >= cut.seen:
        raise ledger.nothing_handed_out(share)  # every row read failed


def _padded(loader: Any, cut: Rebatcher, share: int, stream: int) -> Iterator[Any]:
    """The batches this rank has still to hand out after its share's chunks (which began
    ``stream`` rows into its share): of the good rows left in ``cut``, then of the epoch's order
    again from its first row; the last one as long as without rejects."""
    p, ledger = loader.position, loader.ledger
    size, _, drop = loader.cut
    total = len(loader)  # this rank's batches of the epoch
    last = size if drop or not share % size else share % size
    fed, order = cut.seen, p._epoch_order()  # the share's rows in chunks; the order
    pad, dry = p.padded, 0  # the order's rows read again; of them, in a row without a good one
    reached_before = fed
    while p.taken < total:
        need = size if p.taken < total - 1 else last
        while cut.count < need:
            if dry >= len(order):
                raise ledger.nothing_handed_out(share)
            rows = np.asarray([order[(pad + k) % len(order)] for k in range(size)], np.int64)
            chunk = loader.dataset._chunk(rows)
            cut.add(chunk)
            dry = 0 if chunk.offsets else dry + size
            pad += size
        batch, reached, _ = cut.take(need)  # rejects read again: counted where first met
        p.stream = stream + min(reached, fed)
        p.padded += max(0, reached - reached_before)  # the order's rows read again, handed out
        reached_before = max(reached_before, reached)
        p.taken += 1
        yield batch
