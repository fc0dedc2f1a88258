"""read/formats.py: a batch cut into the batches a reader asks for, as Arrow or numpy columns,
its values decoded, and with skips the rows that do not decode left out and listed."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from recordmill.read import formats

BATCH = pa.record_batch({"id": pa.array(range(7)), "text": pa.array(list("abcdefg"))})


def upper(value: str) -> str:
    if value in ("c", "f"):
        raise ValueError(f"no {value}\nsecond line")
    return value.upper()


def skipping(rows=None) -> formats.Skipping:
    rows = np.arange(100, 107) if rows is None else rows
    return formats.Skipping({"text": upper}, rows, [], version=2)


def test_pieces_cut_a_batch_into_batches_of_size_as_arrow_or_numpy():
    arrow = list(formats.pieces(BATCH, 3, "arrow", {}))
    assert [b.num_rows for b in arrow] == [3, 3, 1] and arrow[2].column("id").to_pylist() == [6]
    numpy = list(formats.pieces(BATCH, 3, "numpy", {}))
    assert [b["id"].tolist() for b in numpy] == [[0, 1, 2], [3, 4, 5], [6]]
    assert numpy[1]["text"] == ["d", "e", "f"]


def test_values_are_decoded_and_a_failure_raises_without_skips():
    decoded = list(formats.pieces(BATCH.slice(0, 2), 5, "numpy", {"text": str.upper}))
    assert decoded[0]["text"] == ["A", "B"]
    with pytest.raises(ValueError, match="no c"):
        list(formats.pieces(BATCH, 5, "numpy", {"text": upper}))


def test_with_skips_the_rows_that_do_not_decode_are_left_out_and_listed_by_global_row():
    decode = skipping()
    batches = list(formats.pieces(BATCH, 4, "numpy", decode))
    assert [b["id"].tolist() for b in batches] == [[0, 1, 3], [4, 6]]
    assert [b["text"] for b in batches] == [["A", "B", "D"], ["E", "G"]]
    assert [(r.row, r.column, r.error, r.version) for r in decode.rejects] == [
        (102, "text", "ValueError: no c", 2),
        (105, "text", "ValueError: no f", 2),
    ]


def test_gathered_columns_are_cut_and_decoded_as_a_batch_is():
    taken = [pa.array([5, 2, 6]), [b"x", b"y", b"z"]]
    schema = pa.schema([("id", pa.int64()), ("blob", pa.binary())])
    got = list(formats.taken_pieces(schema, taken, 2, {"blob": bytes.upper}))
    assert [b["id"].tolist() for b in got] == [[5, 2], [6]]
    assert [b["blob"] for b in got] == [[b"X", b"Y"], [b"Z"]]


def test_batches_of_numpy_columns_join_one_after_the_other():
    first = {"id": np.array([1, 2]), "text": ["a", "b"]}
    second = {"id": np.array([3]), "text": ["c"]}
    joined = formats.joined([first, second])
    assert joined["id"].tolist() == [1, 2, 3] and joined["text"] == ["a", "b", "c"]
    mixed = formats.joined([{"v": np.array([1])}, {"v": [7]}])  # a list: joined as a list
    assert isinstance(mixed["v"], list) and mixed["v"] == [1, 7]


def test_row_dicts_are_decoded_in_place_and_with_skips_the_failing_rows_left_out():
    rows = [{"id": i, "text": t} for i, t in enumerate("abc")]
    assert formats.decoded([dict(r) for r in rows], {"text": str.upper}) == [
        {"id": 0, "text": "A"},
        {"id": 1, "text": "B"},
        {"id": 2, "text": "C"},
    ]
    decode = skipping(np.array([10, 11, 12]))
    assert formats.decoded([dict(r) for r in rows], decode) == [
        {"id": 0, "text": "A"},
        {"id": 1, "text": "B"},
    ]
    assert [str(r) for r in decode.rejects] == ["row 12 (text): ValueError: no c"]


def test_a_skipping_decode_is_sliced_with_its_rows():
    decode = skipping()
    assert decode.slice(2, 3).rows.tolist() == [102, 103, 104]
    assert "text" in decode and "id" not in decode and dict(decode.items()) == {"text": upper}


def lower(value: str) -> str:
    if value in ("a", "e"):
        raise ValueError(f"no {value}")
    return value


def test_rows_that_fail_in_any_of_two_columns_are_all_left_out():
    batch = BATCH.append_column("again", BATCH.column("text"))
    decode = formats.Skipping({"text": upper, "again": lower}, np.arange(7), [], version=1)
    (got,) = formats.pieces(batch, 7, "numpy", decode)
    assert got["id"].tolist() == [1, 3, 6]  # a, e fail in one column; c, f in the other
    rows = [{"text": t, "again": t} for t in "abcdefg"]
    decode = formats.Skipping({"text": upper, "again": lower}, np.arange(7), [], version=1)
    assert [r["again"] for r in formats.decoded(rows, decode)] == ["b", "d", "g"]


def test_one_column_is_cut_kept_and_joined_as_several_are():
    only = pa.record_batch({"text": pa.array(list("abcdefg"))})
    (got,) = formats.pieces(only, 7, "numpy", skipping(np.arange(7)))
    assert got["text"] == ["A", "B", "D", "E", "G"]
    schema = pa.schema([("blob", pa.binary())])
    assert [b["blob"] for b in formats.taken_pieces(schema, [[b"x", b"y", b"z"]], 2, {})] == [
        [b"x", b"y"],
        [b"z"],
    ]
    assert list(formats.taken_pieces(pa.schema([]), [], 2, {})) == []
    assert formats.joined([{"text": ["a"]}]) == {"text": ["a"]}
