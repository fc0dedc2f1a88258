"""Which source each row of a mixture's epoch comes from: the draw, as numpy arrays.

Row ``t`` of a *segment* (a stretch of the epoch with fixed weights) comes from the source whose
slice of ``[0, 1)`` (the weights, normalised, laid end to end in source order) holds

    x_t = (u + t * g) mod 1,    g = (sqrt(5) - 1) / 2,

where ``u`` is drawn from ``(seed, epoch, first row of the segment)``. For a random ``u`` each
row comes from source ``i`` with probability ``w_i``; and because the golden ratio spreads the
``x_t`` more evenly than any other step, the counts are close to the weights over every window
of rows, not only on average: over any ``N`` consecutive rows a source gives ``w_i * N`` rows
to within a few (see :data:`WINDOW_TOLERANCE`). Arithmetic is in 64-bit integers (``x_t`` as a
fraction of ``2**64``), so every machine draws the same sources.

A new segment starts where the weights change (a step of a schedule, or a resume with other
weights) and where a source runs out in a mixture that goes on without it; the rows of an epoch
then depend only on the seed, the epoch, the sources' sizes and the segments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["UNTIL", "WINDOW_TOLERANCE", "Plan", "draws", "plan_epoch", "thresholds"]

# The golden ratio's fractional part as a fraction of 2**64.
_STEP = np.uint64(11400714819323198485)
# How many rows a source's count over any window may differ from weight x window (measured over
# windows of 10 to 100,000 rows and weights from 0.001 to 0.999; the proof for a golden step
# gives a bound that grows with the log of the window, far below this in practice).
WINDOW_TOLERANCE = 5
# When a mixture's epoch ends (the peers' names: Hugging Face's interleave_datasets).
UNTIL = ("first_exhausted", "all_exhausted", "all_exhausted_without_replacement")
_CHUNK = 1 << 20  # rows drawn at once while looking for where a source runs out


def thresholds(weights: Sequence[float]) -> np.ndarray:
    """The weights, normalised and laid end to end, as ``2**64`` fractions: source ``i`` owns
    ``[t[i-1], t[i])`` (the last source's end, ``2**64``, is implied)."""
    w = np.asarray(weights, dtype=np.float64)
    total = float(w.sum())
    ends = np.cumsum(w)[:-1] / total
    return np.array([min(int(e * 2.0**64), 2**64 - 1) for e in ends], dtype=np.uint64)


def phase(seed: int, epoch: int, start: int) -> np.uint64:
    """The segment's ``u``: drawn from the seed, the epoch and the segment's first row."""
    rng = np.random.default_rng([seed, epoch, start, 0x6D6978])
    return np.uint64(rng.integers(0, 2**64, dtype=np.uint64))


def draws(bounds: np.ndarray, u: np.uint64, first: int, count: int) -> np.ndarray:
    """The source of rows ``first`` to ``first + count`` of a segment (``bounds`` from
    :func:`thresholds`), as an int32 array."""
    t = np.arange(first, first + count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = t * _STEP + u  # wraps modulo 2**64: that is the "mod 1"
    return np.searchsorted(bounds, x, side="right").astype(np.int32)


@dataclass(frozen=True)
class Plan:
    """An epoch of a mixture: ``source[t]`` gives row ``t``, as its ``nth[t]``-th row drawn
    this epoch (counting from 0; past its size where the source repeats)."""

    source: np.ndarray
    nth: np.ndarray

    def __len__(self) -> int:
        return len(self.source)


def plan_epoch(
    sizes: Sequence[int],
    steps: Sequence[tuple[int, Sequence[float]]],
    seed: int,
    epoch: int,
    until: str | None = "first_exhausted",
    rows: int | None = None,
) -> Plan:
    """The epoch's plan for sources of ``sizes`` rows and weights ``steps`` (``(row, weights)``,
    the first at row 0): it ends at ``rows`` (sources repeating) or as ``until`` says."""
    sizes_ = np.asarray(sizes, dtype=np.int64)
    walk = _Walk(sizes_, until, rows)
    for k, (start, weights) in enumerate(steps):
        stop = steps[k + 1][0] if k + 1 < len(steps) else None
        walk.segment(np.asarray(weights, dtype=np.float64), start, stop, seed, epoch)
        if walk.ended:
            break
    source = np.concatenate(walk.pieces) if walk.pieces else np.zeros(0, np.int32)
    return Plan(source, _nth(source, len(sizes_)))


class _Walk:
    """An epoch drawn segment by segment, until it ends."""

    def __init__(self, sizes: np.ndarray, until: str | None, rows: int | None):
        self.sizes, self.until, self.rows = sizes, until, rows
        self.taken = np.zeros(len(sizes), dtype=np.int64)  # rows drawn of each source so far
        self.out = np.zeros(len(sizes), dtype=bool)  # sources that ran out and left
        self.pieces: list[np.ndarray] = []
        self.done = 0
        self.ended = False

    def segment(
        self, weights: np.ndarray, start: int, stop: int | None, seed: int, epoch: int
    ) -> None:
        """Draw rows ``start`` to ``stop`` (None: to the epoch's end) with ``weights``."""
        if self.rows is not None:
            stop = self.rows if stop is None else min(stop, self.rows)
        while not self.ended and (stop is None or self.done < stop):
            live = np.where(self.out, 0.0, weights)
            if not live.sum():  # nothing left to draw from (every weighted source ran out)
                self.ended = True
                return
            bounds, u, first = thresholds(live), phase(seed, epoch, self.done), self.done
            while not self.ended and (stop is None or self.done < stop):
                want = _CHUNK if stop is None else min(_CHUNK, stop - self.done)
                chunk = draws(bounds, u, self.done - first, want)
                cut, leaves = self._cut(chunk, live)
                self._take(chunk[:cut])
                if leaves is not None:
                    self.out[leaves] = True
                    break  # the others go on in a new segment, from a new phase

    def _cut(self, chunk: np.ndarray, live: np.ndarray) -> tuple[int, int | None]:
        """How much of ``chunk`` is drawn, and the source that runs out at that point (if
        the mixture goes on without it)."""
        counts = [np.flatnonzero(chunk == i) for i in range(len(self.sizes))]
        left = self.sizes - self.taken
        if self.until == "all_exhausted" and self.rows is None:
            # Sources repeat; the epoch ends once each weighted one was drawn whole: just after
            # the last of their last rows, if this chunk holds every one of those.
            ends = [_whole_at(c, left[i]) for i, c in enumerate(counts) if live[i] > 0]
            if all(e is not None for e in ends):
                self.ended = True
                return max(ends), None
            return len(chunk), None
        if self.rows is not None:
            return len(chunk), None
        short = [(c[left[i]], i) for i, c in enumerate(counts) if len(c) > left[i]]
        if not short:
            return len(chunk), None
        at, source = min(short)
        if self.until == "first_exhausted":
            self.ended = True
            return at, None
        return at, source

    def _take(self, chunk: np.ndarray) -> None:
        self.pieces.append(chunk)
        self.taken += np.bincount(chunk, minlength=len(self.sizes))
        self.done += len(chunk)


def _whole_at(drawn: np.ndarray, left: int) -> int | None:
    """How much of a chunk it takes for a source to be drawn whole, given where the chunk draws
    it and how many of its rows are ``left``; None if the chunk does not finish it."""
    if left <= 0:
        return 0
    return int(drawn[left - 1]) + 1 if len(drawn) >= left else None


def _nth(source: np.ndarray, count: int) -> np.ndarray:
    """For each row, how many rows of its source came before it in the epoch."""
    nth = np.empty(len(source), dtype=np.int64)
    for i in range(count):
        where = np.flatnonzero(source == i)
        nth[where] = np.arange(len(where))
    return nth
