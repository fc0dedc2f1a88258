"""The draw of a mixture's sources: the documented formula, the proportions over every window,
and where each way of ending an epoch ends it."""

from __future__ import annotations

import numpy as np
import pytest

from recordmill.read import mixing

GOLDEN = (5**0.5 - 1) / 2


def reference(weights, u: int, count: int) -> list[int]:
    """The module docstring's formula in Python integers: row t's x is (u + t * g) mod 1 as a
    fraction of 2**64; its source is the one whose slice of the normalised weights holds it."""
    step = 11400714819323198485  # floor(g * 2**64)
    assert abs(step / 2**64 - GOLDEN) < 1e-15
    total = sum(weights)
    ends, acc = [], 0.0
    for w in weights[:-1]:
        acc += w
        ends.append(min(int(acc / total * 2.0**64), 2**64 - 1))
    out = []
    for t in range(count):
        x = (u + t * step) % 2**64
        out.append(sum(1 for e in ends if e <= x))
    return out


@pytest.mark.parametrize("weights", [[0.6, 0.3, 0.1], [1, 1], [5, 0, 2, 3], [0.001, 0.999]])
def test_the_draw_is_the_documented_formula(weights):
    u = mixing.phase(3, 1, 0)
    got = mixing.draws(mixing.thresholds(weights), u, 0, 3000)
    assert got.tolist() == reference(weights, int(u), 3000)
    later = mixing.draws(mixing.thresholds(weights), u, 1000, 500)  # from the middle
    assert later.tolist() == got[1000:1500].tolist()


def test_a_zero_weight_source_is_never_drawn():
    got = mixing.draws(mixing.thresholds([1, 0, 1]), mixing.phase(0, 0, 0), 0, 10_000)
    assert 1 not in set(got.tolist()) and set(got.tolist()) == {0, 2}


def test_shares_within_one_percent_and_every_window_within_the_tolerance():
    weights = [0.6, 0.3, 0.1]
    plan = mixing.plan_epoch([10**6] * 3, [(0, weights)], seed=11, epoch=0, rows=100_000)
    counts = np.bincount(plan.source, minlength=3)
    assert np.all(np.abs(counts / 100_000 - weights) < 0.01 * np.array(weights))
    for i, w in enumerate(weights):
        cum = np.concatenate([[0], np.cumsum(plan.source == i)])
        for n in (10, 100, 1000, 10_000):
            window = cum[n:] - cum[:-n]
            assert np.abs(window - w * n).max() <= mixing.WINDOW_TOLERANCE, (i, n)


def test_random_weights_stay_within_the_tolerance():
    rng = np.random.default_rng(5)
    for trial in range(10):
        weights = rng.dirichlet(np.ones(rng.integers(2, 7)) * 0.5)
        src = mixing.draws(mixing.thresholds(weights), mixing.phase(trial, 0, 0), 0, 100_000)
        for i, w in enumerate(weights):
            cum = np.concatenate([[0], np.cumsum(src == i)])
            for n in (100, 1000, 100_000):
                assert np.abs(cum[n:] - cum[:-n] - w * n).max() <= mixing.WINDOW_TOLERANCE


def test_first_exhausted_ends_at_the_first_draw_of_a_source_with_nothing_left():
    sizes = [1000, 500, 100]
    plan = mixing.plan_epoch(sizes, [(0, [0.6, 0.3, 0.1])], seed=2, epoch=0)
    counts = np.bincount(plan.source, minlength=3)
    assert np.all(counts <= sizes) and counts[2] == 100  # the small one ran out first
    # The next draw would have been source 2's 101st row.
    after = mixing.draws(mixing.thresholds([0.6, 0.3, 0.1]), mixing.phase(2, 0, 0), len(plan), 1)
    assert after[0] == 2
    assert plan.nth.tolist() == _nth(plan.source)


def test_all_exhausted_without_replacement_gives_every_row_once():
    sizes = [1000, 500, 100]
    plan = mixing.plan_epoch(
        sizes, [(0, [0.1, 0.1, 0.8])], 2, 0, "all_exhausted_without_replacement"
    )
    assert np.bincount(plan.source).tolist() == sizes and len(plan) == 1600
    assert plan.nth.max() == 999
    # While all three are left, the shares follow the weights.
    first = plan.source[:100]
    assert abs(int(np.sum(first == 2)) - 80) <= mixing.WINDOW_TOLERANCE


def test_all_exhausted_repeats_the_sources_that_ran_out_until_each_was_read_whole():
    sizes = [1000, 500, 100]
    plan = mixing.plan_epoch(sizes, [(0, [0.6, 0.3, 0.1])], 2, 0, "all_exhausted")
    counts = np.bincount(plan.source)
    assert np.all(counts >= sizes)
    last = plan.source[-1]  # the epoch ends on the last row of the last source read whole
    assert counts[last] == sizes[last] and plan.nth[-1] == sizes[last] - 1
    assert plan.nth[plan.source == 2].max() >= 100  # source 2 went round again


