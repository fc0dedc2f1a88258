"""Streaming column statistics: the same figures as numpy over the whole column, whatever the
batches."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from recordmill.dataset.schema import tensor_field
from recordmill.report import stats


def fed(column_stats, array: pa.Array, batch: int = 7):
    for lo in range(0, len(array), batch):
        column_stats.add(array.slice(lo, batch))
    return column_stats


def test_numbers_over_many_batches_are_those_of_the_whole_column():
    rng = np.random.default_rng(0)
    values = rng.normal(3, 2, 200).astype(np.float32)
    mask = rng.random(200) < 0.1
    values[5] = np.nan
    array = pa.array(values, mask=mask)
    found = fed(stats.NumberStats(rng, integer=False), array)
    kept = values[~mask & ~np.isnan(values)]
    assert found.nulls == mask.sum() and found.nans == int(not mask[5])
    assert found.min == pytest.approx(kept.min()) and found.max == pytest.approx(kept.max())
    assert found.mean == pytest.approx(kept.astype(np.float64).mean())
    counts, edges, _ = stats.histogram(found)
    assert counts.sum() == len(kept) and edges[0] == found.min and edges[-1] == found.max


def test_big_integers_do_not_overflow_and_float16_works():
    big = fed(stats.NumberStats(np.random.default_rng(0), True), pa.array([2**62] * 8))
    assert big.mean == pytest.approx(2.0**62)
    half = fed(stats.NumberStats(np.random.default_rng(0), False), pa.array(np.ones(5, np.float16)))
    assert (half.min, half.max, half.mean) == (1.0, 1.0, 1.0)


def test_the_histogram_of_a_long_column_is_a_uniform_sample_of_bounded_size():
    rng = np.random.default_rng(1)
    reservoir = stats.Reservoir(rng, cap=1000)
    for lo in range(0, 100_000, 5000):
        reservoir.add(np.arange(lo, lo + 5000, dtype=np.float64))
    kept = reservoir.values()
    assert 1000 <= len(kept) <= 2000 and reservoir.rate < 1
    # Uniform over the stream: early and late values as likely.
    assert abs(np.mean(kept) - 50_000) < 3000
    assert abs((kept < 50_000).mean() - 0.5) < 0.06


def test_strings_counted_exactly_until_there_are_too_many(monkeypatch):
    column = pa.array(["a", "b", "a", None, "c", "a"])
    found = fed(stats.StringStats(), column, batch=2)
    assert found.counts == {"a": 3, "b": 1, "c": 1} and found.nulls == 1
    monkeypatch.setattr(stats, "MAX_DISTINCT", 2)
    many = fed(stats.StringStats(), column, batch=2)
    assert many.overflow and not many.counts


def test_bools_and_arrays():
    flags = fed(stats.BoolStats(), pa.array([True, False, None, True]), batch=3)
    assert (flags.true, flags.false, flags.nulls) == (2, 1, 1)
    field = pa.field("tokens", pa.list_(pa.uint16()))
    lists = stats.for_field(field, np.random.default_rng(0))
    fed(lists, pa.array([[1, 2], [], [3, 4, 5], [9]], type=field.type), batch=3)
    assert (lists.lengths.min, lists.lengths.max) == (0, 3)
    assert (lists.values.min, lists.values.max, lists.values.count) == (1, 9, 6)


def test_what_is_streamed():
    kinds = {
        pa.field("a", pa.int8()): "number",
        pa.field("b", pa.string()): "string",
        pa.field("c", pa.binary()): "bytes",
        pa.field("d", pa.list_(pa.float32(), 8)): "list",
        pa.field("e", pa.list_(pa.binary())): "other",
        tensor_field("f", np.dtype("uint8"), (28, 28), False): "tensor",
    }
    for field, kind in kinds.items():
        assert stats.kind(field) == kind, field
        assert stats.streamed(field) == (kind in ("number", "string", "list")), field


def test_whole_numbers_get_bins_of_whole_numbers_of_values():
    found = fed(stats.NumberStats(np.random.default_rng(0), True), pa.array(np.arange(40)))
    counts, edges, _ = stats.histogram(found)
    assert list(counts) == [2] * 20 and np.all(np.diff(edges) == 2)
    wider = fed(stats.NumberStats(np.random.default_rng(0), True), pa.array(np.arange(400)))
    counts, edges, _ = stats.histogram(wider)  # 14 values a bin; the last bin holds the last 8
    assert list(counts) == [14] * 28 + [8] and edges[-1] == 399.5


LIMITS = [
    *(np.iinfo(t) for t in (np.int8, np.int16, np.int32, np.int64)),
    *(np.iinfo(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64)),
    *(np.finfo(t) for t in (np.float16, np.float32, np.float64)),
]


@pytest.mark.parametrize("limits", LIMITS, ids=lambda info: str(info.dtype))
def test_every_numeric_type_at_its_limits_gives_a_histogram(limits):
    """64-bit PCM audio reaches int64's limits, np.log of zeros gives -inf: once a crash of the
    page (NaN edges, bins that do not increase), now counted apart and binned."""
    dtype = limits.dtype
    values = [limits.min, limits.max, 0, 1, limits.min // 2 if dtype.kind in "iu" else -1.5]
    floats = dtype.kind == "f"
    given = np.array(values + ([np.inf, -np.inf, np.nan, np.inf] if floats else []), dtype)
    # from a numpy array and a mask: pyarrow before 21 builds no float16 array from Python floats
    array = pa.array(np.append(given, given[:1]), mask=np.arange(len(given) + 1) == len(given))
    found = fed(stats.NumberStats(np.random.default_rng(0), integer=not floats), array, batch=3)
    assert (found.nulls, found.count) == (1, 5)
    if floats:
        assert (found.nans, found.infs, found.neg_infs) == (1, 2, 1)
    counts, edges, origin = stats.histogram(found)
    assert counts.sum() == 5 and np.all(np.isfinite(edges)) and np.all(np.diff(edges) > 0)
    assert edges[0] + origin <= float(limits.min) and edges[-1] + origin >= float(limits.max)


def test_a_small_range_of_huge_integers_is_binned_from_its_minimum():
    top = np.iinfo(np.uint64).max
    found = fed(
        stats.NumberStats(np.random.default_rng(0), True), pa.array([top - 3, top], pa.uint64())
    )
    counts, edges, origin = stats.histogram(found)
    assert origin == int(top) - 3 and edges[0] == -0.5 and counts.sum() == 2
