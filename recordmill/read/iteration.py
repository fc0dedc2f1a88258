"""How a :class:`~recordmill.read.dataset.Dataset` view reads many rows at once: its passes
(``iter_batches()`` in order or shuffled, ``iter_rows()``), the gathers and runs of consecutive
rows they share with ``take()``, ``rows()`` and ``to_arrow()``, and each batch's ``decode``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from recordmill.dataset.columns import row_values, rows_of
from recordmill.dataset.rows import recut
from recordmill.read import formats, passes

if TYPE_CHECKING:  # dataset.py imports this module: the class is for annotations only
    from recordmill.read.dataset import Dataset


def decoding(ds: Dataset, rows: np.ndarray) -> Any:
    """``decode`` for a batch of these (global) rows: with ``on_error="skip"``, its rows too."""
    skips = ds._groups.rejects
    if skips is None:
        return ds._decode
    return formats.Skipping(ds._decode, rows, skips, ds.version)


def keeps(ds: Dataset) -> bool:
    """Whether a gather keeps the groups it reads in the cache: only when all of them fit it
    (else a sweep over every group would only churn it)."""
    return ds._row_bytes() * ds._groups.ready().files.index.total <= ds._groups.cache_limit


def gather_batch(ds: Dataset, rows: np.ndarray, keep: bool | None = None) -> pa.RecordBatch:
    """Global rows in the given order, as one batch (see :class:`Gatherer`). Parquet groups
    are cached when ``keep`` (by default, :func:`keeps`)."""
    return ds._gatherer.take(rows, keeps(ds) if keep is None else keep)


def taken(ds: Dataset, rows: np.ndarray) -> pa.Table:
    """``ds.take()``: global ``rows`` in the given order, one table, gathered a window at a time."""
    window = ds._window(1024)
    batches = [gather_batch(ds, rows[lo : lo + window]) for lo in range(0, len(rows), window)]
    return pa.Table.from_batches(batches, schema=ds.schema)


def rows_at(ds: Dataset, rows: np.ndarray, keep: bool) -> list[dict[str, Any]]:
    """Row dicts of global ``rows``, not decoded."""
    return rows_of(ds.schema, ds._gatherer.values(rows, keep), len(rows))


def groups_in_order(ds: Dataset, start: int, stop: int) -> Iterator[pa.RecordBatch]:
    """Consecutive global rows ``start`` to ``stop``, group by group (``passes.in_order``)."""
    return passes.in_order(ds._groups, ds.schema, start, stop, ds._row_bytes())


def range_table(ds: Dataset, start: int, stop: int) -> pa.Table:
    """Consecutive global rows ``start`` to ``stop`` as one table."""
    return pa.Table.from_batches(list(groups_in_order(ds, start, stop)), schema=ds.schema)


def iter_rows(
    ds: Dataset, indices: Sequence[int] | np.ndarray | None, batch_size: int
) -> Iterator[dict[str, Any]]:
    """``ds.iter_rows()``: the rows in order, or those at ``indices``, a window at a time."""
    if indices is None:
        at = ds._start
        for batch in ds.iter_batches(batch_size, format="arrow"):
            yield from formats.decoded(row_values(batch), decoding(ds, at + np.arange(len(batch))))
            at += len(batch)
        return
    rows = ds._global(indices)
    window = ds._window(batch_size)
    for lo in range(0, len(rows), window):
        numbers = rows[lo : lo + window]
        gathered = rows_at(ds, numbers, keep=keeps(ds))
        for start in range(0, len(gathered), batch_size):
            part = slice(start, start + batch_size)
            yield from formats.decoded(gathered[part], decoding(ds, numbers[part]))


def batches_in_order(view: Dataset, batch_size: int, fmt: str) -> Iterator[Any]:
    """``view.iter_batches()``: its row groups in order, cut into batches (as numpy, a batch of
    pieces of several groups is each piece's columns joined: their values are made once, not
    first copied into one Arrow batch)."""
    at = view._start
    for parts in recut(groups_in_order(view, view._start, view._stop), batch_size):
        if fmt == "numpy" and len(parts) > 1:
            pieces = []
            for part in parts:
                pieces.append(formats.columns(part, decoding(view, at + np.arange(len(part)))))
                at += len(part)
            yield formats.joined(pieces)
            continue
        batch = parts[0] if len(parts) == 1 else pa.concat_batches(parts)
        yield from formats.pieces(
            batch, batch_size, fmt, decoding(view, at + np.arange(len(batch)))
        )
        at += len(batch)


def shuffled_batches(view: Dataset, batch_size: int, seed: int | None, fmt: str) -> Iterator[Any]:
    """``view.iter_batches(shuffle=True)``: a seeded permutation, gathered a window at a time."""
    seed = int(np.random.SeedSequence().entropy % 2**32) if seed is None else seed
    order = view.shuffled(seed)  # of the view's rows: a shared order is read-only
    window = view._window(batch_size)
    for lo in range(0, len(order), window):
        rows = order[lo : lo + window] + view._start
        if fmt == "numpy":  # a binary column's values made once, from where they lie
            taken = view._gatherer.values(rows, keeps(view))
            yield from formats.taken_pieces(view.schema, taken, batch_size, decoding(view, rows))
        else:
            batch = gather_batch(view, rows)
            yield from formats.pieces(batch, batch_size, fmt, decoding(view, rows))
