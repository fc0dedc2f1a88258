"""Batches default_collate made, cut and joined along their rows: the same as collating the rows
of each piece, for every layout default_collate knows."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch==2.13.0)")
from torch.utils.data import default_collate  # noqa: E402

from recordmill.read import collated  # noqa: E402

Pair = namedtuple("Pair", "a b")


def samples(kind: str, n: int = 7) -> list:
    made = {
        "tensor": lambda i: torch.full((2, 3), float(i)),
        "numpy": lambda i: np.full(4, i, np.int16),
        "number": lambda i: i * 1.5,
        "string": lambda i: f"row {i}",
        "dict": lambda i: {"x": torch.tensor([i]), "name": f"n{i}", "nested": {"y": i}},
        "tuple": lambda i: (torch.tensor(i), f"s{i}", [i, i + 1]),
        "namedtuple": lambda i: Pair(np.float32(i), str(i)),
    }[kind]
    return [made(i) for i in range(n)]


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return a == b


KINDS = ["tensor", "numpy", "number", "string", "dict", "tuple", "namedtuple"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_cut_and_a_join_are_the_collate_of_those_rows(kind):
    rows = samples(kind)
    batch, shape = collated.collate(rows)
    assert shape is not None and same(batch, default_collate(rows))
    for lo, hi in [(0, 3), (3, 7), (2, 2), (6, 7)]:
        if hi > lo:
            assert same(collated.cut(batch, shape, lo, hi), default_collate(rows[lo:hi]))
    parts = [
        collated.cut(batch, shape, 0, 2),
        collated.cut(batch, shape, 2, 5),
        collated.cut(batch, shape, 5, 7),
    ]
    assert same(collated.join(parts, shape), batch)


def test_samples_default_collate_does_not_know_cross_uncollated():
    rows = [b"bytes", b"more"]
    assert collated.collate(rows) == (rows, None)
    assert collated.layout({"x": object()}) is None
