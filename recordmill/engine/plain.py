"""Lists of plain values (``int``, ``float``, ``bool``, ``str`` or ``bytes``, or one numpy scalar
type, with None among them) as the Arrow array ``pa.array`` makes of them, built on buffers.

Why not ``pa.array``: its first call in a process asks whether the list is a pandas object, and
so imports pandas where it is installed (0.15 s of CPU, more on a busy machine). Every worker of
a write would pay it at its first rows, or the fork server before any worker starts, which a
small write waits for. A long list (past ``SMALL`` values) is left to ``pa.array``, which is
quicker per value, once a process has paid for pandas; so is any other list (mixed types, numpy
float16 scalars, values past int64, non-ASCII strings, past 2 GB): :func:`plain_array` returns
None for it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

import numpy as np
import pyarrow as pa

_NONE = type(None)
# The most values a list built here has: a small write's batches, and a large write's first rows
# before its batches grow. pa.array is 2-5x quicker a value (plain_array spends 20-40 ns more).
SMALL = 4096
# The most bytes pa.array puts in one string or binary array (more: a chunked array).
_MOST_BYTES = 2**31 - 2
# Bytes of an item from which copying items one by one into Arrow's memory is quicker than
# joining them into a new bytes object, whose pages each cost a first touch (_joined).
_LARGE_ITEM = 1024


class _ToArrow(Exception):
    """A list to leave to pa.array after all."""


def plain_array(values: Sequence[Any]) -> pa.Array | None:
    """``pa.array(values)`` where every value is None or of one of the plain types (it makes
    int64, double, bool, string or binary, as ``pa.array`` does); None for any other list."""
    if len(values) > SMALL:
        return None
    kinds = set(map(type, values))
    nulls = _NONE in kinds
    kinds.discard(_NONE)
    build = _BUILDERS.get(kinds.pop()) if len(kinds) == 1 else None
    if build is None:
        return None
    valid, present = None, values
    if nulls:
        valid = np.fromiter(map(operator.is_not, values, repeat(None)), bool, len(values))
        present = [v for v in values if v is not None]
    try:
        return build(present, valid)
    except (OverflowError, _ToArrow):  # pa.array says what is wrong (or copes)
        return None


def numpy_array(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """A one-dimensional numpy array of numbers or bools as an Arrow array on its buffer (a
    copy for bools, which Arrow keeps as bits), null where ``valid`` is False. (``pa.array`` of
    a numpy array asks about pandas too, and imports numpy.ma to look for a masked one.)"""
    if values.dtype.kind not in "biuf":
        return pa.array(values, mask=None if valid is None else ~valid)
    nulls = 0 if valid is None else len(valid) - int(np.count_nonzero(valid))
    if values.dtype.kind == "b":
        data = _bitmap(values)
    else:
        values = np.ascontiguousarray(values, values.dtype.newbyteorder("="))  # Arrow's: native
        data = pa.py_buffer(values) if values.size else pa.py_buffer(b"")
    arrow_type = pa.from_numpy_dtype(values.dtype)
    validity = _bitmap(valid) if nulls else None
    return pa.Array.from_buffers(arrow_type, len(values), [validity, data], null_count=nulls)


def _numbers(dtype: type) -> Callable[[Sequence[Any], np.ndarray | None], pa.Array]:
    def build(present: Sequence[Any], valid: np.ndarray | None) -> pa.Array:
        numbers = np.fromiter(present, dtype, len(present))
        if valid is not None:  # a null's slot holds 0 (False), as pa.array's does
            numbers, numbers[valid] = np.zeros(len(valid), dtype), numbers
        return numpy_array(numbers, valid)

    return build


def _texts(arrow_type: pa.DataType, utf8: bool) -> Callable:
    def build(present: Sequence[Any], valid: np.ndarray | None) -> pa.Array:
        encoded, data = _encoded(present) if utf8 else (present, None)
        lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
        if valid is not None:  # a null takes no bytes
            lengths, lengths[valid] = np.zeros(len(valid), np.int64), lengths
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if offsets[-1] > _MOST_BYTES:
            raise _ToArrow  # pa.array makes a chunked array of it
        nulls = 0 if valid is None else len(valid) - int(np.count_nonzero(valid))
        if data is None:
            data = _joined(encoded, offsets if valid is None else offsets[np.r_[valid, True]])
        buffers = [_bitmap(valid), pa.py_buffer(offsets.astype(np.int32)), data]
        return pa.Array.from_buffers(arrow_type, len(lengths), buffers, null_count=nulls)

    return build


def _encoded(texts: Sequence[str]) -> tuple[Sequence[str], pa.Buffer]:
    """ASCII strings (each character a byte, so each string's length is its length in bytes)
    and their bytes end to end. Others go to pa.array, which encodes them 7x quicker."""
    joined = "".join(texts)
    if not joined.isascii():
        raise _ToArrow
    return texts, pa.py_buffer(joined.encode("ascii"))


def _joined(items: Sequence[bytes], offsets: np.ndarray) -> pa.Buffer:
    """``items`` end to end. Large ones are copied into memory from Arrow's pool, which it
    reuses: a new ``bytes`` of 100 MB costs its pages' first touch (5x slower)."""
    if offsets[-1] < _LARGE_ITEM * len(items):
        return pa.py_buffer(b"".join(items))
    data = pa.allocate_buffer(int(offsets[-1]))
    view = memoryview(data).cast("B")
    for item, start, end in zip(items, offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        view[start:end] = item
    return data


def _bitmap(flags: np.ndarray | None) -> pa.Buffer | None:
    """Arrow's bitmap of ``flags`` (least significant bit first); None for no flags."""
    if flags is None:
        return None
    return pa.py_buffer(np.packbits(flags, bitorder="little"))


# pa.array makes of a list of numpy scalars the array of their own type (float16 aside: it is
# left to pa.array, which reads some as integers; see convert._scalar_column).
_NUMPY = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
_BUILDERS: dict[type, Callable[[Sequence[Any], np.ndarray | None], pa.Array]] = {
    int: _numbers(np.int64),
    float: _numbers(np.float64),
    bool: _numbers(np.bool_),
    str: _texts(pa.string(), utf8=True),
    bytes: _texts(pa.binary(), utf8=False),
    **{t: _numbers(t) for t in (*_NUMPY, np.float32, np.float64, np.bool_)},
    np.str_: _texts(pa.string(), utf8=True),
    np.bytes_: _texts(pa.binary(), utf8=False),
}
