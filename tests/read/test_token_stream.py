"""``recordmill.read.tokens`` at its edges, on a dataset of a few short documents: each refusal
as its whole line, the smallest block and the largest end-of-document id taken, the first of
several wrong lengths named, blocks read in runs apart, and a window of two shuffled."""

from __future__ import annotations

import numpy as np
import pytest

import recordmill
from recordmill.read import tokens
from tests.conftest import make_plugin, refused

# Six documents of 3 to 8 tokens; "length" is right but for rows 2 and 4.
PLUGIN = """
    import numpy as np

    def task_number():
        return 1

    def schema():
        return {"tokens": {"type": "uint16", "shape": [-1]}, "length": {"type": "int32"},
                "doc": {"type": "int64"}}

    def dict_data(task_id):
        for i in range(6):
            n = 3 + i
            told = n + 1 if i in (2, 4) else n
            yield {"tokens": np.arange(100 * i, 100 * i + n, dtype=np.uint16), "length": told,
                   "doc": i}
"""
DOCS = [np.arange(100 * i, 100 * i + 3 + i) for i in range(6)]


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    root = tmp_path_factory.mktemp("token-stream")
    recordmill.write(make_plugin(root / "p", PLUGIN), root / "ds", progress=False)
    return root / "ds"


def stream(path, block_size=4, eos=None, targets=True, lengths=None, column="tokens"):
    return tokens.TokenStream(recordmill.open(path), block_size, column, eos, targets, lengths)


def expected(block_size, eos=None, targets=True, order=range(6)):
    flat = np.concatenate([np.append(DOCS[i], [eos] * (eos is not None)) for i in order])
    width = block_size + targets
    count = (len(flat) - width) // block_size + 1
    return np.stack([flat[j * block_size : j * block_size + width] for j in range(count)])


@pytest.mark.parametrize("block_size", [0, -3, 2.0, True, "4"])
def test_a_block_size_that_is_not_a_whole_number_from_one_is_refused(path, block_size):
    assert refused(lambda: stream(path, block_size)) == (
        f"block_size must be a whole number from 1, got {block_size!r}"
    )


def test_the_smallest_block_and_the_end_ids_at_the_dtypes_bounds_are_taken(path):
    one = stream(path, 1).epoch(np.arange(6))
    assert np.array_equal(one.read(np.arange(one.blocks)), expected(1))
    for eos in (0, 65535):
        epoch = stream(path, 5, eos=eos).epoch(np.arange(6))
        assert np.array_equal(epoch.read(np.arange(epoch.blocks)), expected(5, eos))
    for eos in (-1, 65536, 3.0):
        assert refused(lambda eos=eos: stream(path, 5, eos=eos)) == (
            f"eos must be a token id that uint16 holds, got {eos!r}"
        )


def test_blocks_read_in_runs_apart_are_the_streams_blocks(path):
    """Runs of blocks that start in other documents than the first one read, with an end id
    after each document: where each run starts among the documents read is counted right."""
    for eos, targets in [(None, True), (7, True), (7, False)]:
        epoch = stream(path, 3, eos=eos, targets=targets).epoch(np.arange(6))
        whole = expected(3, eos, targets)
        for wanted in ([0, 5, 6, 9], [2, 8], [len(whole) - 1], [1, 3, 4, len(whole) - 2]):
            assert np.array_equal(epoch.read(np.array(wanted)), whole[wanted]), (eos, wanted)
        empty = epoch.read(np.array([], np.int64))
        assert empty.shape == (0, 3 + targets) and empty.dtype == np.uint16


def test_a_stream_shorter_than_a_block_is_refused_in_one_line(path):
    assert refused(lambda: stream(path, 4).epoch(np.array([], np.int64))) == (
        "the column 'tokens' holds 0 tokens; expected at least a block of 5 (block_size 4 + 1 "
        "target)"
    )
    assert refused(lambda: stream(path, 40, targets=False).epoch(np.arange(6))) == (
        "the column 'tokens' holds 33 tokens; expected at least a block of 40 (block_size 40)"
    )


def test_the_first_document_whose_length_column_disagrees_is_named(path):
    """Rows 2 and 4 say a token more than they hold: row 2 is named, read by any lengths=
    that picks the "length" column (by name, or found by "auto")."""
    line = (
        "row 2: the length column 'length' says 6 tokens, but 'tokens' holds 5; give "
        "lengths=None to count them from 'tokens'"
    )
    for lengths in ("length", "auto"):
        epoch = stream(path, 2, lengths=lengths).epoch(np.arange(6))
        assert refused(lambda e=epoch: e.read(np.arange(e.blocks))) == line
    counted = stream(path, 2, lengths=None).epoch(np.arange(6))
    assert np.array_equal(counted.read(np.arange(counted.blocks)), expected(2))


def test_the_columns_a_stream_is_refused_for(path):
    assert refused(lambda: stream(path, column="ids")) == (
        "the dataset has no column 'ids'; expected a column of token ids among tokens, length, "
        "doc (column=)"
    )
    assert refused(lambda: stream(path, column="doc")) == (
        "column 'doc' is int64; expected token ids, a list of integers (shape [-1]) a row"
    )
    for lengths in ("nope", "tokens"):
        assert refused(lambda lengths=lengths: stream(path, lengths=lengths)) == (
            f"lengths={lengths!r}: expected an integer column of the dataset"
        )


@pytest.mark.parametrize("window", [-1, 2.0, None])
def test_a_shuffle_window_that_is_not_a_count_of_blocks_is_refused(path, window):
    assert refused(
        lambda: recordmill.open(path).token_blocks(2, lengths=None, shuffle_window=window)
    ) == (f"shuffle_window must be a whole number of blocks from 0, got {window!r}")


def test_a_window_of_two_blocks_swaps_some_pairs_and_moves_no_block_further(path):
    ds = recordmill.open(path)
    plain = [b.tolist() for b in ds.token_blocks(2, shuffle=False, lengths=None)]
    for window in (0, 1):
        assert [
            b.tolist()
            for b in ds.token_blocks(2, shuffle=False, lengths=None, shuffle_window=window)
        ] == (plain)
    paired = [b.tolist() for b in ds.token_blocks(2, shuffle=False, lengths=None, shuffle_window=2)]
    assert paired != plain
    for lo in range(0, len(plain), 2):
        assert sorted(paired[lo : lo + 2]) == sorted(plain[lo : lo + 2])
