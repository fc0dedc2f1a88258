"""PyTorch datasets over a written dataset (``pip install "recordmill[torch]"``).

``MapDataset`` gives random access (``len`` and ``[i]``) for a ``DataLoader`` with a sampler;
``IterableDataset`` streams rows and splits them across DataLoader workers and distributed ranks
so that every row is read exactly once per epoch. Both take ``transform``, a function applied to
each row dict (decode an image, build tensors), as TorchRecord's loader does. Arrays in the rows
are writable numpy arrays of their stored dtype, so the default collate makes tensors of them
without a warning.

Resuming mid-epoch: ``recordmill.torch.DataLoader`` (a ``torch.utils.data.DataLoader``) counts
the batches it has handed out; its ``state_dict()`` saved after batch k and given to
``load_state_dict()`` in a new job makes the next batch k+1, with exactly the rows not yet seen, in
the same order, whatever ``num_workers`` is. The order of an epoch is one seeded permutation cut
into batches (``Sampler`` for a ``MapDataset``; for an ``IterableDataset`` with one rank batch b goes to
worker ``b % num_workers``, and the DataLoader hands batches out in that order), so it does not
depend on the number of workers. A state is of one version of a dataset that grows (``--append``):
a loader of another version refuses it.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

try:
    import torch  # noqa: F401 (the line below says what to install when it is missing)
    from torch.utils import data as torch_data
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        'recordmill.torch needs PyTorch: pip install "recordmill[torch]" (or pip install torch)'
    ) from e

import pyarrow as pa

from recordmill.read.dataset import Dataset
from recordmill.read.dataset import open as open_dataset
from recordmill.read.mixture import Mixture
from recordmill.read.positions import Position, Ranks

# With pandas installed, pyarrow imports it the first time it converts anything (0.2 s). Have it
# happen with this module's imports, as it does for Hugging Face datasets, so that DataLoader
# workers forked later inherit it instead of each importing it again.
pa.array([0])

__all__ = ["DataLoader", "IterableDataset", "MapDataset", "Sampler"]


class _Source:
    """The dataset, opened when the torch dataset is made (so a wrong path fails there, and
    DataLoader workers forked later inherit what it loaded) and again in each process that
    receives it pickled: file handles do not travel. Or a :class:`Mixture` (``mixture``), whose
    sources are opened again the same way."""

    def __init__(
        self,
        path: str | os.PathLike[str] | Mixture,
        columns: Sequence[str] | None,
        decode: Mapping[str, Callable[[Any], Any]] | None,
        cache: Mapping[str, Any],
        version: int | None = None,
    ):
        self.mixture: Mixture | None = None
        if isinstance(path, Mixture):
            if decode or version is not None or any(v is not None for v in cache.values()):
                raise TypeError(
                    "a mixture's decode, cache and versions are its sources': give them to "
                    "recordmill.mix() or to the datasets it mixes"
                )
            self.mixture = path.select(columns) if columns is not None else path
            path = repr(path)
        self.path = os.fspath(path)
        # The version opened first: a process that receives this pickled opens that one too,
        # whatever was appended meanwhile.
        self.version = version
        self.columns = list(columns) if columns is not None else None
        self.decode = dict(decode or {})
        self.cache = {k: v for k, v in cache.items() if v is not None}  # open()'s cache_*
        self._dataset: Dataset | None = None

    def dataset(self) -> Dataset | Mixture:
        if self.mixture is not None:
            return self.mixture
        if self._dataset is None:
            ds = open_dataset(self.path, decode=self.decode, version=self.version, **self.cache)
            self.version = ds.warm().version
            self._dataset = ds.select(self.columns) if self.columns is not None else ds
        return self._dataset

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_dataset": None}

    def rows(self, epoch: int) -> int:
        """The rows of epoch ``epoch``: the dataset's, or as many as the mixture draws."""
        if self.mixture is not None:
            return len(self.mixture.order(epoch))
        return len(self.dataset())


