"""Where a resumable loader stands in an epoch, and which rank it is: the state that
``recordmill.torch``'s ``Sampler`` and ``IterableDataset`` share (see :mod:`recordmill.read.torch`).

An epoch's order is drawn from ``seed + epoch`` (or is the dataset's block order through a disk
cache, ``blocks`` parts at a time); ``position`` counts its rows already handed out by every rank
together. A state names the rows it was saved on (``data``: ``versions.fingerprint``), so that
it is refused on a dataset replaced since, and the order's ``blocks``, so that a job resumed with
another ``cache_limit`` continues the same order.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from recordmill.dataset.versions import fingerprint
from recordmill.read import order, states
from recordmill.read.machine.shared_orders import Orders
from recordmill.read.mixture import resume_as, resumed

__all__ = ["Position", "Ranks", "accelerate_deals", "go_back", "where_now"]

# What says where a Position stands (where_now()).
_WHERE = ("epoch", "position", "stream", "taken", "padded", "blocks", "left_off")


class Position:
    """Where an epoch stands: ``epoch`` picks the permutation (``seed + epoch``), ``position``
    counts the rows of it already handed out (by all ranks together)."""

    def __init__(self, shuffle: bool, seed: int):
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.position = 0
        # With rows skipped (on_error="skip") and several ranks, which are then not in step:
        # this rank's rows past position already read, its batches handed out, and the rows of
        # the order it read again to hand out as many batches as the other ranks (pad).
        self.stream = self.taken = self.padded = 0
        # The disk cache's capacity in parts that shapes a block-shuffled order (0: a full
        # permutation); None until a state or the ranks' agreement fixes it: this reader's own.
        self.blocks: int | None = None
        # A loader's pass over this epoch began and has not reached its end: one left (a break)
        # makes the next pass the next epoch, as a new pass of torch's loader draws a new order.
        self.left_off = False

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` from its first row, unless it is the epoch a loaded state
        resumes (begun, not handed out to its end, and no pass over it left off since)."""
        if epoch != self.epoch or self._handed_out() or self.left_off:
            self._restart(epoch)

    def state_dict(self) -> dict[str, Any]:
        state = {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "rows": self._length(),
            "version": _version(self),
            "data": _fingerprint(self),
            "blocks": self._blocks() if self.shuffle else 0,
        }
        mixture = self._mixture()
        if mixture is not None:  # its sources, and the weights that drew this epoch
            state["mixture"] = mixture.state(self.epoch)
        if self.stream or self.taken:  # this rank's own: ranks that skipped rows are not in step
            state.update(stream=self.stream, batches=self.taken, padded=self.padded)
            state["rank"], state["world_size"] = self._ranks()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (checked field by field: :mod:`~recordmill.read.states`)."""
        state = states.mapping(state)
        states.check_identity(state, self.state_dict(), _named_source(self))
        epoch = states.whole(state, "epoch", 0, states.MAX_EPOCH)
        position = states.whole(state, "position", 0, None)  # to the epoch's rows: below
        mixture, now = self._mixture(), self.epoch
        kept = None if mixture is None else resumed(mixture)
        try:
            if mixture is not None:
                self._resume_mixture(mixture, state["mixture"], epoch, position)
            self.epoch = epoch  # the epoch's rows (a mixture's: with the weights it goes on with)
            blocks, stream, taken, padded = _checked(self, state, position)
        except Exception:
            if mixture is not None:  # as it was: nothing of a refused state is kept
                resume_as(mixture, kept)
            raise
        finally:
            self.epoch = now  # until every field is checked
        self.epoch, self.position, self.stream, self.blocks = epoch, position, stream, blocks
        self.taken, self.padded = taken, padded
        self.left_off = False
        self._begin()  # saved after the epoch's last batch: the next epoch

    def _resume_mixture(self, mixture: Any, saved: Mapping[str, Any], epoch: int, at: int) -> None:
        """A mixture's epoch resumed at row ``at``: its rows before as they were drawn, its own
        weights from there on (see ``Mixture.resume``)."""
        mixture.resume(saved, epoch, at)

    def _begin(self) -> None:
        """Where a loader's pass starts: the next epoch where every row of this one was handed
        out (a loop that stopped at the last batch without asking for another, ``zip`` or
        ``islice``, ended the epoch too) or where a pass over it was left off (a ``break``,
        Lightning's sanity check or ``limit_train_batches``)."""
        if self._handed_out() or self.left_off:
            self._end_epoch()

    def _handed_out(self) -> bool:
        return bool(self._length()) and not self._left()

    def _left(self) -> int:
        """Rows of the epoch still to hand out, by every rank together."""
        return self._length() - self.position

    def _ranks(self) -> tuple[int, int]:
        bind = getattr(self, "_bind", None)  # Ranks'
        return bind() if bind is not None else (0, 1)

    def _order(self) -> np.ndarray | range:
        """This epoch's rows not yet handed out, in order (a ``range`` when not shuffled: an
        epoch's order is never a copy of its own a process)."""
        return self._epoch_order()[self.position :]

    def _epoch_order(self) -> np.ndarray | range:
        """This epoch's rows, all of them, in order."""
        return self._shuffled() if self.shuffle else range(self._length())

    def _shuffled(self) -> np.ndarray:
        """This epoch's permutation: drawn from ``seed + epoch`` (once a machine where it is
        large: ``read/machine/shared_orders.py``), or the dataset's own order (a block shuffle where its
        disk cache holds only some of it)."""
        return order.permutation(self._length(), self.seed, self.epoch, Orders())

    def _advance(self, rows: int) -> None:
        self.position = min(self._length(), self.position + rows)

    def _end_epoch(self) -> None:
        self._restart(self.epoch + 1)

    def _restart(self, epoch: int) -> None:
        """Epoch ``epoch``, from its first row."""
        self.epoch, self.position, self.left_off = epoch, 0, False
        self.stream = self.taken = self.padded = 0

    def _length(self) -> int:
        raise NotImplementedError

    def _blocks(self) -> int:
        """The order's blocks: fixed, or this reader's own (``Dataset.order_blocks``)."""
        if self.blocks is not None:
            return self.blocks
        source = self._source()
        return 0 if source is None else source.dataset().order_blocks()

    def _agree(self) -> None:
        """Every rank of a ``torch.distributed`` job takes the same shuffled order: where their
        disk caches differ in size, the block order of the smallest (one all-gather, the first
        time a loader starts an epoch)."""
        distributed = torch.distributed
        if not (self.shuffle and self.blocks is None and distributed.is_available()):
            return
        source = self._source()  # only an order through a disk cache depends on the machine
        if source is None or source.dataset().cache is None:
            return
        if not distributed.is_initialized() or distributed.get_world_size() == 1:
            return
        every: list[Any] = [None] * distributed.get_world_size()
        distributed.all_gather_object(every, self._blocks())
        blocks = [b for b in every if b]
        self.blocks = min(blocks) if blocks else 0

    def _source(self) -> Any:
        """The dataset read (None where unknown: a Sampler given a row count)."""
        return None

    def _mixture(self) -> Any:
        """The ``Mixture`` read, if it is one."""
        source = self._source()
        return None if source is None else source.mixture


def _checked(p: Position, state: Mapping[str, Any], position: int) -> tuple[Any, ...]:
    """The state's blocks, stream, batches and padded rows, each checked against the epoch's
    rows (``p`` in the state's epoch)."""
    rows = p._length()
    if position > rows:
        raise ValueError(
            f"cannot resume: the saved state has epoch {p.epoch} and position {position}; "
            f"a position is 0 to {rows} (the rows of an epoch)"
        )
    blocks = p.blocks
    if state.get("blocks") is not None:  # the order the state was saved in, kept
        blocks = states.whole(state, "blocks", 0, max(1, rows))  # a part holds a row at least
    taken = states.whole(state, "batches", 0, rows, default=0)
    padded = states.whole(state, "padded", 0, None, default=0)
    stream = _stream(p, state, rows - position)
    return blocks, stream, taken, padded


def _stream(p: Position, state: Mapping[str, Any], left: int) -> int:
    """The rows of its own a rank read past the position (see ``stream``), of ``left``."""
    stream = states.whole(state, "stream", 0, left, default=0)
    saved = (state.get("rank"), state.get("world_size"))
    if (stream or state.get("batches")) and tuple(saved) != p._ranks():
        whose = "names no rank" if None in saved else f"is rank {saved[0]} of {saved[1]}'s"
        raise ValueError(
            f"cannot resume: the saved state {whose} and this is rank {p._ranks()[0]} of "
            f"{p._ranks()[1]}; with rows skipped, ranks are not in step: resume each rank "
            "from the state it saved, with the same world size"
        )
    return stream


def _version(p: Position) -> int | None:
    """The version of the rows read, which a state names (None: a mixture's, or unknown)."""
    source = p._source()
    return None if source is None else source.version


def _fingerprint(p: Position) -> str | None:
    """What identifies the rows read (``versions.fingerprint``)."""
    source = p._source()
    if source is None or source.mixture is not None:  # a mixture's sources have their own
        return None
    return fingerprint(source.dataset().manifest)


def _named_source(p: Position) -> str:
    """The rows read, as a refused state names them: the dataset's path (a mixture's repr)."""
    source = p._source()
    return "the dataset" if source is None else source.path


def where_now(p: Position) -> tuple[Any, ...]:
    """Where ``p`` stands, for :func:`go_back`."""
    return tuple(getattr(p, name) for name in _WHERE)


def go_back(p: Position, where: tuple[Any, ...]) -> None:
    for name, value in zip(_WHERE, where, strict=True):
        setattr(p, name, value)


def _ranks_here(dealt: bool) -> tuple[int, int] | None:
    """This process's (rank, world size) for a reader that deals itself to the ranks, or None
    where nothing here says: an ``accelerate.Accelerator`` in this process deals the batches of
    the loaders it prepares (the Hugging Face ``Trainer``'s), so a reader that recordmill's
    ``DataLoader`` does not deal (``dealt``) reads the whole epoch for it, (0, 1); otherwise
    ``torch.distributed``'s, where a process group is."""
    if not dealt and accelerate_deals():
        return 0, 1
    distributed = torch.distributed
    if distributed.is_available() and distributed.is_initialized():
        return distributed.get_rank(), distributed.get_world_size()
    return None


def accelerate_deals() -> bool:
    """Whether an ``accelerate.Accelerator`` is in this process (it deals the batches of the
    loaders it prepares)."""
    accelerate = sys.modules.get("accelerate.state")  # never imported here: only asked
    return accelerate is not None and accelerate.is_initialized()


class Ranks:
    """``rank`` and ``world_size`` as given, or those of this process (``_ranks_here``), asked each
    time in the process where they are known and kept for the DataLoader workers started by
    spawn or forkserver, which have no process group (nor Accelerator) to ask: the ranks travel
    to them with the dataset. recordmill's ``DataLoader`` marks what it reads ``_dealt``."""

    rank: int | None
    world_size: int | None
    _dealt = False
    _bound: tuple[int, int] = (0, 1)

    def _given(self, rank: int | None, world_size: int | None) -> None:
        """``rank`` of ``world_size`` as given: both or neither (then this process's)."""
        if rank is None and world_size is None:
            self.rank, self.world_size = None, None
            return
        whole = all(type(n) is int for n in (rank, world_size))
        if not whole or not 0 <= rank < world_size:  # type: ignore[operator]
            raise ValueError(
                f"rank and world_size go together, world_size a whole number from 1 and rank 0 "
                f"to world_size - 1 (or neither: torch.distributed's), got rank={rank!r}, "
                f"world_size={world_size!r}"
            )
        self.rank, self.world_size = rank, world_size

    def _bind(self) -> tuple[int, int]:
        """This process's (rank, world size)."""
        if self.rank is not None and self.world_size is not None:
            return self.rank, self.world_size
        here = _ranks_here(self._dealt)
        if here is not None:
            self._bound = here
        return self._bound
