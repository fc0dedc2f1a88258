"""A batch as a reader asks for it: Arrow, numpy columns (:func:`columns`) or row dicts, its values
decoded, and with ``on_error="skip"`` the rows whose values do not decode left out (:class:`Skipping`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from recordmill.dataset.columns import to_numpy
from recordmill.read.skips import ReadReject, one_line


@dataclass(frozen=True)
class Skipping:
    """``decode`` with ``on_error="skip"``: the functions, the global rows of the batch they
    decode, and the list a row whose value does not decode goes to instead."""

    decode: dict[str, Callable[[Any], Any]]
    rows: np.ndarray
    rejects: list[ReadReject]
    version: int

    def items(self) -> Any:
        return self.decode.items()

    def __contains__(self, name: object) -> bool:
        return name in self.decode

    def slice(self, lo: int, n: int) -> Skipping:
        return replace(self, rows=self.rows[lo : lo + n])

    def failed(self, values: list[Any], name: str, decoder: Callable[[Any], Any]) -> set[int]:
        """Decode ``values`` of column ``name`` in place; the offsets of those that raised."""
        failed = set()
        for k, value in enumerate(values):
            try:
                values[k] = decoder(value)
            except Exception as e:
                failed.add(k)
                reject = ReadReject(int(self.rows[k]), name, one_line(e), version=self.version)
                self.rejects.append(reject)
        return failed


def check_format(fmt: Any) -> str:
    """``iter_batches``'s ``format``, refused unless one it gives (another was read as numpy)."""
    if fmt not in ("numpy", "arrow"):
        raise ValueError(f"format must be 'numpy' or 'arrow', got {fmt!r}")
    return fmt


def pieces(batch: pa.RecordBatch, size: int, fmt: str, decode: Any) -> Iterator[Any]:
    """A batch cut into batches of ``size`` rows, as Arrow or as numpy columns."""
    for lo in range(0, batch.num_rows, size):
        piece = batch.slice(lo, size)
        if fmt == "arrow":
            yield piece
        else:
            yield columns(piece, _sliced(decode, lo, size))


def taken_pieces(schema: pa.Schema, taken: list[Any], size: int, decode: Any) -> Iterator[Any]:
    """Gathered columns (``Gatherer.values``: Arrow arrays, or a binary column's ``bytes``)
    cut into batches of ``size`` rows as numpy columns."""
    rows = len(taken[0]) if taken else 0
    for lo in range(0, rows, size):
        piece = [column[lo : lo + size] for column in taken]
        yield _as_columns(schema, piece, _sliced(decode, lo, size))


def columns(batch: pa.RecordBatch, decode: Any) -> dict[str, Any]:
    """A batch as numpy arrays and lists, one per column, its values decoded (with skips, the
    rows whose values do not decode left out)."""
    return _as_columns(batch.schema, batch.columns, decode)


def _as_columns(schema: pa.Schema, arrays: list[Any], decode: Any) -> dict[str, Any]:
    out, failed = {}, set()
    for field, column in zip(schema, arrays, strict=True):
        name = field.name
        values = column if isinstance(column, list) else to_numpy(column, field)
        if name in decode:
            values = list(values)
            if isinstance(decode, Skipping):
                failed |= decode.failed(values, name, decode.decode[name])
            else:
                values = [decode[name](v) for v in values]
        out[name] = values
    if failed:
        keep = [k for k in range(len(arrays[0])) if k not in failed]
        out = {name: _kept(values, keep) for name, values in out.items()}
    return out


def _sliced(decode: Any, lo: int, size: int) -> Any:
    return decode.slice(lo, size) if isinstance(decode, Skipping) else decode


def _kept(values: Any, keep: list[int]) -> Any:
    return values[keep] if isinstance(values, np.ndarray) else [values[k] for k in keep]


def joined(pieces: list[dict[str, Any]]) -> dict[str, Any]:
    """Batches of numpy columns (:func:`columns`), one after the other, as one."""
    out = {}
    for name in pieces[0]:
        values = [piece[name] for piece in pieces]
        if all(isinstance(v, np.ndarray) for v in values):
            out[name] = np.concatenate(values)
        else:
            out[name] = [v for part in values for v in part]
    return out


def decoded(rows: list[dict[str, Any]], decode: Any) -> list[dict[str, Any]]:
    """Row dicts, their values decoded (with skips, the rows that do not decode left out)."""
    if isinstance(decode, Skipping):
        failed: set[int] = set()
        for name, decoder in decode.items():
            values = [row[name] for row in rows]
            failed |= decode.failed(values, name, decoder)
            for row, value in zip(rows, values, strict=True):
                row[name] = value
        return [row for k, row in enumerate(rows) if k not in failed]
    for name, decoder in decode.items():
        for row in rows:
            row[name] = decoder(row[name])
    return rows
