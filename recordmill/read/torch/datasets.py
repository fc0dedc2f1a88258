"""The PyTorch datasets of :mod:`recordmill.torch`: ``MapDataset`` (with its ``Sampler``) and
``IterableDataset``, over a dataset or a mixture; the loader that resumes them is in
:mod:`recordmill.read.torch.loader`."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

try:
    import torch
    from torch.utils import data as torch_data
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        'recordmill.torch needs PyTorch: pip install "recordmill[torch]" (or pip install torch)'
    ) from e

import pyarrow as pa

from recordmill.read import dealing
from recordmill.read.dataset import Dataset, gathered
from recordmill.read.mixture import Mixture
from recordmill.read.options import CacheLimit
from recordmill.read.skips import skips
from recordmill.read.torch import collated
from recordmill.read.torch.chunks import Chunk, Guard
from recordmill.read.torch.dealt import NO_ROWS, Dealt, with_padding
from recordmill.read.torch.positions import Position, Ranks, accelerate_deals
from recordmill.read.torch.sources import Source as _Source
from recordmill.read.torch.sources import check_counted_once

# With pandas installed, pyarrow imports it the first time it converts anything (0.2 s). Have it
# happen with this module's imports, as it does for Hugging Face datasets, so that DataLoader
# workers forked later inherit it instead of each importing it again.
pa.array([0])

__all__ = ["IterableDataset", "MapDataset", "Sampler"]


def _own(row: dict[str, Any]) -> dict[str, Any]:
    """The row with writable arrays: the reader's are read-only views of shared bytes, which
    ``torch.as_tensor`` (the default collate) warns about."""
    for name, value in row.items():
        row[name] = collated.writable(value)
    return row


def _owned(rows: list[dict[str, Any]], source: _Source) -> list[dict[str, Any]]:
    """``_own`` of every row: of the columns that can hold arrays, where the source knows them
    (a copy of each row's value costs less than one of the batch's column: its memory is
    reused, a new column's is not)."""
    names = source.array_columns()
    if names is None:
        return [_own(row) for row in rows]
    for name in names:
        for row in rows:
            row[name] = collated.writable(row[name])
    return rows


class MapDataset(torch_data.Dataset):
    """``len(ds)`` and ``ds[i]`` -> ``transform(row)`` (the row dict when no transform), of the
    dataset's current version or ``version`` (kept by every process it is pickled into); or of a
    :class:`~recordmill.Mixture` (``recordmill.mix()``), whose rows are numbered across its
    sources and whose order its :class:`Sampler` draws."""

    def __init__(
        self,
        path: str | os.PathLike[str] | Mixture,
        columns: Sequence[str] | None = None,
        transform: Callable[[dict[str, Any]], Any] | None = None,
        decode: Mapping[str, Callable[[Any], Any]] | None = None,
        cache_bytes: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: CacheLimit = None,
        version: int | None = None,
        on_error: str = "raise",
    ):
        cache = {"cache_bytes": cache_bytes, "cache_dir": cache_dir, "cache_limit": cache_limit}
        self.skip = skips(on_error)
        self.source = _Source(path, columns, decode, cache, version, raw=self.skip)
        self.source.dataset()
        self.transform = transform
        # Set by recordmill's DataLoader, which cuts chunks into batches: whether to hand out chunks,
        # and whether to collate their rows first (the loader collates with default_collate).
        self.chunked = self.collates = False
        # Set by recordmill's DataLoader when it collates by default: a batch is collated a
        # column at a time, without row dicts (see ``collated.from_columns``).
        self.columnar = False
        # Set by a Sampler of it: a mixture's rows are then read in the mixture's order.
        self._drawn = False

    def shuffled(self, seed: int, epoch: int, blocks: int | None = None) -> np.ndarray:
        """The indices of a shuffled epoch (see ``recordmill.Dataset.shuffled``)."""
        return self.source.dataset().shuffled(seed, epoch, blocks)

    def __len__(self) -> int:
        """The rows (of a mixture: every source's, which its rows are numbered up to)."""
        mixture = self.source.mixture
        return mixture.total_rows if mixture is not None else len(self.source.dataset())

    def __getitem__(self, index: int) -> Any:
        row = _own(self.source.dataset()[index])
        if self.skip:  # one row alone has nothing to take its place: it raises
            return _guarded(self, np.array([index]), [row], skip=False).samples[0]
        return self.transform(row) if self.transform else row

    def _chunk(self, rows: np.ndarray) -> Chunk:
        """Rows of the order read and guarded in this process (a skipping loader's padding)."""
        return self.__getitems__(rows.tolist())  # type: ignore[return-value]

    def __getitems__(self, indices: list[int]) -> list[Any] | Chunk | dict[str, Any]:
        """A DataLoader batch's rows, gathered together (torch calls this when it exists); with
        ``on_error="skip"``, those that did not fail (a :class:`Chunk` for recordmill's loader);
        for recordmill's loader collating by default, the batch collated."""
        if self.source.mixture is not None and not self._drawn:
            raise TypeError(
                "a MapDataset of a mixture is read in the mixture's order (its weights) only "
                "through a recordmill.torch.Sampler, and another sampler (torch's shuffle, a "
                "DistributedSampler, the Hugging Face Trainer's) would read each source's rows "
                "once instead: give it to recordmill.torch.DataLoader, or read IterableDataset(mix)"
            )
        ds = self.source.dataset()
        if self.columnar and isinstance(ds, Dataset) and not self.source.decode:
            return collated.from_columns(ds.schema, gathered(ds, indices))
        rows = _owned(ds.rows(indices), self.source)
        if self.skip:
            chunk = _guarded(self, np.asarray(indices), rows)
            return chunk if self.chunked else chunk.samples
        if self.columnar:  # decoded rows, or a mixture's: collated as the loader would
            return collated.worker_collate(rows)
        return [self.transform(row) for row in rows] if self.transform else rows


class Sampler(Position, Ranks, torch_data.Sampler):
    """The indices of an epoch for a ``MapDataset``: a permutation drawn from ``seed + epoch``
    (or ``0..n-1`` without ``shuffle``); with ``rank``/``world_size`` (or an initialized
    ``torch.distributed``) every ``world_size``-th of them, from ``rank`` on. It resumes from
    ``state_dict()`` (see :class:`DataLoader`). ``even``: every rank gets as many rows, as DDP's
    steps need: ``"pad"`` (the default) repeats the first rows of the order, ``"drop"`` leaves the
    last ones out (a ``DistributedSampler``'s ways); with None ranks may differ by one row."""

    def __init__(
        self,
        data_source: Any,
        shuffle: bool = True,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        even: str | None = "pad",
    ):
        Position.__init__(self, shuffle, seed)
        self.even = dealing.check_even(even)
        self.rows = data_source if isinstance(data_source, int) else len(data_source)
        self._given(rank, world_size)
        self._bind()
        self._orders = data_source.shuffled if isinstance(data_source, MapDataset) else None
        self._data = data_source.source if isinstance(data_source, MapDataset) else None
        if isinstance(data_source, MapDataset):
            data_source._drawn = True
        _mixture_order(self)

    def _length(self) -> int:
        return self.rows if self._data is None else self._data.rows(self.epoch)

    def _source(self) -> _Source | None:
        return self._data

    def _shuffled(self) -> np.ndarray:
        if self._orders is None:
            return super()._shuffled()
        return self._orders(self.seed, self.epoch, self._blocks())

    def __iter__(self) -> Iterator[int]:
        rank, world = self._bind()
        # Now: the epoch and position as they are when it starts. Positions count from the
        # epoch's first row, so that "pad" repeats the order's first rows after a resume too.
        order, start = self._epoch_order(), self.position
        return _indices(order, range(start + rank, start + self._left(), world)[self.stream :])

    def __len__(self) -> int:
        rank, world = self._bind()
        return len(range(rank, self._left(), world))

    def _left(self) -> int:
        """Rows of the order still to hand out, made a whole number per rank when ``even``
        asks it: ``"pad"`` repeats the order's first rows, ``"drop"`` leaves its last out."""
        rows, world = self._length() - self.position, self._bind()[1]
        short = -rows % world
        if not short or self.even is None or not rows:
            return rows
        return rows - (world - short) if self.even == "drop" else rows + short


def _indices(order: np.ndarray | range, at: range) -> Iterator[int]:
    """``order[p % len(order)]`` for each position ``p`` of ``at`` (past its end: the order
    again from its start), a slice at a time: never a list of the whole epoch."""
    for lo in range(0, len(at), 1 << 16):
        part = at[lo : lo + (1 << 16)]
        where = np.arange(part.start, part.stop, part.step) % len(order)
        yield from (where + order.start if isinstance(order, range) else order[where]).tolist()


class IterableDataset(Position, Ranks, Dealt, torch_data.IterableDataset):
    """Streams ``transform(row)`` for this process's share of the rows.

    The rows of an epoch (a permutation drawn from ``seed + epoch`` with ``shuffle``, else the
    stored order) are cut into batches of ``batch_size``: give the DataLoader's batch size.
    Batch b goes to distributed rank ``b % world_size`` (``rank``/``world_size``, or
    ``torch.distributed`` when it is initialized) and, within a rank, to DataLoader worker
    ``(b // world_size) % num_workers``, which is the order the DataLoader hands batches out in:
    every row goes to exactly one (rank, worker), and a rank's batches do not depend on the
    number of workers. The rows after the last whole round of batches are shared out evenly, so
    that every rank takes as many steps (``even``: ``"pad"`` repeats the order's first rows,
    ``"drop"`` leaves the last out, None lets ranks differ by a batch; see
    :mod:`recordmill.read.dealing`). Where an ``accelerate.Accelerator`` deals the batches (the
    Hugging Face ``Trainer``, ``accelerator.prepare`` of a torch ``DataLoader``), each process
    reads the whole epoch for it to deal. Call :meth:`set_epoch` each epoch, or use
    :class:`DataLoader`, which also moves to the next epoch after a complete one and can resume
    mid-epoch. It reads the dataset's current version, or ``version``, and every DataLoader
    worker reads that one too. Given a :class:`~recordmill.Mixture` instead of a path, it deals
    the mixture's order the same way (the order, seed and shuffle being the mixture's).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | Mixture,
        columns: Sequence[str] | None = None,
        transform: Callable[[dict[str, Any]], Any] | None = None,
        decode: Mapping[str, Callable[[Any], Any]] | None = None,
        shuffle: bool = False,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        batch_size: int = 1,
        read_batch_size: int = 1024,
        cache_bytes: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: CacheLimit = None,
        version: int | None = None,
        on_error: str = "raise",
        even: str | None = "pad",
    ):
        Position.__init__(self, shuffle, seed)
        cache = {"cache_bytes": cache_bytes, "cache_dir": cache_dir, "cache_limit": cache_limit}
        self.skip = skips(on_error)
        self.even = dealing.check_even(even)
        # Set by recordmill's DataLoader, which cuts chunks into batches: whether to hand out chunks,
        # and whether to collate their rows first (the loader collates with default_collate).
        self.chunked = self.collates = False
        self.source = _Source(path, columns, decode, cache, version, raw=self.skip)
        self.source.dataset()
        _mixture_order(self)
        self.transform = transform
        self._given(rank, world_size)
        self._bind()
        self.batch_size = batch_size
        self.read_batch_size = read_batch_size

    def __getstate__(self) -> dict[str, Any]:
        # Pickled in the main process for workers started by spawn or forkserver: the rank goes
        # with it, since those workers have no process group to ask.
        self._bind()
        state = dict(self.__dict__)
        if multiprocessing.context.get_spawning_popen() is None:
            # Not a worker being started (a copy, a checkpoint): shared memory does not travel.
            state.pop("_shared", None)
            state.pop("_shared_order", None)
        return state

    def _follow(self) -> None:
        """Let the DataLoader's workers follow where each epoch starts (persistent workers
        outlive an epoch): the loader's process publishes it before they start. A dataset's
        order is not shared here (a large one is drawn once a machine and mapped by each:
        ``read/machine/shared_orders.py``); a mixture's is, since a resume may have given the loader's
        mixture weights that the workers' copies do not have."""
        # epoch, position, blocks, this rank's rows read past the position, the order's rows
        self._shared = multiprocessing.RawArray("q", 5)
        if self.source.mixture is not None:  # later epochs may draw a few rows more
            rows = self._length()
            self._shared_order = multiprocessing.RawArray("q", max(1, rows + rows // 8 + 1024))

    def _publish(self) -> None:
        """In the loader's process, as an epoch starts: where it stands, and a mixture's order
        (a dataset's is drawn here, so that the workers find it drawn)."""
        if getattr(self, "_shared", None) is None:
            return
        order = with_padding(*self._dealt_order())
        published = getattr(self, "_shared_order", None)
        rows = -1  # none: each worker draws it (or maps the machine's)
        if published is not None and len(order) <= len(published):
            np.frombuffer(published, np.int64, count=len(order))[:] = order
            rows = len(order)
        blocks = -1 if self.blocks is None else self.blocks
        self._shared[:] = [self.epoch, self.position, blocks, self.stream, rows]

    def _take_position(self) -> np.ndarray | None:
        """In a worker: the epoch and position the loader published, and the order where it
        published one."""
        if getattr(self, "_shared", None) is None or torch_data.get_worker_info() is None:
            return None
        self.epoch, self.position, blocks, self.stream, rows = self._shared[:]
        self.blocks = None if blocks < 0 else blocks
        return None if rows < 0 else np.frombuffer(self._shared_order, np.int64, count=rows)

    def _length(self) -> int:
        return self.source.rows(self.epoch)

    def __len__(self) -> int:
        """This rank's rows of the epoch not yet handed out (see :mod:`~recordmill.read.dealing`),
        as a ``Sampler``'s length, of which a DataLoader counts its batches: a sized loader, which
        Lightning reads no batch ahead of the step it trains (its checkpoint's state is then the
        step's)."""
        if self.rank is None and not self._dealt and accelerate_deals():  # the HF Trainer's
            check_counted_once(self.source.mixture)
        rank, world = self._bind()
        size = max(1, self.batch_size)
        rows = dealing.extent(self._left(), size, world, self.even)
        return max(0, dealing.rank_rows(rows, size, rank, world, self.even) - self.stream)

    def _source(self) -> _Source | None:
        return self.source

    def _shuffled(self) -> np.ndarray:
        return self.source.dataset().shuffled(self.seed, self.epoch, self._blocks())

    def __iter__(self) -> Iterator[Any]:
        published = self._take_position()
        ds = self.source.dataset()
        order, pad = self._dealt_order() if published is None else (published, NO_ROWS)
        unit = self.read_batch_size  # rows gathered at once: within what the disk cache holds
        if isinstance(ds, Dataset):
            unit = min(unit, ds._window(1))
        for batches in self._batches(order, pad):
            rows = _owned(list(ds.iter_rows(np.concatenate(batches), unit)), self.source)
            if not self.skip:
                yield from (self.transform(row) for row in rows) if self.transform else rows
                continue
            lo = 0
            for batch in batches:  # one chunk each: the loader cuts the rows into batches
                guarded = _guarded(self, batch, rows[lo : lo + len(batch)])
                lo += len(batch)
                yield from [guarded] if self.chunked else guarded.samples

    def _chunk(self, rows: np.ndarray) -> Chunk:
        """Rows of the order read and guarded in this process (a skipping loader's padding)."""
        ds = self.source.dataset()
        return _guarded(self, rows, _owned(list(ds.iter_rows(rows, len(rows))), self.source))


def _guarded(
    data: MapDataset | IterableDataset, rows: np.ndarray, got: list[Any], skip: bool = True
) -> Chunk:
    """Rows ``rows`` (read undecoded as ``got``) decoded and transformed one by one, those
    that raise left out as read rejects naming where they were met."""
    decoders, names = data.source.decoders(rows)
    info = torch_data.get_worker_info()
    rank = data._bind()[0] if isinstance(data, IterableDataset) else _rank()
    where = {"version": data.source.version, "rank": rank, "worker": info and info.id}
    chunk = Guard(data.transform, skip).apply(got, rows.tolist(), decoders, names, where)
    if data.collates and chunk.samples:  # one tensor a field crosses to the loader, not one a row
        chunk.samples, chunk.shape = collated.collate(chunk.samples)
    return chunk


def _rank() -> int:
    distributed = torch.distributed
    ready = distributed.is_available() and distributed.is_initialized()
    return distributed.get_rank() if ready else 0


def _mixture_order(position: Position) -> None:
    """A mixture's order is its own: drawn from its seed, its sources shuffled or not as it says."""
    mixture = position._mixture()
    if mixture is not None:
        position.shuffle, position.seed = True, mixture.seed
