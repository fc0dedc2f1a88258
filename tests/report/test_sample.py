"""Which rows the page shows, and how their values read."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from recordmill.report import sample


def test_spread_takes_one_row_of_each_stretch_seeded():
    rows = sample.spread(1000, 10, np.random.default_rng(3))
    assert [r // 100 for r in rows] == list(range(10))
    assert list(rows) == list(sample.spread(1000, 10, np.random.default_rng(3)))
    assert list(rows) != list(sample.spread(1000, 10, np.random.default_rng(4)))
    assert list(sample.spread(4, 10, np.random.default_rng(3))) == [0, 1, 2, 3]


def labelled(sampler, labels, batch=5):
    for lo in range(0, len(labels), batch):
        sampler.add(pa.array(labels[lo : lo + batch]), lo)
    return sampler.rows()


def test_each_class_keeps_k_of_its_rows_at_random_whatever_the_batches():
    labels = ["a"] * 30 + ["b"] * 2 + [None] * 3 + ["c"] * 12
    kept = labelled(sample.ClassSampler(4, np.random.default_rng(0)), labels)
    assert {k: len(v) for k, v in kept.items()} == {"a": 4, "b": 2, "c": 4}
    for value, rows in kept.items():
        assert all(labels[r] == value for r in rows) and rows == sorted(rows)
    again = labelled(sample.ClassSampler(4, np.random.default_rng(0)), labels)
    other = labelled(sample.ClassSampler(4, np.random.default_rng(1)), labels)
    assert again == kept != other
    # Every row of a class as likely to be kept: over many seeds, early and late rows alike.
    firsts = [
        np.mean(labelled(sample.ClassSampler(4, np.random.default_rng(s)), labels)["a"])
        for s in range(200)
    ]
    assert abs(np.mean(firsts) - 14.5) < 1.5


def test_per_class_shows_the_same_number_of_each_class():
    kept = {0: [1, 2, 3, 4], 1: [10, 11], 2: [20, 21, 22]}
    assert sample.per_class(kept, 6) == [1, 2, 10, 11, 20, 21]
    assert sample.per_class(kept, 2) == [1, 10]  # classes spread over their order
    assert sample.per_class({}, 5) == [] and sample.per_class(kept, 0) == []


def test_values_as_text():
    assert sample.text(b"\x00\x01" * 10) == "20 bytes: 00 01 00 01 00 01 …"
    assert sample.text(np.zeros((3, 28, 28), np.uint8)) == "uint8 array [3, 28, 28]"
    assert sample.text(np.array([0.5, 1 / 3], np.float32)) == "[0.5, 0.3333]"
    assert sample.text("x" * 100).endswith("…") and len(sample.text("x" * 100)) == 80
