"""``recordmill.mix()`` at its edges, on two small datasets (10 and 6 rows) and an empty one:
each refusal as its whole line, the defaults a resumed job counts on (seed 0, epoch 0), rows
numbered across the sources, the source column kept or dropped, and what a state and a pickle
of a mixture hold."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import recordmill
from tests.conftest import make_plugin, refused

PLUGIN = """
    ROWS, FIRST = {rows}, {first}

    def task_number():
        return 1

    def schema():
        return {{"id": {{"type": "int64"}}}}

    def dict_data(task_id):
        for i in range(ROWS):
            yield {{"id": FIRST + i}}
"""


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixture-edges")
    made = {}
    for name, rows, first in [("a", 10, 0), ("b", 6, 100), ("empty", 0, 0)]:
        plugin = make_plugin(root / f"p{name}", PLUGIN.format(rows=rows, first=first))
        recordmill.write(plugin, root / name, progress=False)
        made[name] = str(root / name)
    return made


def ids(rows) -> list[int]:
    return [int(r["id"]) for r in rows]


def test_the_defaults_a_resumed_job_counts_on(paths):
    """No seed is seed 0, no epoch is epoch 0: a job that gave neither reads the same rows."""
    m = recordmill.mix([paths["a"], paths["b"]])
    assert m.order().tolist() == m.order(0).tolist()
    assert m.order(0).tolist() == recordmill.mix([paths["a"], paths["b"]], seed=0).order(0).tolist()
    assert m.order(0).tolist() != recordmill.mix([paths["a"], paths["b"]], seed=1).order(0).tolist()
    assert m.shuffled(seed=9).tolist() == m.order(0).tolist()  # the mixture's own seed
    assert ids(m.iter_rows()) == ids(m.rows(m.order(0)))
    assert m.order_blocks() == 0 and m.version is None and m.cache is None


def test_rows_are_numbered_across_the_sources(paths):
    m = recordmill.mix([paths["a"], paths["b"]])
    assert m.total_rows == 16 and m.offsets.tolist() == [0, 10, 16]
    assert [m[i]["id"] for i in (0, 9, 10, 15)] == [0, 9, 100, 105]
    assert m.take([15, 0, 10])["id"].to_pylist() == [105, 0, 100]
    for row in ([16], [-1], [3, 16]):
        assert refused(lambda row=row: m.rows(row), IndexError) == (
            "row numbers of a mixture are 0 to 15"
        )


def test_each_refusal_of_mix_is_one_whole_line(paths):
    a, empty = paths["a"], paths["empty"]
    for until in ("first", None):
        assert refused(lambda until=until: recordmill.mix([a], until=until)) == (
            "until must be one of first_exhausted, all_exhausted, "
            f"all_exhausted_without_replacement; got {until!r}"
        )
    for rows in (-1, True, "8"):
        assert refused(lambda rows=rows: recordmill.mix([a], rows=rows)) == (
            f"rows must be a whole number from 1 (rows per epoch), got {rows!r}"
        )
    line = (
        "source 'empty' has no rows, so it cannot start over as rows= or "
        "until='all_exhausted' would have it: give it weight 0, or leave it out"
    )
    sources = {"a": a, "empty": empty}
    assert refused(lambda: recordmill.mix(sources, [1, 1], rows=5)) == line
    assert refused(lambda: recordmill.mix(sources, [1, 1], until="all_exhausted")) == line
    # a source that never starts over may be empty; one of weight 0 is never drawn
    assert len(recordmill.mix(sources, [1, 1], until="all_exhausted_without_replacement")) == 10
    assert len(recordmill.mix(sources, [1, 0], rows=5)) == 5


def test_the_batches_refusals_are_whole_lines(paths):
    m = recordmill.mix([paths["a"], paths["b"]])
    for size in (0, 2.0):
        assert refused(lambda size=size: next(m.iter_batches(size))) == (
            f"batch_size must be a whole number from 1, got {size!r}"
        )
    assert [len(b["id"]) for b in m.iter_batches(1)][:3] == [1, 1, 1]
    for rank, world in ((2, 2), (-1, 3)):
        assert refused(lambda r=rank, w=world: next(m.iter_batches(4, rank=r, world_size=w))) == (
            f"rank must be in 0..{world - 1}, got {rank}"
        )
    assert refused(lambda: next(m.iter_batches(4, format="torch"))) == (
        "format must be 'numpy' or 'arrow', got 'torch'"
    )
    assert type(next(m.iter_batches(4, format="arrow"))).__name__ == "RecordBatch"
    many = recordmill.mix([paths["a"], paths["b"]], rows=1030)
    assert [len(b["id"]) for b in many.iter_batches()] == [1024, 6]  # batches of 1,024 by default
    whole = [b["id"].tolist() for b in m.iter_batches(3)]
    assert [b["id"].tolist() for b in m.iter_batches(3, rank=1, world_size=2)] == whole[1::2]
    assert [b["id"].tolist() for b in m.iter_batches()] == [[int(i) for i in ids(m.iter_rows())]]


def test_the_source_column_is_kept_only_where_asked_for(paths):
    m = recordmill.mix({"a": paths["a"], "b": paths["b"]}, source_column="source")
    assert m.schema.names == ["id", "source"]
    assert m.select(["id", "source"]).schema.names == ["id", "source"]
    assert m.select(["id"]).schema.names == ["id"]
    assert m[10] == {"id": 100, "source": "b"}


def test_what_a_mixture_says_of_itself_and_keeps(paths):
    m = recordmill.mix({"a": paths["a"], "b": paths["b"]}, [0.75, 0.25], shuffle=False)
    assert repr(m) == "<recordmill.Mixture of a, b: weights 0.75, 0.25>"
    assert m.state(0)["blocks"] == [0, 0]  # in the stored order: no order blocks
    m.order(0)
    assert pickle.loads(pickle.dumps(m))._order is None  # computed again where it is read
    resumed = recordmill.mix({"a": paths["a"], "b": paths["b"]}, [0.75, 0.25], shuffle=False)
    resumed.resume({**m.state(0), "blocks": [3, 4]}, 0, 5)
    assert resumed.blocks == [3, 4]  # the saved state's, not this mixture's own
    shuffled = recordmill.mix([paths["a"], paths["b"]])
    assert shuffled.state(0)["blocks"] == [ds.order_blocks() for ds in shuffled.datasets]
    assert np.array_equal(
        np.sort(shuffled.order(0)), np.sort(recordmill.mix([paths["a"], paths["b"]]).order(0))
    )


def test_a_saved_schedule_that_does_not_start_at_row_0_or_names_other_sources_is_refused(paths):
    m = recordmill.mix({"a": paths["a"], "b": paths["b"]}, [0.75, 0.25])
    state = m.state(0)
    for steps in ([[5, [0.75, 0.25]]], [[0, [0.5, 0.3, 0.2]]]):
        line = refused(lambda steps=steps: m.resume({**state, "steps": steps}, 0, 3))
        assert line == f"cannot resume: the saved state's weights are {steps!r}"


def test_an_epoch_resumed_goes_on_with_the_saved_weights_then_its_own():
    from recordmill.read.mixture import _continued

    saved = ((0, (1.0, 0.0)), (10, (0.0, 1.0)))
    half = ((0, (0.5, 0.5)),)
    assert _continued(saved, half, 10) == ((0, (1.0, 0.0)), (10, (0.5, 0.5)))  # at a step
    assert _continued(saved, half, 12) == ((0, (1.0, 0.0)), (10, (0.0, 1.0)), (12, (0.5, 0.5)))
    assert _continued(saved, half, 0) == ((0, (0.5, 0.5)),)  # from the start: its own
    assert _continued(saved, ((0, (0.0, 1.0)),), 10) == saved  # the same weights: one step
    assert _continued(saved[:1], saved[:1], 0) == saved[:1]
    later = ((0, (0.5, 0.5)), (20, (1.0, 0.0)))  # its own later steps follow
    assert _continued(saved, later, 12)[-1] == (20, (1.0, 0.0))
    at = ((0, (0.5, 0.5)), (10, (1.0, 0.0)))  # its own step where it resumes: once
    assert _continued(saved, at, 10) == ((0, (1.0, 0.0)), (10, (1.0, 0.0)))


def test_each_row_is_decoded_as_its_own_source_decodes_it(paths):
    a = recordmill.open(paths["a"], decode={"id": lambda v: -v - 1})
    m = recordmill.mix({"a": a, "b": paths["b"]}, [0.5, 0.5], shuffle=False)
    got = [int(v) for b in m.iter_batches(4, format="numpy") for v in b["id"]]
    plain = recordmill.mix({"a": paths["a"], "b": paths["b"]}, [0.5, 0.5], shuffle=False)
    stored = [int(v) for b in plain.iter_batches(4, format="numpy") for v in b["id"]]
    assert got == [v if v >= 100 else -v - 1 for v in stored]
    assert any(v < 0 for v in got) and any(v >= 100 for v in got)


def test_batches_asked_for_with_a_seed_alone_are_that_seeds_shuffle(paths):
    m = recordmill.mix([paths["a"], paths["b"]])
    seeded = recordmill.mix([paths["a"], paths["b"]], seed=5)
    got = [i for b in m.iter_batches(16, seed=5, format="arrow") for i in b["id"].to_pylist()]
    assert got == ids(seeded.rows(seeded.order(0))) != ids(m.rows(m.order(0)))
    same = [
        i for b in m.iter_batches(16, shuffle=True, format="arrow") for i in b["id"].to_pylist()
    ]
    assert same == ids(m.rows(m.order(0)))


def test_a_source_drawn_again_is_shuffled_anew_each_pass_and_once_an_epoch_otherwise(paths):
    from recordmill.read.mixture import _seed

    again = recordmill.mix([paths["a"], paths["b"]], [0.25, 0.75], until="all_exhausted", seed=3)
    drawn = [int(r["id"]) for r in again.rows(again.order(1)) if r["id"] >= 100]
    passes = [drawn[k : k + 6] for k in range(0, len(drawn) - len(drawn) % 6, 6)]
    assert len(passes) >= 2 and all(sorted(p) == list(range(100, 106)) for p in passes)
    b = recordmill.open(paths["b"])
    for p, rows in enumerate(passes):  # pass p of epoch 1: its own shuffle
        assert rows == [100 + i for i in b.shuffled(_seed(3, 1, 1), p)]
    once = recordmill.mix([paths["a"], paths["b"]], [0.5, 0.5], seed=3)  # first_exhausted
    drawn = [int(r["id"]) - 100 for r in once.rows(once.order(2)) if r["id"] >= 100]
    assert drawn == b.shuffled(_seed(3, 1), 2).tolist()[: len(drawn)]  # the epoch's own order
