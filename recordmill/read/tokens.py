"""Token blocks for language models: the documents of a dataset (a column of token id arrays), in
an epoch's order, laid end to end and cut into blocks of ``block_size`` tokens.

With ``targets`` (the default) each block holds ``block_size + 1`` tokens and the next one starts
``block_size`` tokens later: a block's inputs are ``block[:-1]`` and its shifted targets
``block[1:]``, and no token is only ever a target. The stream's last tokens that do not fill a
block are left out of the epoch. Block ``j`` is tokens ``j * block_size`` onward of the epoch's
stream, so blocks can be dealt out (to ranks and workers) and resumed as rows are; a reader reads
only the documents its blocks cover (and the ones they share with the blocks beside them).

How long each document is comes from the dataset's ``length`` column (the ``text`` plugin's) or
from the token column itself; every document read is checked against it, so a ``length`` column
that does not agree is an error, never a block of other tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from recordmill.dataset.schema import nested_shape, numpy_dtype
from recordmill.read import order

READ_TOKENS = 1 << 22  # tokens read at once by iter_blocks (tests make it small, to cross steps)

__all__ = ["TokenStream"]


class TokenStream:
    """The token stream of a dataset (an opened ``Dataset``): its blocks, epoch by epoch."""

    def __init__(
        self,
        dataset: Any,
        block_size: int,
        column: str,
        eos: int | None,
        targets: bool,
        lengths: str | None,
    ):
        if type(block_size) is not int or block_size < 1:
            raise ValueError(f"block_size must be a whole number from 1, got {block_size!r}")
        self.dtype = _token_dtype(dataset.schema, column)
        self.column, self.block_size, self.targets = column, block_size, targets
        self.eos = None if eos is None else _eos(eos, self.dtype)
        self.tokens = dataset.select([column])
        self.length_column = _length_column(dataset.schema, lengths)
        self.lengths = _lengths(dataset, column, self.length_column)
        self.width = block_size + (1 if targets else 0)

    def epoch(self, order: np.ndarray) -> Epoch:
        """The stream of the documents in ``order`` (row numbers)."""
        return Epoch(self, order)

    def state(self) -> dict[str, Any]:
        """What a loader's state names, so that it is resumed only on the same stream."""
        return {"block_size": self.block_size, "column": self.column, "eos": self.eos,
                "targets": self.targets}  # fmt: skip


