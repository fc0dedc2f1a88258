"""Per-column summaries for the page, computed with pyarrow.compute one record batch at a time,
so that a column of any length costs memory of the order of a batch, not of the column.

Numbers (and the values inside arrays of numbers): exact count, nulls, NaNs, min, max and mean;
the histogram is drawn from a uniform sample of at most about :data:`KEPT_VALUES` values (all of
them for smaller columns). Strings: exact counts of each value until a column has more than
:data:`MAX_DISTINCT` distinct ones, then only that it has more. Bools: the count of each.
Binary columns and tensors are not streamed (they are the large ones): the sampled rows give
their summaries (``sample.py``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from recordmill.dataset.columns import to_numpy
from recordmill.dataset.schema import nested_shape, tensor_spec

KEPT_VALUES = 100_000
MAX_DISTINCT = 100_000


def kind(field: pa.Field) -> str:
    """What a column is, for the page: number, bool, string, bytes, tensor, list (of numbers,
    bools or strings), or other (nested bytes, structs...)."""
    if tensor_spec(field) is not None:
        return "tensor"
    shape, leaf = nested_shape(field.type)
    if shape:
        return "other" if _binary(leaf) or _leaf_kind(leaf) == "other" else "list"
    return "bytes" if _binary(leaf) else _leaf_kind(leaf)


def streamed(field: pa.Field) -> bool:
    """Whether the statistics pass reads this column (the large binary ones it does not)."""
    return kind(field) in ("number", "bool", "string", "list")


def _binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)


def _leaf_kind(t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    return "other"


class Reservoir:
    """A uniform sample of a stream of numbers: each value is kept with probability ``rate``,
    which halves (and half of what is kept is dropped) whenever more than twice ``cap`` are
    kept; every value has had the same chance in the end."""

    def __init__(self, rng: np.random.Generator, cap: int = KEPT_VALUES):
        self._rng = rng
        self._cap = cap
        self._parts: list[np.ndarray] = []
        self._kept = 0
        self.rate = 1.0

    def add(self, values: np.ndarray) -> None:
        if self.rate < 1.0:
            values = values[self._rng.random(len(values)) < self.rate]
        self._parts.append(values)
        self._kept += len(values)
        while self._kept > 2 * self._cap:
            kept = self.values()
            kept = kept[self._rng.random(len(kept)) < 0.5]
            self._parts, self._kept, self.rate = [kept], len(kept), self.rate / 2

    def values(self) -> np.ndarray:
        if len(self._parts) != 1:
            self._parts = [np.concatenate(self._parts) if self._parts else np.empty(0)]
        return self._parts[0]


class NumberStats:
    """Count, nulls, NaNs, min, max, mean, and a sample of the values for a histogram."""

    def __init__(self, rng: np.random.Generator, integer: bool):
        self.integer = integer
        self.count = self.nulls = self.nans = self.infs = self.neg_infs = 0
        self.min: float | None = None
        self.max: float | None = None
        self._sum = 0.0
        self.sample = Reservoir(rng)

    def add(self, column: pa.Array) -> None:
        self.nulls += column.null_count
        values = column.drop_null()
        if pa.types.is_floating(values.type):
            values = values.cast(pa.float64())  # float16 has no kernels
            nan = pc.is_nan(values)
            self.nans += pc.sum(nan).as_py() or 0
            infinite = pc.is_inf(values)
            positive = pc.and_(infinite, pc.greater(values, 0))
            self.infs += pc.sum(positive).as_py() or 0
            self.neg_infs += (pc.sum(infinite).as_py() or 0) - (pc.sum(positive).as_py() or 0)
            # NaN and the infinities counted apart: the statistics are of the finite values
            values = values.filter(pc.invert(pc.or_(nan, infinite)))
        if not len(values):
            return
        low_high = pc.min_max(values)
        low, high = low_high["min"].as_py(), low_high["max"].as_py()
        self.min = low if self.min is None else min(self.min, low)
        self.max = high if self.max is None else max(self.max, high)
        # As float64: an int64 sum overflows; past 2**53 a float is near enough for a mean.
        self._sum += pc.sum(values.cast(pa.float64(), safe=False)).as_py()
        self.count += len(values)
        self.sample.add(to_numpy(values))  # pyarrow's own would import pandas: 0.8 s

    @property
    def mean(self) -> float | None:
        return self._sum / self.count if self.count else None


class StringStats:
    """How often each value comes (the label distribution uses it too), until there are more
    than :data:`MAX_DISTINCT` distinct values; then only that there are more."""

    def __init__(self) -> None:
        self.counts: Counter[Any] = Counter()
        self.nulls = 0
        self.overflow = False

    def add(self, column: pa.Array) -> None:
        self.nulls += column.null_count
        if self.overflow:
            return
        counted = pc.value_counts(column.drop_null())
        values = counted.field("values").to_pylist()
        self.counts.update(dict(zip(values, counted.field("counts").to_pylist(), strict=True)))
        if len(self.counts) > MAX_DISTINCT:
            self.overflow = True
            self.counts.clear()  # counts of the first rows only would mislead


class BoolStats:
    def __init__(self) -> None:
        self.true = self.false = self.nulls = 0

    def add(self, column: pa.Array) -> None:
        self.nulls += column.null_count
        trues = pc.sum(column).as_py() or 0
        self.true += trues
        self.false += len(column) - column.null_count - trues


class ListStats:
    """Arrays: the number of values in each row, and the values' own statistics."""

    def __init__(self, rng: np.random.Generator, field: pa.Field):
        self.shape, leaf = nested_shape(field.type)
        self.lengths = NumberStats(rng, integer=True)
        self.values = leaf_stats(leaf, rng)

    def add(self, column: pa.Array) -> None:
        self.lengths.add(pc.list_value_length(column))
        flat = column
        for _ in self.shape:
            flat = flat.flatten()
        self.values.add(flat)


