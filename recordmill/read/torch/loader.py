"""``recordmill.torch.DataLoader``: a ``torch.utils.data.DataLoader`` that counts the batches it
hands out, so that its ``state_dict()`` resumes mid-epoch (see :mod:`recordmill.read.torch`)."""

from __future__ import annotations

import contextlib
import copy
import gc
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

try:
    from torch.utils import data as torch_data
    from torch.utils.data import default_collate
except ImportError as e:  # the line datasets.py gives, before a bare "No module named"
    raise ImportError(
        'recordmill.torch needs PyTorch: pip install "recordmill[torch]" (or pip install torch)'
    ) from e

from recordmill.read import states
from recordmill.read.mixture import Mixture
from recordmill.read.options import CacheLimit
from recordmill.read.skips import ReadReject
from recordmill.read.torch import collated
from recordmill.read.torch.chunks import MAX_READ_REJECTS, Chunk, Ledger
from recordmill.read.torch.datasets import IterableDataset, MapDataset, Sampler
from recordmill.read.torch.pipes import widen_results
from recordmill.read.torch.positions import go_back, where_now
from recordmill.read.torch.prepared import Handing
from recordmill.read.torch.skipping import skipping_pass

__all__ = ["DataLoader"]


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
        elif getattr(given.dataset, "source", None) is dataset.source:  # (the loader's copy)
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


def _given_batches(kwargs: dict[str, Any], skip: bool) -> tuple[Any, Any]:
    """The ``batch_sampler`` given to a map-style loader (torch's ``BatchSampler`` of a
    :class:`Sampler`, or Lightning's wrapper of one for ``predict``), checked, and the sampler
    given (the batch sampler's); each None where none is."""
    batches, sampler = kwargs.pop("batch_sampler", None), kwargs.pop("sampler", None)
    if batches is None:
        return None, sampler
    if sampler is not None:  # as torch's loader says it
        raise ValueError("sampler option is mutually exclusive with batch_sampler")
    if skip:
        raise TypeError(
            "on_error='skip' makes full batches itself: give batch_size, not batch_sampler"
        )
    if isinstance(getattr(batches, "sampler", None), Sampler) and isinstance(
        getattr(batches, "batch_size", None), int
    ):
        return batches, batches.sampler
    raise TypeError(
        "give a batch_sampler that draws from a recordmill.torch.Sampler, as "
        "torch's BatchSampler(Sampler(dataset), batch_size, drop_last) does; got "
        f"{type(batches).__name__} of {type(getattr(batches, 'sampler', None)).__name__}"
    )


