"""The reading options: what cache_limit takes, checked at open, and the options a dataset is
opened again with in another process."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import recordmill
from recordmill.read.options import cache_limit_bytes
from tests.read.test_cache import local_parquet


@pytest.mark.parametrize(
    "given,expected",
    [
        (123, 123),
        (0, 0),
        ("50GB", 50 * 10**9),
        ("50 gb", 50 * 10**9),
        ("1.5TiB", int(1.5 * 2**40)),
        ("200MiB", 200 << 20),
        ("4096", 4096),
        ("10kB", 10_000),
        (0.25, 250),
        (1.0, 1000),
        (None, 500),  # half the free space by default
        ("0.3", 300),  # a fraction as a CLI or a YAML file gives it
        (np.int64(4096), 4096),
        ("1.5GB", 1_500_000_000),  # a fraction of a unit
        ("2T", 2 * 10**12),
        ("3 tib", 3 * 2**40),
        ("7b", 7),
        ("1k", 1000),
        ("1.0", 1000),  # a whole fraction: all of the free space
    ],
)
def test_cache_limit_takes_what_users_write(given, expected):
    assert cache_limit_bytes(given, free=1000) == expected


@pytest.mark.parametrize("bad", [-1, 1.5, 0.0, "fifty", "50 XB", True, [1], "1.5"])
def test_a_cache_limit_that_is_no_size_is_refused_at_open_in_one_line(tmp_path, bad):
    local_parquet(tmp_path)
    with pytest.raises(ValueError, match=r"^cache_limit must be bytes .*got ") as caught:
        recordmill.open(tmp_path / "pq", cache_limit=bad)
    assert "\n" not in str(caught.value)


def test_a_size_or_a_fraction_bounds_the_disk_cache(tmp_path):
    local_parquet(tmp_path)
    ds = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c", cache_limit="2MB")
    assert ds.cache.limit == 2_000_000 and ds.cache.chosen
    free = ds.cache.folder.parts.free()
    half = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c", cache_limit=0.5)
    assert abs(half.cache.limit - free // 2) <= free // 100  # the disk's free space moves
    # A dataset pickled into another process opens with the same options, the limit as given.
    again = pickle.loads(pickle.dumps(ds))
    assert again.cache.limit == 2_000_000 and again.cache.root == ds.cache.root


def test_the_documented_defaults():
    """docs: 256 MB of decoded row groups kept, 64 MB read ahead, checksums on, errors raised."""
    from recordmill.read.options import ReadOptions

    options = ReadOptions()
    assert (options.cache_bytes, options.read_ahead_bytes) == (256 << 20, 64 << 20)
    assert options.checksums is True and options.on_error == "raise"
    assert options.given() == {
        "filesystem": None, "cache_bytes": 256 << 20, "read_ahead_bytes": 64 << 20,
        "checksums": True, "cache_dir": None, "cache_limit": None, "version": None,
        "on_error": "raise",
    }  # fmt: skip


def test_the_refusal_of_a_cache_limit_is_its_whole_line():
    with pytest.raises(ValueError) as caught:
        cache_limit_bytes("fifty", free=1000)
    assert str(caught.value) == (
        "cache_limit must be bytes (an int), a size such as '50GB' or '1.5TiB', or a fraction of "
        "the disk's free space from 0 to 1 (a float), got 'fifty'"
    )
