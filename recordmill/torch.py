"""PyTorch datasets over a written dataset (``pip install "recordmill[torch]"``).

``MapDataset`` gives random access (``len`` and ``[i]``) for a ``DataLoader`` with a sampler;
``IterableDataset`` streams rows and splits them across DataLoader workers and distributed ranks
so that every row is read exactly once per epoch. Both take ``transform``, a function applied to
each row dict (decode an image, build tensors), as TorchRecord's loader does.
"""

from __future__ import annotations

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

from recordmill.reader import Dataset
from recordmill.reader import open as open_dataset
from recordmill.rows import bounds


class _Source:
    """Opens the dataset lazily in each process: file handles do not travel to workers."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        columns: Sequence[str] | None,
        decode: Mapping[str, Callable[[Any], Any]] | None,
    ):
        self.path = os.fspath(path)
        self.columns = list(columns) if columns is not None else None
        self.decode = dict(decode or {})
        self._dataset: Dataset | None = None

    def dataset(self) -> Dataset:
        if self._dataset is None:
            ds = open_dataset(self.path, decode=self.decode)
            self._dataset = ds.select(self.columns) if self.columns is not None else ds
        return self._dataset

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_dataset": None}


class MapDataset(torch_data.Dataset):
    """``len(ds)`` and ``ds[i]`` -> ``transform(row)`` (the row dict when no transform)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        columns: Sequence[str] | None = None,
        transform: Callable[[dict[str, Any]], Any] | None = None,
        decode: Mapping[str, Callable[[Any], Any]] | None = None,
    ):
        self.source = _Source(path, columns, decode)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.source.dataset())

    def __getitem__(self, index: int) -> Any:
        row = self.source.dataset()[index]
        return self.transform(row) if self.transform else row


class IterableDataset(torch_data.IterableDataset):
    """Streams ``transform(row)`` for this process's share of the rows.

    The rows are split first across distributed ranks (``rank``/``world_size``, or
    ``torch.distributed`` when it is initialized), then across the DataLoader's workers: every row
    goes to exactly one (rank, worker). With ``shuffle``, all of them share one permutation drawn
    from ``seed + epoch`` (call :meth:`set_epoch` each epoch) and each takes a slice of it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        columns: Sequence[str] | None = None,
        transform: Callable[[dict[str, Any]], Any] | None = None,
        decode: Mapping[str, Callable[[Any], Any]] | None = None,
        shuffle: bool = False,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        read_batch_size: int = 1024,
    ):
        self.source = _Source(path, columns, decode)
        self.transform = transform
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.rank = rank
        self.world_size = world_size
        self.read_batch_size = read_batch_size

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _shard(self) -> tuple[int, int]:
        rank, world = self.rank, self.world_size
        if rank is None or world is None:
            distributed = torch.distributed
            if distributed.is_available() and distributed.is_initialized():
                rank, world = distributed.get_rank(), distributed.get_world_size()
            else:
                rank, world = 0, 1
        info = torch_data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        return rank * workers + worker, world * workers

    def __iter__(self) -> Iterator[Any]:
        ds = self.source.dataset()
        index, count = self._shard()
        if self.shuffle:
            order = np.random.default_rng(self.seed + self.epoch).permutation(len(ds))
            lo, hi = bounds(len(ds), count)[index]
            rows = ds.iter_rows(order[lo:hi], batch_size=self.read_batch_size)
        else:
            rows = ds.shard(index, count).iter_rows(batch_size=self.read_batch_size)
        for row in rows:
            yield self.transform(row) if self.transform else row