class DataLoader(Handing, torch_data.DataLoader):
    """A ``torch.utils.data.DataLoader`` over a ``MapDataset`` or an ``IterableDataset`` that
    can resume mid-epoch: ``state_dict()`` / ``load_state_dict()``.

    For a map-style dataset it uses a :class:`Sampler` (``shuffle``, ``seed``; or the one given
    as ``sampler``); for an ``IterableDataset`` it sets the dataset's ``batch_size`` to its own.
    Given a path instead of a dataset, it reads a :class:`MapDataset` of it, through the disk
    cache ``cache_dir`` (at most ``cache_limit`` bytes) when given, with ``on_error``; given a
    ``Mixture``, a ``MapDataset`` of the mixture. Each batch handed out advances the position; a
    complete pass moves to the next epoch. With ``persistent_workers``, an
    ``IterableDataset``'s workers read the epoch and position from memory they share with the
    loader each time an epoch starts, so they follow it (and a resume). Only a loaded state
    resumes mid-epoch: after a pass left before its end (a ``break``), the next pass is the next
    epoch (a new order, as a new pass of torch's loader draws), unless ``set_epoch`` says which.

    A dataset made with ``on_error="skip"`` leaves out the rows whose ``decode`` or
    ``transform`` raises and still gives full batches, the next rows of the order taking their
    places (the same whatever ``num_workers``): ``rejects`` lists them (:class:`ReadReject`),
    ``rejects_log`` appends each to a JSON-lines file, and more than ``max_read_rejects`` in an
    epoch (a count, or a fraction of its rows: by default a tenth; None: no bound) is an error
    naming the first; past 1% of them, a warning says so. An epoch with no good row is an error.
    With several ranks each hands out as many batches (see :mod:`~recordmill.read.torch.skipping`).
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        shuffle: bool = False,
        seed: int = 0,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: CacheLimit = None,
        on_error: str | None = None,
        max_read_rejects: int | float | None = MAX_READ_REJECTS,
        rejects_log: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ):
        dataset = _dataset_of(dataset, cache_dir, cache_limit, on_error)
        self.ledger = Ledger(max_read_rejects, rejects_log)
        self.skip = dataset.skip
        _choose_collate(self, dataset, batch_size, kwargs)
        if isinstance(dataset, IterableDataset):
            dataset._dealt = True  # to this rank, by this loader, whatever else is in the process
            dataset.batch_size = batch_size or 1  # None: samples one at a time, as torch's
            if kwargs.get("num_workers"):
                dataset._follow()
            self.position: Sampler | IterableDataset = dataset
            super().__init__(dataset, batch_size=None if self.skip else batch_size, **kwargs)
            return
        # Batches of a plain read collated a column at a time (the same tensors, fewer copies).
        dataset.columnar = self.arrays and dataset.transform is None
        if dataset.columnar:
            kwargs["collate_fn"] = _as_is
        batches, given = _given_batches(kwargs, self.skip)
        self.position = sampler = _sampler(dataset, given, shuffle, seed)
        sampler._dealt = True
        if batches is not None or self.skip:
            batches = batches or torch_data.BatchSampler(sampler, batch_size, drop_last=False)
            super().__init__(dataset, batch_sampler=batches, **kwargs)
        else:
            super().__init__(dataset, batch_size=batch_size, sampler=sampler, **kwargs)

    @property
    def rejects(self) -> list[ReadReject]:
        """The rows left out so far (``on_error="skip"``), in the order met."""
        return self.ledger.rejects

    def __iter__(self) -> Iterator[Any]:
        # The rank is known here, in the main process, before any worker starts.
        world = self.position._bind()[1]
        self.position._agree()
        self._begin()
        if not self.position.position and not self.position.stream:  # from the epoch's start
            self.ledger.start_epoch()
        self.position.left_off = True  # until the pass reaches the epoch's end
        if isinstance(self.position, IterableDataset):
            self.position._publish()  # to the workers, before they start the epoch
        if self.skip:
            chunks = super().__iter__()
            yield from (self._handed(b) for b in skipping_pass(self, chunks, world))
        else:
            for batch in super().__iter__():
                self.position._advance(_rows_a_batch(self) * world)
                yield (
                    self._handed(collated.as_tensors(batch))
                    if self.arrays
                    else self._handed(batch, True)
                )
        self.position._end_epoch()
        self.ledger.start_epoch()

    def __len__(self) -> int:
        """The batches of a whole epoch, as torch's loader counts them, also where a resumed
        pass hands out fewer: Lightning counts the batches a resumed epoch had done itself."""
        with self._whole_epoch():
            if self.skip:  # this rank's rows, cut into batches here
                size, _, drop = self.cut
                return _batches(len(self.position), size, drop)
            return super().__len__()

    def _share_rows(self) -> int:
        """This rank's rows of the whole epoch."""
        with self._whole_epoch():
            return len(self.position)

    @contextlib.contextmanager
    def _whole_epoch(self, begin: bool = True) -> Iterator[None]:
        """The position at the start of the epoch a pass would read (``begin``; else this one),
        meanwhile."""
        p = self.position
        kept = where_now(p)
        try:
            if begin:
                self._begin()
            p.position, p.stream = 0, 0
            yield
        finally:
            go_back(p, kept)

    def _get_iterator(self) -> Any:
        """torch's iterator, which starts the workers (each epoch, or once if persistent).
        Every object this process holds is frozen meanwhile (``gc.freeze``'s documented use
        before a fork): a forked worker's collector then leaves the objects it inherited alone.
        Otherwise its first full collection writes to each one's header, and so copies every
        page of them: tens of MB a worker, where torch is imported."""
        if not self.num_workers:
            iterator = super()._get_iterator()
        else:
            gc.freeze()
            try:
                iterator = super()._get_iterator()
            finally:
                gc.unfreeze()  # here, they are collected as before
            widen_results(iterator)  # batches cross from the workers in fewer turns
        self._seen_pins(iterator)
        return iterator

    def _begin(self) -> None:
        """Where a pass starts (``Position._begin``); also the next epoch where this rank has no
        batch of this one left: ``drop_last`` leaves a short batch's rows, ranks' shares of the
        last rows differ, and with skips a rank hands out its epoch's batches without reaching a
        position (a loop stopped at its last batch by ``zip`` or ``islice``)."""
        p = self.position
        p._begin()
        if p.position and not self.skip and not _batches_left(self):
            p._end_epoch()
        elif p.taken and self.skip:  # several ranks: as many batches as its share has, handed
            with self._whole_epoch(begin=False):
                done = p.taken >= _batches(len(p), self.cut[0], self.cut[2])
            if done:
                p._end_epoch()

    def set_epoch(self, epoch: int) -> None:
        self.position.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """Where the loader stands: the epoch and the rows of it already handed out (and, with
        ``on_error="skip"``, the rows left out of this epoch so far)."""
        state = self.position.state_dict()
        if self.skip:
            state["read_rejects"] = self.ledger.epoch_count
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state``: the next batch is the one after the last one handed out."""
        p = self.position
        kept = where_now(p)
        p.load_state_dict(state)  # its position and stream checked
        read = state["position"] + state.get("stream", 0)
        try:  # no more rejects than rows read
            rejects = states.whole(state, "read_rejects", 0, read, default=0)
        except ValueError:
            go_back(p, kept)
            raise
        self._begin()  # saved after this rank's last batch: the next epoch
        # The rejects of the epoch the state resumes (none where it moved to the next one).
        self.ledger.start_epoch(rejects if p.position or p.stream else 0)


def _dataset_of(
    dataset: Any, cache_dir: Any, cache_limit: CacheLimit, on_error: str | None
) -> MapDataset | IterableDataset:
    """What a loader reads: a path's or mixture's ``MapDataset`` of every column; a
    ``MapDataset``'s copy (how a loader reads it is its own: another loader of it reads its own
    way); an ``IterableDataset`` itself."""
    if isinstance(dataset, (str, os.PathLike, Mixture)):
        cache = {"cache_dir": cache_dir, "cache_limit": cache_limit}
        return MapDataset(dataset, on_error=on_error or "raise", **cache)
    if cache_dir is not None or cache_limit is not None or on_error is not None:
        raise TypeError(
            "give cache_dir, cache_limit and on_error to the dataset, or a path as dataset"
        )
    return copy.copy(dataset) if isinstance(dataset, MapDataset) else dataset


def _choose_collate(
    loader: DataLoader, dataset: Any, batch_size: int | None, kwargs: dict[str, Any]
) -> None:
    """The loader's ``collate_fn`` (in ``kwargs``): with skips, its workers hand out chunks that
    it cuts into batches (``cut``); collating by default, batches cross from the workers with
    their small tensors as numpy arrays, made tensors in its process (``arrays``,
    ``collated.SMALL_BYTES``)."""
    # A collate of ours given back (Lightning makes a loader again from its attributes) is none.
    if kwargs.get("collate_fn") in (collated.worker_collate, _as_is):
        del kwargs["collate_fn"]
    if loader.skip:
        collate = kwargs.pop("collate_fn", None)
        dataset.chunked, dataset.collates = True, collate is None
        loader.cut = (
            batch_size,
            _Pieces(collate or default_collate),
            kwargs.pop("drop_last", False),
        )
        kwargs["collate_fn"] = _as_is
    loader.arrays = not loader.skip and "collate_fn" not in kwargs and batch_size is not None
    if loader.arrays:
        kwargs["collate_fn"] = collated.worker_collate


def _batches(rows: int, size: int, drop_last: bool) -> int:
    return rows // size if drop_last else -(-rows // size)


def _batches_left(loader: DataLoader) -> int:
    """This rank's batches of the epoch not yet handed out: its rows left (the sampler's or
    the dataset's length) cut as torch's batch sampler cuts them."""
    drop = getattr(loader.batch_sampler, "drop_last", False)  # none: samples, nothing dropped
    return _batches(len(loader.position), _rows_a_batch(loader), drop)


def _rows_a_batch(loader: DataLoader) -> int:
    """The rows of the order a batch takes (``batch_size=None``: a sample, one row)."""
    if loader.batch_size is not None or loader.batch_sampler is None:
        return loader.batch_size or 1
    return loader.batch_sampler.batch_size  # a batch_sampler given


class _Pieces:
    """Chunks' samples cut and joined (:class:`~recordmill.read.torch.chunks.Pieces`): batches the
    workers collated, along their rows; lists of samples, collated with ``collate`` here."""

    def __init__(self, collate: Callable[[list[Any]], Any]):
        self.collate = collate

    def cut(self, samples: Any, shape: Any, lo: int, hi: int) -> Any:
        return samples[lo:hi] if shape is None else collated.cut(samples, shape, lo, hi)

    def join(self, parts: list[Any], shape: Any) -> Any:
        if shape is None:
            return self.collate([sample for part in parts for sample in part])
        return collated.join(parts, shape)


def _as_is(chunk: Chunk | dict[str, Any]) -> Chunk | dict[str, Any]:
    """The collate of a loader whose workers hand out chunks (it cuts them into batches) or
    batches they collated already."""
    return chunk
