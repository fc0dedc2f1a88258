"""Batches that PyTorch's ``default_collate`` made, cut and joined along their rows; and
made a column at a time from a gathered Arrow batch (:func:`from_columns`).

With ``on_error="skip"`` (:mod:`recordmill.read.skips`) a DataLoader worker collates the rows
of its chunk that did not fail, as it would a batch (one tensor a field crosses to the loader's
process, not one a row), and the loader cuts such batches where the epoch's batches end. How to
cut one follows from how ``default_collate`` lays out a sample, its *layout*: tensors, numpy
arrays and numbers are stacked (cut along the first dimension), strings become lists, mappings
and sequences are collated field by field. A sample of any other kind has no layout (None), and
its rows cross uncollated.
"""

from __future__ import annotations

import collections.abc
import contextlib
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import default_collate

from recordmill.dataset.columns import column_values, to_numpy
from recordmill.dataset.schema import tensor_spec

__all__ = ["as_tensors", "cut", "from_columns", "join", "layout", "worker_collate", "writable"]

# A tensor crosses from a DataLoader worker through shared memory: the loader's process asks the
# worker for its file descriptor (a round trip through a socket, each tensor of each batch).
# A small one costs less as bytes in the batch's pickle: it stays a numpy array until it is
# there (``as_tensors``), in the batches of recordmill's DataLoader.
SMALL_BYTES = 256 << 10

Layout = Any  # "stack", "list", ("map", {key: Layout}), ("seq", type or None, [Layout])


def layout(sample: Any) -> Layout | None:
    """How ``default_collate`` lays out batches of samples like this one (None: unknown)."""
    if isinstance(sample, (torch.Tensor, np.ndarray, np.generic, int, float)):
        return "stack"
    if isinstance(sample, str):
        return "list"
    if isinstance(sample, collections.abc.Mapping):
        fields = {key: layout(value) for key, value in sample.items()}
        return None if None in fields.values() else ("map", fields)
    if isinstance(sample, collections.abc.Sequence) and not isinstance(sample, (bytes, bytearray)):
        named = type(sample) if hasattr(sample, "_fields") else None  # a namedtuple stays one
        fields = [layout(value) for value in sample]
        return None if None in fields else ("seq", named, fields)
    return None


def collate(samples: list[Any]) -> tuple[Any, Layout | None]:
    """``samples`` collated as ``default_collate`` does, and their layout (None: left as a list)."""
    shape = layout(samples[0]) if samples else None
    if shape is None:
        return samples, None
    return default_collate(samples), shape


def cut(batch: Any, shape: Layout, lo: int, hi: int) -> Any:
    """Rows ``lo`` to ``hi`` of a collated batch."""
    if shape in ("stack", "list"):
        return batch[lo:hi]
    if shape[0] == "map":
        return {key: cut(batch[key], sub, lo, hi) for key, sub in shape[1].items()}
    fields = [cut(value, sub, lo, hi) for value, sub in zip(batch, shape[2], strict=True)]
    return shape[1](*fields) if shape[1] is not None else fields


def join(batches: list[Any], shape: Layout) -> Any:
    """Collated batches, one after the other, as one."""
    if len(batches) == 1:
        return batches[0]
    if shape == "stack":
        return torch.cat(batches)
    if shape == "list":  # a list, or a tuple where the strings were a sequence's field
        return type(batches[0])(value for batch in batches for value in batch)
    if shape[0] == "map":
        return {key: join([b[key] for b in batches], sub) for key, sub in shape[1].items()}
    columns = [
        join(list(values), sub)
        for values, sub in zip(zip(*batches, strict=True), shape[2], strict=True)
    ]
    return shape[1](*columns) if shape[1] is not None else columns


def from_columns(schema: pa.Schema, columns: list[Any]) -> dict[str, Any]:
    """What ``default_collate`` makes of the rows' dicts, made a column at a time from their
    gathered columns (Arrow arrays, or lists of values made already: a binary column's bytes,
    which it leaves as they are). A column of numbers or of fixed-shape arrays without nulls is
    one tensor over the column's bytes (a gather's own, so not copied again; bytes it does not
    own, such as mapped ones, are copied once); under ``SMALL_BYTES``, a numpy array instead,
    which :func:`as_tensors` makes the tensor in the loader's process. Any other column is the
    default collate of its values."""
    out = {}
    for field, column in zip(schema, columns, strict=True):
        if isinstance(column, list):
            out[field.name] = default_collate(column)
            continue
        stacked = _stacked(column, field)
        if stacked is None:
            stacked = default_collate([writable(v) for v in column_values(column, field)])
        out[field.name] = stacked
    return out


def worker_collate(samples: list[Any]) -> Any:
    """``default_collate`` for a batch that crosses from a DataLoader worker: its small tensors
    (fields of a dict or list batch) as numpy arrays, which :func:`as_tensors` makes tensors."""
    batch = default_collate(samples)
    for key, value in _fields(batch):
        if type(value) is torch.Tensor and value.nbytes < SMALL_BYTES:  # (a subclass stays)
            # No numpy array of a bfloat16 one, or of one that needs grad: it crosses as it is.
            with contextlib.suppress(TypeError, RuntimeError):
                batch[key] = value.numpy()
    return batch


def as_tensors(batch: Any) -> Any:
    """A batch of :func:`from_columns` or :func:`worker_collate`, in the loader's process: its
    numpy arrays made the tensors ``default_collate`` makes."""
    for key, value in _fields(batch):
        if isinstance(value, np.ndarray):
            batch[key] = torch.from_numpy(value)
    return batch


def _fields(batch: Any) -> list[tuple[Any, Any]]:
    """The fields of a dict or list batch, as (key, value); none of any other."""
    if type(batch) is dict:
        return list(batch.items())
    return list(enumerate(batch)) if type(batch) is list else []


def _stacked(column: pa.Array, field: pa.Field) -> torch.Tensor | None:
    """The column as the one tensor ``default_collate`` stacks of its rows, or None where its
    rows are not numbers or arrays of one shape (nulls, strings, ...)."""
    if column.null_count:
        return None
    spec = tensor_spec(field)
    if spec is not None:
        dtype, shape = spec
        data = column.buffers()[1]
        count = len(column) * int(np.prod(shape))
        values = np.frombuffer(data, dtype, count, column.offset * column.type.byte_width)
        return _tensor(writable(values.reshape(len(column), *shape)))
    values = to_numpy(column, field)
    if not isinstance(values, np.ndarray) or values.dtype.kind not in "biuf":
        return None
    if values.ndim == 1 and values.dtype.kind in "iu":  # rows of Python ints: int64
        if values.dtype == np.uint64:  # beyond int64: collated row by row (and refused)
            return None
        values = values.astype(np.int64, copy=False)
    return _tensor(writable(values))


def _tensor(values: np.ndarray) -> torch.Tensor | np.ndarray:
    """A stacked column as a tensor; a small one as the array (see ``SMALL_BYTES``)."""
    return values if values.nbytes < SMALL_BYTES else torch.from_numpy(values)


def writable(value: Any) -> Any:
    """The value, an array that is a view of bytes it must not write to copied (torch warns of
    such arrays): bytes the reader does not own, such as mapped or cached ones."""
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        return value.copy()
    return value