def _own(row: dict[str, Any]) -> dict[str, Any]:
    """The row with writable arrays: the reader's are read-only views of shared bytes, which
    ``torch.as_tensor`` (the default collate) warns about."""
    for name, value in row.items():
        if isinstance(value, np.ndarray) and not value.flags.writeable:
            row[name] = value.copy()
    return row


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
        cache_limit: int | None = None,
        version: int | None = None,
    ):
        cache = {"cache_bytes": cache_bytes, "cache_dir": cache_dir, "cache_limit": cache_limit}
        self.source = _Source(path, columns, decode, cache, version)
        self.source.dataset()
        self.transform = transform

    def shuffled(self, seed: int, epoch: int, blocks: int | None = None) -> np.ndarray:
        """The indices of a shuffled epoch (see ``recordmill.Dataset.shuffled``)."""
        return self.source.dataset().shuffled(seed, epoch, blocks)

    def __len__(self) -> int:
        """The rows (of a mixture: every source's, which its rows are numbered up to)."""
        mixture = self.source.mixture
        return mixture.total_rows if mixture is not None else len(self.source.dataset())

    def __getitem__(self, index: int) -> Any:
        row = _own(self.source.dataset()[index])
        return self.transform(row) if self.transform else row

    def __getitems__(self, indices: list[int]) -> list[Any]:
        """A DataLoader batch's rows, gathered together (torch calls this when it exists)."""
        rows = [_own(row) for row in self.source.dataset().rows(indices)]
        return [self.transform(row) for row in rows] if self.transform else rows


class Sampler(Position, Ranks, torch_data.Sampler):
    """The indices of an epoch for a ``MapDataset``: a permutation drawn from ``seed + epoch``
    (or ``0..n-1`` without ``shuffle``); with ``rank``/``world_size`` (or an initialized
    ``torch.distributed``) every ``world_size``-th of them, from ``rank`` on. It resumes from
    ``state_dict()`` (see :class:`DataLoader`). ``even``: ranks may differ by one row at an
    epoch's end (None), or get as many each, as DDP's steps need: ``"pad"`` repeats the first
    rows of the order, ``"drop"`` leaves the last ones out (a ``DistributedSampler``'s ways)."""

    def __init__(
        self,
        data_source: Any,
        shuffle: bool = True,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        even: str | None = None,
    ):
        if even not in (None, "pad", "drop"):
            raise ValueError(f"even must be None, 'pad' or 'drop', got {even!r}")
        Position.__init__(self, shuffle, seed)
        self.even = even
        self.rows = data_source if isinstance(data_source, int) else len(data_source)
        self.rank, self.world_size = rank, world_size
        self._bind()
        self._orders = data_source.shuffled if isinstance(data_source, MapDataset) else None
        self._data = data_source.source if isinstance(data_source, MapDataset) else None
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
        return iter(self._evened(self._order(), world)[rank::world].tolist())

    def __len__(self) -> int:
        rank, world = self._bind()
        return len(
            range(rank, len(self._evened(np.arange(self._length() - self.position), world)), world)
        )

    def _evened(self, order: np.ndarray, world: int) -> np.ndarray:
        """The order, made a whole number of rows per rank when ``even`` asks it."""
        short = -len(order) % world
        if not short or self.even is None or not len(order):
            return order
        if self.even == "drop":
            return order[: len(order) - (world - short)]
        return np.concatenate([order, np.resize(order, short)])


