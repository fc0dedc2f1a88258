"""Rows in any order, each row group read once: the gathers behind ``ds.take``, ``ds.rows`` (a
DataLoader batch) and shuffled passes.

Arrow IPC: every value is taken straight from the memory-mapped groups, laid end to end once per
view (:class:`Columns`). Parquet: the groups are decoded side by side in threads, each cut down to
the rows wanted from it as soon as it is decoded, so only those rows are held, not whole groups;
then they are put in the requested order.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from recordmill.read.groups import Groups
from recordmill.read.machine.cache import DiskCache, every_part

# A gathered column: an Arrow array, or a binary column's values as bytes.
Taken = pa.Array | list[bytes]

# A column of small values (labels, names) up to this size is joined into one array for gathers.
JOIN_BYTES = 16 << 20
# A column of large values of at most this many bytes of places (24 a row) has each row's place
# worked out once; a bigger one finds a row's place when it is taken, group by group.
LOOKUP_BYTES = 16 << 20


class Gatherer:
    """Takes the rows of one view (a schema's columns) in any order."""

    def __init__(self, groups: Groups, schema: pa.Schema):
        self.groups = groups
        self.schema = schema
        self._whole: Columns | None = None  # Arrow IPC: every group's columns, end to end
        # The disk cache's parts (their batch lists), laid end to end the same way.
        self._parts: tuple[list[list[pa.RecordBatch]], Columns] | None = None

    def take(self, rows: np.ndarray, keep: bool) -> pa.RecordBatch:
        """Global ``rows`` in the given order, as one batch. Parquet groups are kept in the
        cache when ``keep``. Every group is checked against its checksums (once a machine for
        mapped Arrow IPC; Parquet checks its pages as it decodes)."""
        if rows.size == 0:
            return pa.RecordBatch.from_pylist([], schema=self.schema)
        columns, index = self._located(rows, keep)
        return columns.take(index)

    def values(self, rows: np.ndarray, keep: bool) -> list[Taken]:
        """The columns ``take`` gives, a binary one as a list of ``bytes`` made straight from
        where each value lies (no Arrow array of them first: a copy of every value fewer)."""
        if rows.size == 0:
            return pa.RecordBatch.from_pylist([], schema=self.schema).columns
        columns, index = self._located(rows, keep)
        return columns.values(index)

    def _located(self, rows: np.ndarray, keep: bool) -> tuple[Columns, np.ndarray]:
        """Where the rows lie: columns laid end to end, and each row's place in them."""
        groups = self.groups.ready()
        if groups.mapped:  # local Arrow IPC: every group is mapped already
            return self._laid_end_to_end(), rows
        plan = groups.files.index.gather(rows)

        def cut(n: int) -> pa.RecordBatch:
            group = groups.group(plan.groups[n], self.schema, keep=keep)
            return group.take(plan.local[plan.parts[n]])

        if groups.disk is not None:  # mapped parts: only those not yet loaded need threads
            groups.disk.load(plan.groups, groups.pool)
            every = self._every_part(groups.disk)
            if every is not None:
                return every, rows
            mapped = [groups.group(g, self.schema) for g in plan.groups]
            starts = np.cumsum([0] + [b.num_rows for b in mapped])
            # Each row taken once from the groups laid end to end, as from mapped Arrow IPC.
            return Columns(mapped, self.schema), starts[plan.slot] + plan.local
        pieces = list(groups.pool.map(cut, range(len(plan.groups))))
        return Columns(pieces, self.schema), plan.inverse

    def _every_part(self, disk: DiskCache) -> Columns | None:
        """Every cached part's groups laid end to end, once this process maps every part (the
        cache holds the whole dataset): then taken from at every gather, as mapped Arrow IPC
        is, not laid out again for each. Let go at the gather after a part is let go."""
        parts = every_part(disk)
        if parts is None:
            self._parts = None
            return None
        held = self._parts[0] if self._parts is not None else []
        if len(held) != len(parts) or any(a is not b for a, b in zip(held, parts, strict=True)):
            names = self.schema.names
            batches = [batch.select(names) for part in parts for batch in part]
            self._parts = (parts, Columns(batches, self.schema, lookup=True))
        return self._parts[1]

    def _laid_end_to_end(self) -> Columns:
        """Every mapped group laid end to end, once per view; each is checked as it is laid
        out (``Groups.group``: once a machine, read/machine/checked.py)."""
        if self._whole is None:
            groups, schema = self.groups, self.schema
            batches = [groups.group(g, schema) for g in range(len(groups.files.groups))]
            self._whole = Columns(batches, schema, lookup=True)
        return self._whole


class Columns:
    """The columns of many record batches laid end to end, to take rows from in any order
    with one copy of each value. Past ``JOIN_BYTES`` and ``LOOKUP_BYTES`` of a column, what a
    process holds of its own is in proportion to the batches, not the rows: a row's batch and
    place are found from the batches' lengths and their own (mapped) offsets when it is taken.
    ``lookup``: columns that are taken from many times have those places worked out at once, up
    to ``LOOKUP_BYTES``."""

    def __init__(self, batches: list[pa.RecordBatch], schema: pa.Schema, lookup: bool = False):
        self.schema = schema
        self.columns: list[pa.Array | Chunked | Values] = []
        for c, t in enumerate(schema.types):
            chunks = [b.column(c) for b in batches]
            if Values.fits(t, chunks):  # large values: copied from where they lie
                self.columns.append(Values(chunks, lookup))
            elif sum(c.nbytes for c in chunks) <= JOIN_BYTES:
                # One array: a take across many chunks costs per chunk, every time.
                self.columns.append(pa.concat_arrays(chunks))
            else:  # a big column of small values stays where it is (no copy of it all)
                self.columns.append(Chunked(chunks))

    def take(self, index: np.ndarray) -> pa.RecordBatch:
        arrays = [_taken(c, index) for c in self.columns]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def values(self, index: np.ndarray) -> list[Taken]:
        """``Gatherer.values`` of the rows at ``index``."""
        return [
            c.bytes_at(index) if isinstance(c, Values) and c.binary else _taken(c, index)
            for c in self.columns
        ]


def _taken(column: pa.Array | Chunked | Values, index: np.ndarray) -> pa.Array:
    if isinstance(column, (Values, Chunked)):
        return column.take(index)
    return column.take(pa.array(index))


class Spans:
    """Where global rows lie among consecutive chunks of known lengths."""

    def __init__(self, lengths: list[int]):
        self.starts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])

    def split(self, index: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """For each chunk that holds any of the rows ``index`` names: the chunk, where in
        ``index`` its rows are, and those rows as the chunk's own."""
        owner = np.searchsorted(self.starts, index, side="right") - 1
        order = np.argsort(owner, kind="stable")
        sorted_owner = owner[order]
        firsts = np.flatnonzero(np.diff(sorted_owner, prepend=-1))
        bounds = [*firsts.tolist(), len(index)]
        groups = []
        for n, k in enumerate(sorted_owner[firsts].tolist()):
            positions = order[bounds[n] : bounds[n + 1]]
            groups.append((k, positions, index[positions] - self.starts[k]))
        return groups


class Chunked:
    """A big column of small values (labels, ids) left in its batches: a take takes from each
    batch only the rows wanted from it. pyarrow's take on a chunked array joins every chunk
    first: a copy of the whole column in each process, at each batch."""

    def __init__(self, chunks: list[pa.Array]):
        self.chunks = chunks
        self.spans = Spans([len(c) for c in chunks])

    def take(self, index: np.ndarray) -> pa.Array:
        groups = self.spans.split(index)
        if not groups:
            return self.chunks[0].slice(0, 0)
        joined = pa.concat_arrays([self.chunks[k].take(pa.array(rows)) for k, _, rows in groups])
        where = np.empty(len(index), np.int64)  # where in ``joined`` each row of ``index`` is
        where[np.concatenate([positions for _, positions, _ in groups])] = np.arange(len(index))
        return joined.take(pa.array(where))


def _offsets(array: pa.Array) -> np.ndarray:
    """A list or variable-width array's int32 offsets, where they lie (no copy)."""
    return np.frombuffer(array.buffers()[1], np.int32)[array.offset : array.offset + len(array) + 1]


def _numeric_list(t: pa.DataType) -> bool:
    """A list of fixed-width numbers (not bools: their values are bits)."""
    if not pa.types.is_list(t):
        return False
    v = t.value_type
    return (pa.types.is_integer(v) or pa.types.is_floating(v)) and v.bit_width % 8 == 0


class Values:
    """Where each value of a bytes, string, tensor (fixed-size binary) or numeric array (a list
    of numbers: token ids, audio) column lies: its batch, and its start and end in bytes, from
    the batch's own offsets (worked out for every row at once with ``lookup``, up to
    ``LOOKUP_BYTES``)."""

    def __init__(self, chunks: list[pa.Array], lookup: bool = False):
        self.type = t = chunks[0].type
        self.binary = pa.types.is_binary(t)  # values that are bytes as they lie
        self.spans = Spans([len(c) for c in chunks])
        # Per batch: its value offsets as they lie (None: fixed width), and the shift and the
        # width that make them byte offsets into its data.
        self.offsets: list[tuple[np.ndarray | None, int, int]] = []
        if pa.types.is_fixed_size_binary(t):
            self.offsets = [(None, c.offset, t.byte_width) for c in chunks]
            self.data = [np.frombuffer(c.buffers()[1] or b"", np.uint8) for c in chunks]
        elif pa.types.is_list(t):
            width = t.value_type.bit_width // 8
            self.offsets = [(_offsets(c), c.values.offset, width) for c in chunks]
            self.data = [np.frombuffer(c.values.buffers()[1] or b"", np.uint8) for c in chunks]
        else:
            self.offsets = [(_offsets(c), 0, 1) for c in chunks]
            self.data = [np.frombuffer(c.buffers()[2] or b"", np.uint8) for c in chunks]
        rows = int(self.spans.starts[-1])
        small = 24 * rows <= LOOKUP_BYTES
        self._lookup = self._bounds(np.arange(rows)) if lookup and small else None

    def _bounds(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each row's batch, and its value's start and end in that batch's data."""
        chunk, starts, ends = (np.empty(len(index), np.int64) for _ in range(3))
        for k, positions, local in self.spans.split(index):
            offsets, shift, width = self.offsets[k]
            if offsets is None:
                starts[positions] = (local + shift) * width
                ends[positions] = starts[positions] + width
            else:
                starts[positions] = (offsets[local].astype(np.int64) + shift) * width
                ends[positions] = (offsets[local + 1].astype(np.int64) + shift) * width
            chunk[positions] = k
        return chunk, starts, ends

    @staticmethod
    def fits(t: pa.DataType, chunks: list[pa.Array]) -> bool:
        """Values of 1 KB and more (images, audio, tensors), with no nulls."""
        if any(c.null_count for c in chunks) or not chunks:
            return False
        if pa.types.is_fixed_size_binary(t):
            return t.byte_width >= 1024
        if _numeric_list(t):
            if any(c.values.null_count for c in chunks):
                return False
            total = sum(len(c.values) * t.value_type.bit_width // 8 for c in chunks)
        elif pa.types.is_binary(t) or pa.types.is_string(t):
            total = sum(len(c.buffers()[2] or b"") for c in chunks)
        else:
            return False
        values = sum(len(c) for c in chunks)
        return values > 0 and total // values >= 1024

    def _places(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._lookup is not None:
            return tuple(places[index] for places in self._lookup)
        return self._bounds(index)

    def bytes_at(self, index: np.ndarray) -> list[bytes]:
        """The rows' values of a binary column as ``bytes``, each copied once from its place."""
        chunk, starts, ends = self._places(index)
        data = self.data
        return [
            data[k][a:b].tobytes()
            for k, a, b in zip(chunk.tolist(), starts.tolist(), ends.tolist(), strict=True)
        ]

    def take(self, index: np.ndarray) -> pa.Array:
        t = self.type
        chunk, starts, ends = self._places(index)
        offsets = np.concatenate([[0], np.cumsum(ends - starts)])
        if offsets[-1] >= 2**31:
            raise OverflowError("more than 2 GB of values in one gather; take fewer rows at once")
        values = np.concatenate(
            [
                self.data[k][a:b]
                for k, a, b in zip(chunk.tolist(), starts.tolist(), ends.tolist(), strict=True)
            ]
        )
        if pa.types.is_fixed_size_binary(t):
            return pa.Array.from_buffers(t, len(index), [None, pa.py_buffer(values)])
        if pa.types.is_list(t):
            width = t.value_type.bit_width // 8
            flat = pa.Array.from_buffers(
                t.value_type, len(values) // width, [None, pa.py_buffer(values)]
            )
            return pa.ListArray.from_arrays(pa.array(offsets // width, pa.int32()), flat, type=t)
        buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(values)]
        return pa.Array.from_buffers(t, len(index), buffers)
