"""Code that works in steps, crossed: each step size made small enough (and not dividing the
work) that a test input spans several steps, so the rounding and the joins between steps run.
Each result is compared with the same work done in one step, or with numpy.

- a mixture's plan draws rows ``mixing._CHUNK`` at a time while looking for where a source runs
  out;
- a gather joins a column's chunks up to ``gather.JOIN_BYTES`` and looks rows up in one table up
  to ``gather.LOOKUP_BYTES``;
- a shuffled pass of memory-mapped Arrow gathers ``passes.MAPPED_WINDOW_BYTES`` at a time;
- token blocks are read ``tokens.READ_TOKENS`` at a time, in whole batches.
"""

from __future__ import annotations

import numpy as np
import pytest

import recordmill
from recordmill.read import gather, mixing, passes, tokens
from tests.conftest import each_format, make_plugin

PLUGIN = """
    import numpy as np

    def task_number():
        return 3

    def schema():
        return {
            "i": {"type": "int64"},
            "name": {"type": "string"},
            "v": {"type": "int32", "shape": [-1]},
            "blob": {"type": "bytes"},
        }

    def dict_data(task_id):
        for i in range(233):
            n = task_id * 233 + i
            blob = n.to_bytes(2, "little") * (512 + n % 7)  # 1 KB and more: gathered by place
            yield {"i": n, "name": "x" * (n % 17), "v": np.full(n % 5 + 1, n, np.int32), "blob": blob}
"""


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    return each_format(tmp_path_factory.mktemp("steps"), PLUGIN, partitions=3, row_group_size=50)


@pytest.mark.parametrize(
    "until", ["first_exhausted", "all_exhausted", "all_exhausted_without_replacement"]
)
@pytest.mark.parametrize("chunk", [7, 64])
def test_a_mixtures_plan_drawn_in_small_chunks_is_the_plan_drawn_at_once(
    paths, monkeypatch, until, chunk
):
    def plan():
        m = recordmill.mix(
            [str(paths["arrow"]), str(paths["parquet"])], [0.7, 0.3], seed=3, until=until
        )
        return [m.order(epoch).tolist() for epoch in range(2)]

    at_once = plan()
    monkeypatch.setattr(mixing, "_CHUNK", chunk)
    assert plan() == at_once


@pytest.mark.parametrize("fmt", ["arrow", "parquet"])
@pytest.mark.parametrize(("join", "lookup"), [(1, 1), (300, 50), (4099, 24 * 37), (4099, 24 * 699)])
def test_a_gather_in_small_joins_and_lookups_gives_the_rows_asked_for(
    paths, monkeypatch, fmt, join, lookup
):
    ds = recordmill.open(paths[fmt])
    ids = np.random.default_rng(1).permutation(len(ds))[:400]
    expected = [ds[int(i)] for i in ids]
    monkeypatch.setattr(gather, "JOIN_BYTES", join)
    monkeypatch.setattr(gather, "LOOKUP_BYTES", lookup)
    got = recordmill.open(paths[fmt]).take(ids).to_pylist()
    assert [r["i"] for r in got] == [r["i"] for r in expected]
    assert [r["name"] for r in got] == [r["name"] for r in expected]
    assert [list(r["v"]) for r in got] == [list(r["v"]) for r in expected]
    assert [r["blob"] for r in got] == [r["blob"] for r in expected]
    shuffled = recordmill.open(paths[fmt]).iter_batches(64, shuffle=True, seed=2, format="numpy")
    for batch in shuffled:  # a binary column's values made straight from their places
        assert batch["blob"] == [_blob(i) for i in batch["i"].tolist()]


def _blob(n: int) -> bytes:
    return n.to_bytes(2, "little") * (512 + n % 7)


@pytest.mark.parametrize("window", [1, 997, 5000])
def test_a_shuffled_pass_in_small_windows_is_the_same_epoch(paths, monkeypatch, window):
    def epoch():
        ds = recordmill.open(paths["arrow"])
        batches = ds.iter_batches(32, shuffle=True, seed=4, format="arrow")
        return [i for batch in batches for i in batch.column("i").to_pylist()]

    whole = epoch()
    monkeypatch.setattr(passes, "MAPPED_WINDOW_BYTES", window)
    small = epoch()
    assert small == whole and sorted(small) == list(range(699))


TOKENS = """
    import numpy as np

    def task_number():
        return 2

    def schema():
        return {"tokens": {"type": "uint16", "shape": [-1]}}

    def dict_data(task_id):
        for i in range(41):
            n = task_id * 41 + i
            yield {"tokens": np.arange(n, n + n % 23 + 1, dtype=np.uint16)}
"""


@pytest.mark.parametrize("read_tokens", [1, 50, 333])
@pytest.mark.parametrize(("batch_size", "window"), [(None, 0), (3, 0), (7, 5)])
def test_token_blocks_read_in_small_steps_are_the_blocks_read_at_once(
    tmp_path, monkeypatch, read_tokens, batch_size, window
):
    path = tmp_path / "tokens"
    recordmill.write(make_plugin(tmp_path / "p", TOKENS), path, progress=False)

    def blocks():
        ds = recordmill.open(path)
        got = ds.token_blocks(
            9, seed=2, epoch=1, eos=0, batch_size=batch_size, shuffle_window=window
        )
        return [np.atleast_2d(b).tolist() for b in got]

    at_once = blocks()
    monkeypatch.setattr(tokens, "READ_TOKENS", read_tokens)
    assert blocks() == at_once and sum(map(len, at_once)) > 20


def test_by_default_small_columns_are_joined_once_and_large_ones_placed_once(paths, monkeypatch):
    """The savings the step sizes bound, asserted: at the defaults, a small dataset's columns of
    small values are one array each, and every row's place in a large one is worked out once."""
    calls = []
    bounds = gather.Values._bounds
    monkeypatch.setattr(
        gather.Values,
        "_bounds",
        lambda self, index: calls.append(len(index)) or bounds(self, index),
    )
    ds = recordmill.open(paths["arrow"])
    monkeypatch.setattr(passes, "MAPPED_WINDOW_BYTES", 64 * ds._row_bytes())  # 11 gathers
    assert sum(len(b["i"]) for b in ds.iter_batches(64, shuffle=True, seed=2)) == 699
    assert calls == [699]  # all at once, then only looked up at each of the 11 gathers
    kinds = [type(column).__name__ for column in ds._gatherer._whole.columns]
    assert kinds == ["Int64Array", "StringArray", "ListArray", "Values"]


@pytest.mark.parametrize("fmt", ["arrow", "parquet"])
def test_a_gather_of_one_row_gives_that_row(paths, fmt):
    ds = recordmill.open(paths[fmt])
    i, name, v, blob = ds._gatherer.values(np.array([5]), keep=False)
    assert i.to_pylist() == [5] and name.to_pylist() == ["x" * 5] and blob == [_blob(5)]
    assert v.to_pylist() == [[5]]  # n % 5 + 1 values of n
    assert [len(c) for c in ds._gatherer.values(np.array([], np.int64), keep=False)] == [0] * 4
