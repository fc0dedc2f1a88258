"""``recordmill.torch.TokenBlocks``: packed token blocks for language-model training, dealt to
ranks and DataLoader workers and resumed as an ``IterableDataset``'s rows are (a block is a
"row" here; see :mod:`recordmill.read.tokens` for how the blocks are cut)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import torch

from recordmill.read import order, states
from recordmill.read.dataset import Dataset
from recordmill.read.options import CacheLimit
from recordmill.read.tokens import Epoch, TokenStream, check_window, document_order
from recordmill.read.torch.datasets import IterableDataset
from recordmill.read.torch.dealt import NO_ROWS

__all__ = ["TokenBlocks"]


class TokenBlocks(IterableDataset):
    """Blocks of ``block_size`` (+1 with ``targets``) token ids, as tensors of the stored dtype.

    The documents of ``column`` (an epoch's seeded permutation of them with ``shuffle``; through
    a disk cache, its block order) are laid end to end, with ``eos`` after each one when given
    (the ``text`` plugin's ``--eos`` puts it in the data already), and cut into blocks. Blocks
    are dealt out as an :class:`IterableDataset`'s rows are: give the DataLoader's
    ``batch_size`` (recordmill's :class:`DataLoader` sets it), and its ``state_dict()`` resumes
    mid-epoch exactly, with any number of workers or ranks; ``even`` shares the last blocks out as
    an ``IterableDataset``'s last rows. ``transform`` is applied to each
    block (``lambda b: (b[:-1].long(), b[1:].long())``). ``shuffle_window=N`` (with
    ``shuffle``) shuffles the blocks within each run of N of the stream, so that a long
    document's blocks are spread over batches; a batch is then read as its blocks' documents.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | Any,
        block_size: int,
        column: str = "tokens",
        shuffle: bool = True,
        seed: int = 0,
        eos: int | None = None,
        targets: bool = True,
        lengths: str | None = "auto",
        transform: Callable[[torch.Tensor], Any] | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        batch_size: int = 1,
        read_blocks: int = 1024,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: CacheLimit = None,
        version: int | None = None,
        even: str | None = "pad",
        shuffle_window: int = 0,
    ):
        self._settings = (block_size, column, eos, targets, lengths)
        self.shuffle_window = check_window(shuffle_window)
        self._tokens: TokenStream | None = None
        self._epoch_stream: tuple[Any, Epoch] | None = None
        super().__init__(
            path,
            columns=None,
            transform=transform,
            shuffle=shuffle,
            seed=seed,
            rank=rank,
            world_size=world_size,
            batch_size=batch_size,
            read_batch_size=read_blocks,
            cache_dir=cache_dir,
            cache_limit=cache_limit,
            version=version,
            even=even,
        )
        self.stream_of()  # a wrong column or block size fails here, not in a worker

    def _bytes_a_row(self, ds: Dataset) -> int | None:
        if self._window() > 1:  # blocks scattered over a window: each reads its whole document
            return None
        stream = self.stream_of()  # a block, not a document, is what this dataset hands out
        return stream.width * stream.dtype.itemsize

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_tokens"] = state["_epoch_stream"] = None  # made again where it is received
        return state

    def stream_of(self) -> TokenStream:
        """The token stream read (its lengths read once in each process)."""
        if self._tokens is None:
            self._tokens = TokenStream(self.source.dataset(), *self._settings)
        return self._tokens

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "tokens": self._stream_state()}

    def _stream_state(self) -> dict[str, Any]:
        window = {"shuffle_window": self.shuffle_window} if self._window() > 1 else {}
        return {**self.stream_of().state(), **window}

    def _window(self) -> int:
        return self.shuffle_window if self.shuffle else 0

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved, mine = states.mapping(state).get("tokens"), self._stream_state()
        if not isinstance(saved, Mapping):
            raise ValueError(
                f"cannot resume: the saved state is not a TokenBlocks state (its 'tokens' is "
                f"{saved!r}; expected the dict of block size, column and eos it was saved with)"
            )
        for key, value in {"shuffle_window": None, **mine}.items():
            if saved.get(key) != value:
                raise ValueError(
                    f"cannot resume: the saved state has {key}={saved.get(key)!r}, this one "
                    f"{value!r}; resume with the block size, column, eos and shuffle_window it "
                    "was saved with"
                )
        super().load_state_dict(state)

    def _resume_mixture(self, mixture: Any, saved: Mapping[str, Any], epoch: int, at: int) -> None:
        """A mixture's epoch resumed at block ``at``: the documents that the blocks before it read
        kept as they were drawn, the mixture's own weights from the next document on."""
        mixture.resume(saved, epoch, 2**62)  # the weights it was saved with, the whole epoch
        self.epoch = epoch
        stream, ends = self.stream_of(), self._epoch().ends
        window = max(1, self._window())  # the blocks before ``at`` read all of its window's
        at = min(-(-at // window) * window, self._epoch().blocks)
        read = at * stream.block_size + stream.width - stream.block_size if at else 0
        starts = np.concatenate([[0], ends[:-1]])
        mixture.resume(saved, epoch, int(np.searchsorted(starts, read, side="left")))

    def _length(self) -> int:
        return self._epoch().blocks  # a mixture's epochs may differ

    def _shuffled(self) -> np.ndarray:
        # The documents are shuffled (see _epoch); blocks go out in the stream's order, so that
        # a batch is one stretch of the stream, read in one go (or shuffled within windows).
        return order.within_windows(self._length(), self._window(), self.seed, self.epoch)

    def _epoch(self) -> Epoch:
        """This epoch's stream: its documents in a seeded order, or in the stored one (a
        mixture's order, which a resume with other weights changes)."""
        mixture = self.source.mixture
        # The block order too: a resumed state fixes the one it was saved in, which may not be
        # the one this reader's own cache would take.
        blocks = self._blocks() if self.shuffle else None
        key = (self.epoch, blocks, None if mixture is None else mixture.epoch_steps(self.epoch))
        if self._epoch_stream is None or self._epoch_stream[0] != key:
            order = document_order(
                self.source.dataset(), self.shuffle, self.seed, self.epoch, blocks
            )
            self._epoch_stream = (key, self.stream_of().epoch(order))
        return self._epoch_stream[1]

    def __iter__(self) -> Iterator[Any]:
        published = self._take_position()
        order, pad = self._dealt_order() if published is None else (published, NO_ROWS)
        epoch = self._epoch()
        for batches in self._batches(order, pad):
            for block in epoch.read(np.concatenate(batches)):
                tensor = torch.from_numpy(block)
                yield self.transform(tensor) if self.transform else tensor
