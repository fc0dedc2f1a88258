"""Where rows live: the one global row order laid over groups of known sizes (a dataset's row
groups, or a run's staged batches), used by the reader and the partition writers alike."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def bounds(total: int, count: int) -> list[tuple[int, int]]:
    """``count`` consecutive slices of ``range(total)`` whose sizes differ by at most one."""
    base, extra = divmod(total, count)
    out, start = [], 0
    for p in range(count):
        stop = start + base + (p < extra)
        out.append((start, stop))
        start = stop
    return out


def recut(chunks: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Re-cut a stream of Arrow batches or tables into runs of exactly ``size`` rows (the last
    one smaller): each run is the list of slices that make it up, for the caller to join."""
    held: list[Any] = []
    held_rows = 0
    for chunk in chunks:
        while chunk.num_rows:
            take = min(size - held_rows, chunk.num_rows)
            held.append(chunk.slice(0, take))
            held_rows += take
            chunk = chunk.slice(take)
            if held_rows == size:
                yield held
                held, held_rows = [], 0
    if held_rows:
        yield held


@dataclass(frozen=True)
class Gather:
    """How to fetch rows in a given order group by group: ``groups`` in the order to read them;
    ``parts[n]`` the positions (in the requested order) of the rows group ``groups[n]`` holds;
    ``local`` each row's number within its group; ``slot`` each row's n; ``inverse`` the order
    that puts rows concatenated group by group back in the requested order."""

    groups: list[int]
    parts: list[np.ndarray]
    local: np.ndarray
    slot: np.ndarray
    inverse: np.ndarray


class RowIndex:
    """Groups of rows laid end to end in the global order: group g holds global rows
    ``starts[g]`` to ``starts[g + 1]``."""

    def __init__(self, sizes: Sequence[int] | np.ndarray):
        self.starts = np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))])

    def __len__(self) -> int:
        return len(self.starts) - 1

    @property
    def total(self) -> int:
        return int(self.starts[-1])

    def spans(self, start: int, stop: int) -> Iterator[tuple[int, int, int]]:
        """(group, first, end) within each group for the consecutive global rows start..stop."""
        first = max(int(np.searchsorted(self.starts, start, side="right")) - 1, 0)
        for g in range(first, len(self)):
            lo, hi = int(self.starts[g]), int(self.starts[g + 1])
            if lo >= stop:
                break
            if max(start, lo) < min(stop, hi):
                yield g, max(start, lo) - lo, min(stop, hi) - lo

    def gather(self, rows: np.ndarray) -> Gather:
        """The plan to fetch ``rows`` (global numbers, any order): each group once."""
        which = np.searchsorted(self.starts, rows, side="right") - 1
        by_group = np.argsort(which, kind="stable")
        cuts = np.flatnonzero(np.diff(which[by_group])) + 1
        parts = np.split(by_group, cuts) if len(rows) else []
        slot = np.empty(len(rows), dtype=np.int64)
        for n, part in enumerate(parts):
            slot[part] = n
        inverse = np.empty_like(by_group)
        inverse[by_group] = np.arange(len(by_group))
        return Gather(
            groups=[int(which[part[0]]) for part in parts],
            parts=parts,
            local=rows - self.starts[which],
            slot=slot,
            inverse=inverse,
        )
