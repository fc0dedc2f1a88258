"""read/states.py: each refusal of a saved loader state, its whole line, and the states it lets
through (states saved before a field existed), without torch."""

from __future__ import annotations

import pytest

from recordmill.read import states

MINE = {"version": 2, "data": "abc", "seed": 1, "shuffle": True, "rows": 10}


def refused(state, mine=MINE, where="ds") -> str:
    with pytest.raises(ValueError) as caught:
        states.check_identity(state, mine, where)
    return str(caught.value)


def test_a_state_that_is_no_dict_names_its_type():
    with pytest.raises(ValueError) as caught:
        states.mapping([("epoch", 0)])
    assert (
        str(caught.value)
        == "cannot resume: a state is the dict loader.state_dict() gives, got list"
    )
    assert states.mapping(MINE) is MINE


def test_whole_numbers_in_range_and_the_line_for_others():
    assert states.whole({"a": 3}, "a", 0, 5) == 3 and states.whole({}, "a", 0, None, default=7) == 7
    for value in (-1, 6, True, 1.0, "2"):
        with pytest.raises(ValueError) as caught:
            states.whole({"a": value}, "a", 0, 5)
        assert str(caught.value) == (
            f"cannot resume: the saved state has a={value!r}; expected a whole number from 0 to 5"
        )
    with pytest.raises(ValueError) as caught:
        states.whole({"a": -1}, "a", 0, None)
    assert (
        str(caught.value)
        == "cannot resume: the saved state has a=-1; expected a whole number from 0"
    )
    assert states.whole({"a": 10**12}, "a", 0, None) == 10**12


def test_a_mixtures_state_and_one_datasets_are_told_apart_both_ways():
    mixture = {**MINE, "mixture": {}}
    assert (
        refused(mixture)
        == "cannot resume: the saved state is of a mixture, this loader reads one dataset"
    )
    assert (
        refused(MINE, mixture)
        == "cannot resume: the saved state is of one dataset, this loader reads a mixture"
    )
    assert refused({**mixture, "mixture": 5}, mixture).startswith(
        "cannot resume: the saved state's mixture is 5;"
    )


def test_another_version_is_refused_and_a_state_without_one_resumes():
    assert refused({**MINE, "version": 1}) == (
        "cannot resume: the saved state is of version 1 of the dataset, this one reads version 2; "
        "open version=1 to resume it"
    )
    states.check_identity({k: v for k, v in MINE.items() if k != "version"}, MINE, "ds")
    states.check_identity({**MINE, "version": 1}, {**MINE, "version": None}, "ds")  # (no versions)


def test_other_rows_are_refused_and_a_state_without_data_resumes():
    assert refused({**MINE, "data": "xyz"}) == (
        "cannot resume: the saved state is of other rows than version 2 of ds holds (data 'xyz', "
        "this one abc): the dataset was replaced since the state was saved; start a new epoch "
        "instead"
    )
    states.check_identity({k: v for k, v in MINE.items() if k != "data"}, MINE, "ds")


@pytest.mark.parametrize(
    ("key", "value"), [("seed", 2), ("shuffle", False), ("shuffle", 1), ("rows", 11)]
)
def test_each_setting_changed_alone_is_refused(key, value):
    assert refused({**MINE, key: value}) == (
        f"cannot resume: the saved state has {key}={value!r}, this one {MINE[key]!r}; resume with "
        "the dataset and settings the state was saved with"
    )


def test_a_mixtures_rows_may_change_with_its_weights():
    mixture = {**MINE, "mixture": {}}
    states.check_identity({**mixture, "rows": 99}, mixture, "ds")