class IterableDataset(Position, Ranks, torch_data.IterableDataset):
    """Streams ``transform(row)`` for this process's share of the rows.

    The rows of an epoch (a permutation drawn from ``seed + epoch`` with ``shuffle``, else the
    stored order) are cut into batches of ``batch_size``: give the DataLoader's batch size.
    Batch b goes to distributed rank ``b % world_size`` (``rank``/``world_size``, or
    ``torch.distributed`` when it is initialized) and, within a rank, to DataLoader worker
    ``(b // world_size) % num_workers``, which is the order the DataLoader hands batches out in:
    every row goes to exactly one (rank, worker), and a rank's batches do not depend on the
    number of workers. Call :meth:`set_epoch` each epoch, or use :class:`DataLoader`, which also
    moves to the next epoch after a complete one and can resume mid-epoch. It reads the
    dataset's current version, or ``version``, and every DataLoader worker reads that one too.
    Given a :class:`~recordmill.Mixture` instead of a path, it deals the mixture's order the same
    way (the order, seed and shuffle being the mixture's).
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
        cache_limit: int | None = None,
        version: int | None = None,
    ):
        Position.__init__(self, shuffle, seed)
        cache = {"cache_bytes": cache_bytes, "cache_dir": cache_dir, "cache_limit": cache_limit}
        self.source = _Source(path, columns, decode, cache, version)
        self.source.dataset()
        _mixture_order(self)
        self.transform = transform
        self.rank, self.world_size = rank, world_size
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
        """Share the epoch's order with the DataLoader's workers: the loader computes it once
        (it is 8 bytes a row) and every worker reads its share from the same memory, instead of
        each drawing the whole permutation; persistent workers, which outlive an epoch, read
        where each epoch starts from it too."""
        self._shared = multiprocessing.RawArray("q", 4)  # epoch, position, blocks, rows in order
        rows = self._length()
        if self.source.mixture is not None:  # later epochs may draw a few rows more
            rows += rows // 8 + 1024
        self._shared_order = multiprocessing.RawArray("q", max(1, rows))

    def _publish(self) -> None:
        """In the loader's process, as an epoch starts: its order and where it stands."""
        if getattr(self, "_shared", None) is None:
            return
        order = self._order()
        fits = len(order) <= len(self._shared_order)
        if fits:
            np.frombuffer(self._shared_order, np.int64, count=len(order))[:] = order
        blocks = -1 if self.blocks is None else self.blocks
        # An order that does not fit (-1): each worker draws it itself, as without sharing.
        self._shared[:] = [self.epoch, self.position, blocks, len(order) if fits else -1]

    def _shared_rows(self) -> np.ndarray | None:
        """In a worker: the order the loader published (its epoch and position taken too)."""
        if getattr(self, "_shared", None) is None or torch_data.get_worker_info() is None:
            return None
        self.epoch, self.position, blocks, rows = self._shared[:]
        self.blocks = None if blocks < 0 else blocks
        return None if rows < 0 else np.frombuffer(self._shared_order, np.int64, count=rows)

    def _length(self) -> int:
        return self.source.rows(self.epoch)

    def _source(self) -> _Source | None:
        return self.source

    def _shuffled(self) -> np.ndarray:
        return self.source.dataset().shuffled(self.seed, self.epoch, self._blocks())

    def _share(self) -> tuple[int, int]:
        """This (rank, worker)'s number and how many there are, batches being dealt out to
        them in turn: rank first, then worker."""
        rank, world = self._bind()
        info = torch_data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        return rank + worker * world, world * workers

    def __iter__(self) -> Iterator[Any]:
        shared = self._shared_rows()
        ds = self.source.dataset()
        index, count = self._share()
        order = self._order() if shared is None else shared
        size = max(1, self.batch_size)
        # This worker's batches, a few at a time: its share of the order is never one array.
        starts = range(index * size, len(order), count * size)
        group = max(1, self.read_batch_size // size)
        for lo in range(0, len(starts), group):
            rows = np.concatenate([order[s : s + size] for s in starts[lo : lo + group]])
            for row in ds.iter_rows(rows, batch_size=self.read_batch_size):
                row = _own(row)
                yield self.transform(row) if self.transform else row


def _mixture_order(position: Position) -> None:
    """A mixture's order is its own: drawn from its seed, its sources shuffled or not as it says."""
    mixture = position._mixture()
    if mixture is not None:
        position.shuffle, position.seed = True, mixture.seed


def _sampler(dataset: Any, given: Any, shuffle: bool, seed: int) -> Sampler:
    """The :class:`Sampler` of a map-style loader: the one given, or ours in place of a
    ``DistributedSampler`` (as PyTorch Lightning puts in by default, wrapping ours), with its
    rank and world size."""
    if given is None or isinstance(given, Sampler):
        return given if given is not None else Sampler(dataset, shuffle=shuffle, seed=seed)
    if isinstance(given, torch_data.DistributedSampler):
        wrapped = getattr(given.dataset, "_sampler", None)  # Lightning's wrapper of a sampler
        if isinstance(wrapped, Sampler):
            shuffle, seed = wrapped.shuffle, wrapped.seed
        elif given.dataset is dataset:
            shuffle, seed = given.shuffle, given.seed
        else:
            raise TypeError("the DistributedSampler given is of another dataset than the loader's")
        even = "drop" if given.drop_last else "pad"  # as the DistributedSampler would
        rank, world = given.rank, given.num_replicas
        return Sampler(dataset, shuffle, seed, rank=rank, world_size=world, even=even)
    raise TypeError(
        "give a recordmill.torch.Sampler (or a torch DistributedSampler) as sampler, or none; "
        f"got {type(given).__name__}"
    )


class DataLoader(torch_data.DataLoader):
    """A ``torch.utils.data.DataLoader`` over a ``MapDataset`` or an ``IterableDataset`` that
    can resume mid-epoch: ``state_dict()`` / ``load_state_dict()``.

    For a map-style dataset it uses a :class:`Sampler` (``shuffle``, ``seed``; or the one given
    as ``sampler``); for an ``IterableDataset`` it sets the dataset's ``batch_size`` to its own.
    Given a path instead of a dataset, it reads a :class:`MapDataset` of it, through the disk
    cache ``cache_dir`` (at most ``cache_limit`` bytes) when given; given a ``Mixture``, a
    ``MapDataset`` of the mixture. Each batch handed out advances the position; a complete pass moves to the next epoch. With
    ``persistent_workers``, an ``IterableDataset``'s workers read the epoch and position from
    memory they share with the loader each time an epoch starts, so they follow it (and a resume).
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        shuffle: bool = False,
        seed: int = 0,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: int | None = None,
        **kwargs: Any,
    ):
        if isinstance(dataset, (str, os.PathLike, Mixture)):  # a MapDataset of every column
            dataset = MapDataset(dataset, cache_dir=cache_dir, cache_limit=cache_limit)
        elif cache_dir is not None or cache_limit is not None:
            raise TypeError("give cache_dir and cache_limit to the dataset, or a path as dataset")
        if isinstance(dataset, IterableDataset):
            dataset.batch_size = batch_size
            if kwargs.get("num_workers"):
                dataset._follow()
            self.position: Sampler | IterableDataset = dataset
            super().__init__(dataset, batch_size=batch_size, **kwargs)
        else:
            sampler = _sampler(dataset, kwargs.pop("sampler", None), shuffle, seed)
            self.position = sampler
            super().__init__(dataset, batch_size=batch_size, sampler=sampler, **kwargs)

    def __iter__(self) -> Iterator[Any]:
        # The rank is known here, in the main process, before any worker starts.
        step = self.batch_size * self.position._bind()[1]
        self.position._agree()
        if isinstance(self.position, IterableDataset):
            self.position._publish()  # to the workers, before they start the epoch
        for batch in super().__iter__():
            self.position._advance(step)
            yield batch
        self.position._end_epoch()

    def set_epoch(self, epoch: int) -> None:
        self.position.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """Where the loader stands: the epoch and the rows of it already handed out."""
        return self.position.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state``: the next batch is the one after the last one handed out."""
        self.position.load_state_dict(state)
