"""read/skips.py: the on_error setting checked, and a read reject in one line."""

from __future__ import annotations

import dataclasses

import pytest

from recordmill.read import skips


def test_on_error_is_raise_or_skip_and_nothing_else():
    assert skips.ON_ERROR == ("raise", "skip")
    assert skips.skips("skip") is True and skips.skips("raise") is False
    for other in ("Skip", "ignore", None):
        with pytest.raises(ValueError) as refused:
            skips.skips(other)
        assert str(refused.value) == f"on_error must be one of raise, skip, got {other!r}"


def test_a_read_reject_says_where_and_why_in_one_line():
    reject = skips.ReadReject(row=7, column="image", error="ValueError: bad")
    assert str(reject) == "row 7 (image): ValueError: bad"
    assert (reject.version, reject.source, reject.rank, reject.worker) == (None, None, 0, None)
    named = dataclasses.replace(reject, source="web", column="transform")
    assert str(named) == "web row 7 (transform): ValueError: bad"
    with pytest.raises(dataclasses.FrozenInstanceError):
        reject.row = 8


def test_an_error_in_one_line_names_its_type_and_its_first_line_cut_to_300():
    assert skips.one_line(ValueError("first\nsecond")) == "ValueError: first"
    assert skips.one_line(KeyError()) == "KeyError"
    assert skips.one_line(OSError("  \n  ")) == "OSError"
    assert skips.one_line(RuntimeError("  padded  ")) == "RuntimeError: padded"
    assert skips.one_line(ValueError("x" * 400)) == "ValueError: " + "x" * 300
