"""Charts: matplotlib behind the show extra, PNGs that name no web address."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from recordmill.errors import RecordmillError
from recordmill.report import charts


def test_without_matplotlib_one_line_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    with pytest.raises(RecordmillError) as raised:
        charts.require()
    assert (
        str(raised.value) == charts.MISSING and "pip install 'recordmill[show]'" in charts.MISSING
    )


def test_charts_are_pngs_without_matplotlib_s_address():
    pytest.importorskip("matplotlib")
    made = [
        charts.histogram(np.array([1, 3, 2]), np.array([0.0, 1, 2, 3]), "x"),
        charts.labels(["a", "b"], [3, 4]),
        charts.labels([str(i) for i in range(100)], list(range(1, 101))),
        charts.partitions([10, 11, 9], [1000, 1200, 900]),
        charts.partitions(list(range(300)), list(range(300))),
    ]
    for png in made:
        assert png.startswith(b"\x89PNG")
        assert b"http" not in png and b"Software" not in png
        assert b"matplotlib" not in png.lower()  # tEXt chunks are plain: a search finds them
