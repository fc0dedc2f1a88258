"""What a PyTorch dataset reads (:mod:`recordmill.read.torch`): a dataset opened where the torch
dataset is made and again in each process that receives it pickled, or a mixture."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from recordmill.read.dataset import Dataset, undecoded
from recordmill.read.dataset import open as open_dataset
from recordmill.read.mixture import Mixture

__all__ = ["Source", "check_counted_once"]


def check_counted_once(mixture: Mixture | None) -> None:
    """Refuses a mixture whose epochs differ in length to a trainer that counts an epoch's
    batches once (the Hugging Face ``Trainer``: it would cut a longer epoch short)."""
    if mixture is not None and mixture.rows_per_epoch is None:
        raise ValueError(
            f"a mixture's epochs differ in length (until={mixture.until!r} draws until its "
            "sources run out), and the Hugging Face Trainer counts an epoch's steps once, from "
            "the first, so it would cut a longer epoch short: give recordmill.mix(..., rows=N) "
            "for epochs of N rows each"
        )


class Source:
    """The dataset, opened when the torch dataset is made (so a wrong path fails there, and
    DataLoader workers forked later inherit what it loaded) and again in each process that
    receives it pickled: file handles do not travel. Or a :class:`Mixture` (``mixture``), whose
    sources are opened again the same way. ``raw``: read without ``decode`` (:meth:`decoders`
    gives it), for a reader that decodes row by row to skip the rows that fail."""

    def __init__(
        self,
        path: str | os.PathLike[str] | Mixture,
        columns: Sequence[str] | None,
        decode: Mapping[str, Callable[[Any], Any]] | None,
        cache: Mapping[str, Any],
        version: int | None = None,
        raw: bool = False,
    ):
        self.mixture: Mixture | None = None
        self.raw = raw
        # Each source's decode functions (of the columns read) and name: what decoders() gives.
        self._decoders: list[Mapping[str, Any]] = []
        self.names: list[str | None] = [None]
        if isinstance(path, Mixture):
            if decode or version is not None or any(v is not None for v in cache.values()):
                raise TypeError(
                    "a mixture's decode, cache and versions are its sources': give them to "
                    "recordmill.mix() or to the datasets it mixes"
                )
            mixture = path.select(columns) if columns is not None else path
            self.names = list(mixture.names)
            self._decoders = [undecoded(ds)[1] for ds in mixture.datasets]
            self.mixture = mixture.undecoded() if raw else mixture
            path = repr(path)
        self.path = os.fspath(path)
        # The version opened first: a process that receives this pickled opens that one too,
        # whatever was appended meanwhile.
        self.version = version
        self.columns = list(columns) if columns is not None else None
        self.decode = dict(decode or {})
        self.cache = {k: v for k, v in cache.items() if v is not None}  # open()'s cache_*
        self._dataset: Dataset | Mixture | None = None

    def dataset(self) -> Dataset | Mixture:
        if self.mixture is not None:
            return self.mixture
        if self._dataset is None:
            ds = open_dataset(self.path, decode=self.decode, version=self.version, **self.cache)
            self.version = ds.warm().version
            ds = ds.select(self.columns) if self.columns is not None else ds
            plain, decode = undecoded(ds)  # the decode of the columns read, not of every one
            self._dataset, self._decoders = (plain if self.raw else ds), [decode]
        return self._dataset

    def array_columns(self) -> list[str] | None:
        """The columns whose values it reads can be numpy arrays (tensors, lists) where it is
        one dataset with nothing decoded; None (any column may) otherwise."""
        ds = self.dataset()
        if self.mixture is not None or self.decode:
            return None
        return [
            f.name
            for f in ds.schema
            if pa.types.is_nested(f.type) or pa.types.is_fixed_size_binary(f.type)
        ]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_dataset": None}

    def rows(self, epoch: int) -> int:
        """The rows of epoch ``epoch``: the dataset's, or as many as the mixture draws."""
        if self.mixture is not None:
            return len(self.mixture.order(epoch))
        return len(self.dataset())

    def decoders(self, ids: np.ndarray) -> tuple[list[Mapping[str, Any]], list[str | None]]:
        """Each row's ``decode`` functions and its source's name (None for one dataset)."""
        self.dataset()
        if self.mixture is not None:
            source = self.mixture.locate(ids)[0]
        else:
            source = np.zeros(len(ids), dtype=np.int64)
        return [self._decoders[s] for s in source], [self.names[s] for s in source]