def leaf_stats(t: pa.DataType, rng: np.random.Generator) -> Any:
    kind_of = _leaf_kind(t)
    if kind_of == "bool":
        return BoolStats()
    if kind_of == "string":
        return StringStats()
    return NumberStats(rng, integer=pa.types.is_integer(t))


def for_field(field: pa.Field, rng: np.random.Generator) -> Any:
    """The statistics object for a streamed column."""
    if kind(field) == "list":
        return ListStats(rng, field)
    return leaf_stats(field.type, rng)


def histogram(
    stats: NumberStats, bins: int = 30
) -> tuple[np.ndarray, np.ndarray, int | float] | None:
    """(counts, edges, origin) of the sampled finite values; whole numbers get bins of a whole
    number of values (one each for a small range). The edges are of ``value - origin`` (0, or
    the minimum where the values are too large for float64 to tell the edges apart: 64-bit
    audio). Counts are scaled to the column's count when the values were sampled. Bins are
    computed without overflow at every type's limits."""
    values = stats.sample.values()
    if not len(values) or stats.min is None or stats.max is None:
        return None
    if stats.integer:  # bins of whole numbers of values, each the same count of them
        low, high = int(stats.min), int(stats.max)
        width = max(1, -(-(high - low + 1) // bins))  # Python ints: no overflow
        offsets = _offsets(values, low)
        edges = -0.5 + float(width) * np.arange((high - low) // width + 2)
        edges[-1] = min(edges[-1], high - low + 0.5)
        counts, edges = np.histogram(offsets, bins=edges)
        shifted = low + edges
        if low and np.all(np.diff(shifted) > 0):
            return counts / stats.sample.rate, shifted, 0
        return counts / stats.sample.rate, edges, low if low else 0
    low, high = float(stats.min), float(stats.max)
    if high == low:
        edges = np.array([low - 0.5, high + 0.5])
    else:  # high - low itself may overflow (float64's limits): a weighted sum of the two
        t = np.arange(bins + 1) / bins
        edges = low * (1 - t) + high * t
    counts, edges = np.histogram(values.astype(np.float64), bins=edges)
    return counts / stats.sample.rate, edges, 0


def _offsets(values: np.ndarray, low: int) -> np.ndarray:
    """``values - low`` as float64, exact in 64-bit unsigned arithmetic (an int64 span may need
    all 64 bits)."""
    if values.dtype.kind in "iu" and values.dtype.itemsize == 8:
        return (values.astype(np.uint64) - np.uint64(low % 2**64)).astype(np.float64)
    return values.astype(np.float64) - low