class Epoch:
    """One epoch's stream: where each document of the order ends in it."""

    def __init__(self, stream: TokenStream, order: np.ndarray):
        self.stream = stream
        self.order = np.asarray(order, dtype=np.int64)
        sizes = stream.lengths[self.order] + (0 if stream.eos is None else 1)
        self.ends = np.cumsum(sizes, dtype=np.int64)
        self.total = int(self.ends[-1]) if len(self.ends) else 0
        self.blocks = max(0, (self.total - stream.width) // stream.block_size + 1)
        if not self.blocks:
            target = " + 1 target" if stream.targets else ""
            raise ValueError(
                f"the column {stream.column!r} holds {self.total:,} tokens; expected at least "
                f"a block of {stream.width:,} (block_size {stream.block_size}{target})"
            )

    def read(self, blocks: np.ndarray) -> np.ndarray:
        """Blocks ``blocks`` (numbers below ``stream.blocks``), as a (len, width) array of the
        stored dtype, each document they cover read once."""
        s = self.stream
        blocks = np.asarray(blocks, dtype=np.int64)
        if not blocks.size:
            return np.empty((0, s.width), s.dtype)
        runs = np.split(blocks, np.flatnonzero(np.diff(blocks) != 1) + 1)
        los = np.array([int(r[0]) * s.block_size for r in runs], dtype=np.int64)
        his = np.array([int(r[-1]) * s.block_size + s.width for r in runs], dtype=np.int64)
        # The positions (in the order) of each run's first and last document.
        firsts = np.searchsorted(self.ends, los, side="right")
        lasts = np.searchsorted(self.ends, his - 1, side="right")
        covered = [np.arange(f, t + 1) for f, t in zip(firsts, lasts, strict=True)]
        wanted = np.unique(np.concatenate(covered))
        flat, starts = self._tokens(wanted)
        out = np.empty((len(blocks), s.width), s.dtype)
        row = 0
        for run, lo, hi, first in zip(runs, los, his, firsts, strict=True):
            begin = starts[np.searchsorted(wanted, first)] + lo - self._start(int(first))
            piece = flat[begin : begin + hi - lo]
            windows = np.lib.stride_tricks.sliding_window_view(piece, s.width)[:: s.block_size]
            out[row : row + len(run)] = windows
            row += len(run)
        return out

    def _start(self, position: int) -> int:
        return 0 if position == 0 else int(self.ends[position - 1])

    def _tokens(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The tokens of the documents at ``positions`` (ascending), end to end (each followed by
        the end-of-document id where one is added), and where each starts among them."""
        s = self.stream
        rows = self.order[positions]
        column = s.tokens.take(rows).column(0)
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        counts = _list_lengths(column)
        expected = s.lengths[rows]
        if not np.array_equal(counts, expected):
            i = int(np.flatnonzero(counts != expected)[0])
            said, held = int(expected[i]), int(counts[i])
            raise ValueError(
                f"row {int(rows[i])}: the length column {s.length_column!r} says {said} tokens, "
                f"but {s.column!r} holds {held}; give lengths=None to count them from "
                f"{s.column!r}"
            )
        values = _values(column, s.dtype)
        if s.eos is not None:
            values = np.insert(values, np.cumsum(counts), s.eos)
            counts = counts + 1
        starts = np.zeros(len(counts), dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        return values, starts


def iter_blocks(
    epoch: Epoch, batch_size: int | None, start: int = 0, within: np.ndarray | None = None
) -> Iterator[np.ndarray]:
    """Every block of an epoch from block ``start``, a block (or ``batch_size`` of them) at a
    time, read a few million tokens' worth at once; ``within``: the blocks in that order."""
    step = max(1, READ_TOKENS // epoch.stream.width)
    if batch_size:
        step = max(batch_size, step - step % batch_size)
    for lo in range(start, epoch.blocks, step):
        numbers = np.arange(lo, min(lo + step, epoch.blocks))
        blocks = epoch.read(numbers if within is None else within[numbers])
        if batch_size:
            yield from (blocks[i : i + batch_size] for i in range(0, len(blocks), batch_size))
        else:
            yield from blocks


def _values(column: pa.Array, dtype: np.dtype) -> np.ndarray:
    values = column.flatten()  # the values of these rows only, whatever the offsets start at
    if values.null_count:
        raise ValueError("the token column holds null tokens; expected token ids")
    return values.to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def _token_dtype(schema: pa.Schema, column: str) -> np.dtype:
    if column not in schema.names:
        raise ValueError(
            f"the dataset has no column {column!r}; expected a column of token ids among "
            f"{', '.join(schema.names)} (column=)"
        )
    shape, leaf = nested_shape(schema.field(column).type)
    if shape != [-1] or not pa.types.is_integer(leaf):
        raise ValueError(
            f"column {column!r} is {schema.field(column).type}; expected token ids, a list of "
            "integers (shape [-1]) a row"
        )
    return numpy_dtype(leaf)


def _eos(eos: int, dtype: np.dtype) -> int:
    info = np.iinfo(dtype)
    if type(eos) is not int or not info.min <= eos <= info.max:
        raise ValueError(f"eos must be a token id that {dtype.name} holds, got {eos!r}")
    return eos


def _length_column(schema: pa.Schema, lengths: str | None) -> str | None:
    if lengths == "auto":
        found = "length" in schema.names and pa.types.is_integer(schema.field("length").type)
        return "length" if found else None
    if lengths is not None and (
        lengths not in schema.names or not pa.types.is_integer(schema.field(lengths).type)
    ):
        raise ValueError(f"lengths={lengths!r}: expected an integer column of the dataset")
    return lengths


def _lengths(dataset: Any, column: str, length_column: str | None) -> np.ndarray:
    """Each document's token count: the length column, or counted from the token column (of
    each source of a mixture, numbered as its rows are)."""
    if hasattr(dataset, "datasets"):  # a Mixture
        return np.concatenate([_lengths(ds, column, length_column) for ds in dataset.datasets])
    if length_column is not None:
        values = dataset.select([length_column]).to_arrow().column(0)
        return values.to_numpy().astype(np.int64)
    tokens = dataset.select([column]).to_arrow().column(0)
    return _list_lengths(tokens).astype(np.int64)


def token_blocks(
    dataset: Any,
    block_size: int,
    column: str = "tokens",
    shuffle: bool = True,
    seed: int = 0,
    epoch: int = 0,
    eos: int | None = None,
    targets: bool = True,
    batch_size: int | None = None,
    lengths: str | None = "auto",
    shuffle_window: int = 0,
) -> Iterator[np.ndarray]:
    """``ds.token_blocks(block_size)``: the documents of a column of token ids (in the epoch's
    seeded order, as ``TokenBlocks`` by default; ``shuffle=False``: the stored order) laid end
    to end and cut into numpy blocks of ``block_size`` tokens (+1 for the shifted targets
    unless ``targets=False``), one at a time or ``batch_size`` at a time (a 2-d array);
    ``eos=ID`` puts that id after each document; ``shuffle_window=N``: the blocks shuffled
    within each run of N (a long document's blocks spread over batches). See
    :mod:`recordmill.read.tokens`."""
    stream = TokenStream(dataset, block_size, column, eos, targets, lengths)
    epoch_stream = stream.epoch(document_order(dataset, shuffle, seed, epoch))
    return iter_blocks(
        epoch_stream, batch_size, within=window_order(epoch_stream, shuffle_window, seed, epoch)
    )


def window_order(epoch: Epoch, window: int, seed: int, number: int) -> np.ndarray | None:
    """The blocks of an epoch shuffled within runs of ``window`` (None: in the stream's order)."""
    check_window(window)
    return order.within_windows(epoch.blocks, window, seed, number) if window > 1 else None


def check_window(window: Any) -> int:
    """``shuffle_window`` (of ``token_blocks`` and ``TokenBlocks``), refused unless blocks."""
    if type(window) is not int or window < 0:
        raise ValueError(f"shuffle_window must be a whole number of blocks from 0, got {window!r}")
    return window


def document_order(
    dataset: Any, shuffle: bool, seed: int, epoch: int, blocks: int | None = None
) -> np.ndarray:
    """The rows of an epoch: the dataset's seeded order (``Dataset.shuffled``; a mixture's
    own), or the stored one."""
    return dataset.shuffled(seed, epoch, blocks) if shuffle else np.arange(len(dataset))


def _list_lengths(column: pa.Array) -> np.ndarray:
    """Each list's length (pyarrow.compute imported only here: 40 ms in every process that
    opens a dataset, where only token blocks need it)."""
    import pyarrow.compute as pc

    return pc.list_value_length(column).to_numpy(zero_copy_only=False)
