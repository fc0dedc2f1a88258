"""read/mix_arguments.py: the sources' names, and weights as a schedule of normalised steps."""

from __future__ import annotations

import pytest

from recordmill.read.mix_arguments import named, schedule

NAMES = ["web", "code"]


def test_sources_are_named_by_their_keys_or_their_folders():
    assert named({"a": "/x/1", 2: "/x/2"}) == (["a", "2"], ["/x/1", "/x/2"])
    assert named(["/data/web/", "/data/code"]) == (NAMES, ["/data/web/", "/data/code"])
    assert named(["/", "s3://b/web//"])[0] == ["0", "web"]  # a root has no name: its place
    assert named(["/d/MIX/", "/d/a.X"])[0] == ["MIX", "a.X"]  # only slashes are trimmed
    with pytest.raises(TypeError) as e:
        named("/data/web")
    assert str(e.value) == "give mix() a list (or dict) of sources, not one"


def test_weights_are_normalised_whatever_they_sum_to():
    assert schedule([7, 3], NAMES, [1, 1]) == ((0, (0.7, 0.3)),)
    assert schedule([0.7, 0.3], NAMES, [1, 1]) == ((0, (0.7, 0.3)),)
    assert schedule(None, NAMES, [10, 30]) == ((0, (0.25, 0.75)),)  # as the sources' sizes
    assert schedule({"code": 2}, NAMES, [1, 1]) == ((0, (0.0, 1.0)),)  # a source left out: 0


def test_a_schedule_steps_at_rows_that_increase_from_0():
    steps = schedule([(0, [1, 1]), (1, [1, 3]), (5, [0, 1])], NAMES, [1, 1])
    assert steps == ((0, (0.5, 0.5)), (1, (0.25, 0.75)), (5, (0.0, 1.0)))
    for starts in [(0, 0), (0, 5, 3)]:
        pairs = [(s, [1, 1]) for s in starts]
        with pytest.raises(ValueError) as e:
            schedule(pairs, NAMES, [1, 1])
        assert str(e.value) == (
            f"a weight schedule's rows start at 0 and increase, got {list(starts)}"
        )
    with pytest.raises(ValueError, match=r"^a weight schedule starts at row 0, got 3$"):
        schedule([(3, [1, 1])], NAMES, [1, 1])


@pytest.mark.parametrize(
    "weights, said",
    [
        ([1, 2, 3], "weights has 3 numbers for 2 sources (['web', 'code'])"),
        ([0, 0], "weights must be finite, at least 0 and not all 0; got [0.0, 0.0]"),
        ([1, -1], "weights must be finite, at least 0 and not all 0; got [1.0, -1.0]"),
        ([1, float("inf")], "weights must be finite, at least 0 and not all 0; got [1.0, inf]"),
        ({"web": 1, "books": 1}, "weights names no source 'books'; sources: ['web', 'code']"),
    ],
)
def test_weights_that_say_no_mixture_are_refused_in_one_line(weights, said):
    with pytest.raises(ValueError) as e:
        schedule(weights, NAMES, [1, 1])
    assert str(e.value) == said
