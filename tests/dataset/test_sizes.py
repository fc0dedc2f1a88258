"""dataset/sizes.py: sizes and counts as every message and page shows them, at each boundary."""

from __future__ import annotations

import pytest

from recordmill.dataset.sizes import human_count, human_size


@pytest.mark.parametrize(
    ("nbytes", "shown"),
    [
        (0, "0 bytes"), (5, "5 bytes"), (999, "999 bytes"), (1000, "1.0 KB"), (48_100, "48.1 KB"),
        (999_949, "999.9 KB"), (1_000_000, "1.0 MB"), (591_700_000, "591.7 MB"), (2e9, "2.0 GB"),
        (3e12, "3.0 TB"), (4.5e15, "4,500.0 TB"),
    ],
)  # fmt: skip
def test_human_size(nbytes, shown):
    assert human_size(nbytes) == shown


@pytest.mark.parametrize(
    ("n", "shown"),
    [
        (0, "0"), (12, "12"), (999, "999"), (1000, "1.0 k"), (812_500, "812.5 k"),
        (1_000_000, "1.0 M"), (3_400_000, "3.4 M"), (1e9, "1.0 G"), (2.5e12, "2,500.0 G"),
        (1234.4, "1.2 k"), (12.6, "13"),
    ],
)  # fmt: skip
def test_human_count(n, shown):
    assert human_count(n) == shown