def test_rows_per_epoch_with_every_source_repeating():
    plan = mixing.plan_epoch([10, 20, 30], [(0, [1, 1, 1])], 0, 0, rows=3000)
    assert len(plan) == 3000
    assert np.abs(np.bincount(plan.source) - 1000).max() <= mixing.WINDOW_TOLERANCE
    assert plan.nth[plan.source == 0].max() > 10  # source 0 (10 rows) went round 100 times


def test_a_schedule_changes_the_shares_at_its_step():
    steps = [(0, [0.9, 0.1]), (5000, [0.1, 0.9])]
    plan = mixing.plan_epoch([10**5, 10**5], steps, 0, 0, rows=10_000)
    assert abs(int(np.sum(plan.source[:5000] == 0)) - 4500) <= mixing.WINDOW_TOLERANCE
    assert abs(int(np.sum(plan.source[5000:] == 0)) - 500) <= mixing.WINDOW_TOLERANCE


def test_each_step_of_a_schedule_draws_its_own_rows_from_its_own_phase():
    """Three steps (a job resumed twice with new weights): each draws the rows from its start to
    the next step's, with its weights, from the phase of its first row counted from 0."""
    steps = [(0, [1, 0]), (10, [0, 1]), (20, [1, 0])]
    plan = mixing.plan_epoch([100, 100], steps, 4, 1, rows=30)
    assert plan.source.tolist() == [0] * 10 + [1] * 10 + [0] * 10
    halves = [(0, [0.5, 0.5]), (7, [0.3, 0.7])]
    plan = mixing.plan_epoch([100, 100], halves, 4, 1, rows=20)
    for start, stop, weights in ((0, 7, [0.5, 0.5]), (7, 20, [0.3, 0.7])):
        bounds, u = mixing.thresholds(weights), mixing.phase(4, 1, start)
        assert plan.source[start:stop].tolist() == mixing.draws(bounds, u, 0, stop - start).tolist()


def test_all_exhausted_ends_without_the_sources_of_no_weight():
    """A source of weight 0 is never drawn, so it is not waited for: the epoch ends once the
    weighted ones were each drawn whole."""
    plan = mixing.plan_epoch([5, 8, 5], [(0, [1, 1, 0])], 0, 0, until="all_exhausted")
    counts = np.bincount(plan.source, minlength=3)
    assert counts[0] >= 5 and counts[1] >= 8 and counts[2] == 0


def test_an_epoch_ends_where_every_weighted_source_ran_out_whatever_its_later_steps_weigh():
    """Without ``until``, a source that runs out leaves; once every weighted one did, the epoch
    ends there, though a later step (never reached) would weigh the others."""
    plan = mixing.plan_epoch([3, 3], [(0, [1, 0]), (100, [0, 1])], 0, 0, until=None)
    assert plan.source.tolist() == [0, 0, 0]


def test_a_source_with_no_rows_left_is_whole_at_once():
    assert mixing._whole_at(np.array([2, 5]), 0) == 0
    assert mixing._whole_at(np.array([2, 5]), 2) == 6
    assert mixing._whole_at(np.array([2, 5]), 3) is None


def test_an_epoch_of_no_rows_draws_none():
    plan = mixing.plan_epoch([10, 10], [(0, [1, 1])], 0, 0, rows=0)
    assert len(plan) == 0 and plan.source.dtype == np.int32


def test_the_plan_depends_on_seed_and_epoch_only():
    args = ([100, 200], [(0, [0.5, 0.5])])
    same = mixing.plan_epoch(*args, 1, 0).source, mixing.plan_epoch(*args, 1, 0).source
    assert same[0].tolist() == same[1].tolist()
    assert mixing.plan_epoch(*args, 1, 1).source.tolist() != same[0].tolist()
    assert mixing.plan_epoch(*args, 2, 0).source.tolist() != same[0].tolist()


def _nth(source) -> list[int]:
    seen: dict[int, int] = {}
    out = []
    for s in source.tolist():
        out.append(seen.get(s, 0))
        seen[s] = out[-1] + 1
    return out


def test_the_step_is_the_golden_ratio_s_fraction_of_2_to_the_64():
    """The plans every saved state resumes on depend on it: held to its definition."""
    from decimal import Decimal, getcontext

    getcontext().prec = 50
    fraction = (Decimal(5).sqrt() - 1) / 2  # the golden ratio's fractional part
    assert int(mixing._STEP) == int(fraction * 2**64)


def test_the_ends_of_an_epoch_are_named_as_hugging_face_names_them():
    assert mixing.UNTIL == ("first_exhausted", "all_exhausted", "all_exhausted_without_replacement")
