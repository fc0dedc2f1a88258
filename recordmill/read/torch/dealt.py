"""Which of an epoch's rows an ``IterableDataset`` reads in this process: the rows left to deal
out with those that pad them (``even``), and this (rank, DataLoader worker)'s batches of them,
a few at a time (see :mod:`recordmill.read.dealing` for how a rank's batches are counted)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from torch.utils import data as torch_data

from recordmill.read import dealing
from recordmill.read.dataset import Dataset
from recordmill.read.passes import gather_rows, laid_out_once

__all__ = ["NO_ROWS", "Dealt", "with_padding"]

NO_ROWS = np.zeros(0, dtype=np.int64)


class Dealt:
    """The dealing of an ``IterableDataset``: of a ``Position`` (``_order()``, ``_epoch_order()``,
    ``stream``) and ``Ranks`` (``_bind()``) that reads ``source`` in batches of ``batch_size``,
    at most ``read_batch_size`` rows gathered at once, the last rows shared out as ``even`` says."""

    source: Any
    batch_size: int
    read_batch_size: int
    even: str | None

    def _dealt_order(self) -> tuple[np.ndarray | range, np.ndarray]:
        """This epoch's rows left to deal out, and the rows that pad them (the order's first
        again) or none: ``even``'s rows (see :mod:`~recordmill.read.dealing`)."""
        order = self._order()
        rows = dealing.extent(len(order), max(1, self.batch_size), self._bind()[1], self.even)
        if rows <= len(order):
            return order[:rows], NO_ROWS
        epoch = self._epoch_order()
        return order, np.asarray([epoch[i % len(epoch)] for i in range(rows - len(order))])

    def _batches(self, order: np.ndarray | range, pad: np.ndarray) -> Iterator[list[np.ndarray]]:
        """This (rank, worker)'s batches of ``order`` (rows) and then ``pad``, a few at a time (its
        share of the order is never one array): the rank's batches (see
        :mod:`~recordmill.read.dealing`) dealt to the workers in turn, the rows of them that a
        resumed state says were read (``stream``, with skips) left out."""
        rank, world = self._bind()
        info = torch_data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        size = max(1, self.batch_size)
        group, batches, read = max(1, self._rows_at_once() // size), [], self.stream
        rows = len(order) + len(pad)
        for k, span in enumerate(dealing.batches(rows, size, rank, world, self.even)):
            done = min(read, len(span))  # this rank's rows, whichever worker reads them
            read -= done
            if k % workers != worker or done == len(span):
                continue
            batches.append(_rows(order, span.start + done, span.stop, pad))
            if len(batches) == group:
                yield batches
                batches = []
        if batches:
            yield batches

    def _rows_at_once(self) -> int:
        """Rows gathered at once: ``read_batch_size``; of mapped bytes laid end to end once (local
        Arrow IPC, a disk cache this process maps whole), whole batches of a few MB
        (:func:`~recordmill.read.passes.gather_rows`), no more than ``read_batch_size``: no group
        is decoded or laid out again, so more would only hold more memory (rows are made, and
        decoded, a gather at a time)."""
        ds = self.source.dataset()
        if not (isinstance(ds, Dataset) and laid_out_once(ds._groups.ready())):
            return self.read_batch_size
        size = max(1, self.batch_size)
        row = self._bytes_a_row(ds)
        if row is None:  # a row's read costs more than its bytes: a batch at a time
            return size
        return min(gather_rows(size, row), max(size, self.read_batch_size // size * size))

    def _bytes_a_row(self, ds: Dataset) -> int | None:
        """The bytes of one row this dataset hands out (a row of ``ds``)."""
        return ds._row_bytes()


def _rows(order: np.ndarray | range, lo: int, hi: int, pad: np.ndarray = NO_ROWS) -> np.ndarray:
    """``order[lo:hi]`` as an array, ``pad`` following ``order``."""
    if hi > len(order):
        head = _rows(order, lo, len(order)) if lo < len(order) else NO_ROWS
        return np.concatenate([head, pad[max(0, lo - len(order)) : hi - len(order)]])
    if isinstance(order, range):
        part = order[lo:hi]
        return np.arange(part.start, part.stop, dtype=np.int64)
    return order[lo:hi]


def with_padding(order: np.ndarray | range, pad: np.ndarray) -> np.ndarray | range:
    """``order`` and then ``pad``, as one (``order`` itself where nothing pads it)."""
    return order if not len(pad) else _rows(order, 0, len(order) + len(pad), pad)
