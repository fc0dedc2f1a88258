"""Columns laid end to end (read/gather.py): any rows in any order, equal to pyarrow's own take
over the same batches, whatever path a column takes; and what a process holds for them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from recordmill.read import gather

SCHEMA = pa.schema(
    {
        "id": pa.int64(),
        "label": pa.string(),
        "blob": pa.binary(),
        "tensor": pa.binary(1024),
        "wave": pa.list_(pa.float32()),
    }
)


def batches() -> list[pa.RecordBatch]:
    """Batches of every kind of column, one empty, one cut from a bigger one (an offset), with
    nulls in the small values."""
    rows, made = 0, []
    for n in (5, 0, 7, 1, 6):
        ids = np.arange(rows, rows + n)
        made.append(
            pa.record_batch(
                {
                    "id": ids,
                    "label": pa.array([None if i % 3 == 0 else f"l{i}" for i in ids]),
                    "blob": [bytes([i % 256]) * (1024 + i) for i in ids],
                    "tensor": [bytes([i]) * 1024 for i in ids],
                    "wave": [np.full(300, i, np.float32) for i in ids],
                },
                schema=SCHEMA,
            )
        )
        rows += n
    cut = pa.concat_batches([made[2], made[3]]).slice(3, 5)  # rows 8-12 again, at an offset
    # rows 0-1 again, their lists' values cut from a longer array (the values at an offset)
    head = made[0].slice(0, 2)
    values = pa.array(np.concatenate([np.full(100, -1), np.full(300, 0), np.full(300, 1)]))
    wave = pa.ListArray.from_arrays(
        pa.array([0, 300, 600], pa.int32()), values.cast(pa.float32()).slice(100)
    )
    assert wave.values.offset == 100
    shifted = pa.record_batch([*head.columns[:4], wave], schema=SCHEMA)
    return [*made, cut, shifted]


@pytest.mark.parametrize("limit", [0, 1 << 30], ids=["found-at-each-take", "joined-or-looked-up"])
def test_any_rows_in_any_order_equal_pyarrows_take(monkeypatch, limit):
    monkeypatch.setattr(gather, "JOIN_BYTES", limit)
    monkeypatch.setattr(gather, "LOOKUP_BYTES", limit)
    parts = batches()
    columns = gather.Columns(parts, parts[0].schema, lookup=True)
    assert [type(c).__name__ for c in columns.columns][2:] == ["Values"] * 3  # 1 KB and more
    small = type(columns.columns[0]).__name__
    assert small == ("Chunked" if limit == 0 else "Int64Array")
    assert all((c._lookup is None) == (limit == 0) for c in columns.columns[2:])
    once = gather.Columns(parts, parts[0].schema)  # a gather's own, taken from once: no lookup
    assert all(c._lookup is None for c in once.columns[2:])
    whole = pa.Table.from_batches(parts).combine_chunks()
    rng = np.random.default_rng(0)
    for index in ([0], [len(whole) - 1], rng.permutation(len(whole)), rng.integers(0, 24, 60)):
        index = np.asarray(index, np.int64)  # repeated rows too
        taken = pa.Table.from_batches([columns.take(index)])
        assert taken.equals(whole.take(pa.array(index))), index


@pytest.mark.parametrize("limit", [0, 1 << 30], ids=["found-at-each-take", "looked-up"])
def test_a_binary_columns_bytes_are_made_from_where_they_lie(monkeypatch, limit):
    monkeypatch.setattr(gather, "LOOKUP_BYTES", limit)
    parts = batches()
    columns = gather.Columns(parts, parts[0].schema, lookup=True)
    whole = pa.Table.from_batches(parts).combine_chunks()
    index = np.random.default_rng(1).integers(0, 24, 40)
    expected = whole.take(pa.array(index))

    def no_array(self, index):  # the copy saved: no Arrow array of the bytes first
        assert not self.binary, "a binary column was taken as an Arrow array"
        return taken(self, index)

    taken = gather.Values.take
    monkeypatch.setattr(gather.Values, "take", no_array)
    values = columns.values(index)
    assert values[2] == expected.column("blob").to_pylist()  # bytes, in the order asked
    assert all(type(v) is bytes for v in values[2])
    for c in (0, 1, 3, 4):  # the others: Arrow arrays, as take gives them
        assert values[c].equals(expected.column(c).chunk(0)), c


def owned_bytes(value, seen=None) -> int:
    """The bytes of the numpy arrays ``value`` holds of its own (not views of batches)."""
    seen = seen if seen is not None else set()
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return value.nbytes if value.flags.owndata else 0
    if isinstance(value, (list, tuple)):
        return sum(owned_bytes(v, seen) for v in value)
    if hasattr(value, "__dict__"):
        return sum(owned_bytes(v, seen) for v in vars(value).values())
    return 0


def test_a_process_holds_a_few_numbers_per_batch_not_per_row(monkeypatch):
    """Each DataLoader worker lays the dataset's columns end to end: what it holds of its own
    for that grows with the batches (a row's place is found when it is taken), never with the
    rows: 10^8 rows would otherwise be gigabytes a worker. (Up to the limits, a small
    dataset's columns are joined or looked up: the test above.)"""
    monkeypatch.setattr(gather, "JOIN_BYTES", 0)
    monkeypatch.setattr(gather, "LOOKUP_BYTES", 0)
    many = batches() * 40
    held = owned_bytes(gather.Columns(many, SCHEMA, lookup=True).columns)
    assert 0 < held <= 8 * (len(many) + 1) * len(SCHEMA)  # a number a batch, per column


def test_big_values_with_nulls_and_lists_of_strings_are_taken_as_pyarrow_takes_them():
    """Values of 1 KB and more with a null among them, and lists of strings however long, are not
    taken from where they lie: pyarrow takes them (nulls kept)."""
    schema = pa.schema({"maybe": pa.binary(), "tags": pa.list_(pa.string())})
    parts = [
        pa.record_batch(
            {"maybe": [b"x" * 2000, None, b"y" * 3000], "tags": [["a"], [], ["c" * 2000]]},
            schema=schema,
        ),
        pa.record_batch(
            {"maybe": [b"z" * 4000, b"w" * 1500], "tags": [["d" * 3000], None]}, schema=schema
        ),
    ]
    columns = gather.Columns(parts, schema, lookup=True)
    assert not any(isinstance(c, gather.Values) for c in columns.columns)
    whole = pa.Table.from_batches(parts).combine_chunks()
    index = np.array([4, 0, 1, 3, 2, 1])
    assert pa.Table.from_batches([columns.take(index)]).equals(whole.take(pa.array(index)))


def test_spans_split_rows_by_the_chunk_that_holds_them():
    spans = gather.Spans([2, 3, 0, 4])
    split = spans.split(np.array([3, 2, 8, 4, 5]))  # none in the first chunk
    assert [(k, p.tolist(), r.tolist()) for k, p, r in split] == [
        (1, [0, 1, 3], [1, 0, 2]),
        (3, [2, 4], [3, 0]),
    ]
