"""Reading a written dataset back: ``recordmill.open(path)``.

Random access finds the partition and the row group of a row from the manifest's row counts and
each file's footer, without scanning. Arrow IPC partitions are memory-mapped, so ``ds[i]`` touches
only that row's bytes; Parquet row groups are decoded whole and kept in a small cache, so nearby
rows cost one decode. Shuffled iteration is a true seeded permutation of all rows, read through the
same cache (see :meth:`Dataset.iter_batches`).
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from recordmill import manifest as manifest_file
from recordmill.errors import OutputError
from recordmill.manifest import arrow_schema
from recordmill.rows import RowIndex, bounds
from recordmill.schema import nested_shape, numpy_dtype, tensor_spec
from recordmill.storage import Store

CACHE_BYTES = 1 << 30
# Row groups decoded at once; pyarrow decodes without the GIL, so threads use every core.
READ_THREADS = max(1, min(4, os.cpu_count() or 1))


@dataclass
class ReadStats:
    """How much decoding the reads needed: ``groups_read`` counts row-group decodes."""

    groups_read: int = 0
    rows_read: int = 0


@dataclass
class _Group:
    partition: int
    index: int  # row group (Parquet) or record batch (Arrow) within the partition
    start: int  # first global row
    rows: int


@dataclass
class _Files:
    """What all views of one dataset share: open files, the row-group map, the decode cache."""

    store: Store
    manifest: dict[str, Any]
    groups: list[_Group] = field(default_factory=list)
    index: RowIndex = field(default_factory=lambda: RowIndex([]))
    handles: dict[int, Any] = field(default_factory=dict)
    cache: OrderedDict = field(default_factory=OrderedDict)
    cache_bytes: int = 0
    cache_limit: int = CACHE_BYTES
    stats: ReadStats = field(default_factory=ReadStats)
    lock: threading.Lock = field(default_factory=threading.Lock)
    pool: ThreadPoolExecutor | None = None
    pid: int = 0  # the process that opened the files and started the threads


def _threads(files: _Files) -> ThreadPoolExecutor:
    """The dataset's reading threads, started again in a forked child (a DataLoader worker),
    where the parent's threads and open files do not carry over."""
    if files.pool is None or files.pid != os.getpid():
        files.pool = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="recordmill-read")
        files.handles = {}
        files.lock = threading.Lock()
        files.pid = os.getpid()
    return files.pool


def open(
    path: str,
    *,
    filesystem: pafs.FileSystem | None = None,
    decode: Mapping[str, Callable[[Any], Any]] | None = None,
    cache_bytes: int = CACHE_BYTES,
) -> Dataset:
    """Open a dataset written by recordmill: a local path or any pyarrow filesystem URI.

    ``decode`` maps field names to functions applied to their values when rows are returned as
    Python/numpy (for example ``{"data": recordmill.decode.image}``).
    """
    store = Store.at(path) if filesystem is None else Store(filesystem, str(path).rstrip("/"))
    manifest = manifest_file.load(store)
    files = _Files(store, manifest, cache_limit=cache_bytes)
    schema = arrow_schema(manifest)
    return Dataset(files, schema, 0, manifest["total_rows"], dict(decode or {}))


class Dataset:
    """Rows ``start`` to ``stop`` of a written dataset, with ``schema``'s columns."""

    def __init__(
        self,
        files: _Files,
        schema: pa.Schema,
        start: int,
        stop: int,
        decode: dict[str, Callable[[Any], Any]],
    ):
        self._files = files
        self.schema = schema
        self._start = start
        self._stop = stop
        self._decode = {k: v for k, v in decode.items() if k in schema.names}

    # --- what it is ---------------------------------------------------------------------------

    @property
    def manifest(self) -> dict[str, Any]:
        return self._files.manifest

    @property
    def stats(self) -> ReadStats:
        return self._files.stats

    def __len__(self) -> int:
        return self._stop - self._start

    def __repr__(self) -> str:
        return f"<recordmill.Dataset {self._files.store}: {len(self):,} rows, columns {self.schema.names}>"

    # --- views --------------------------------------------------------------------------------

    def select(self, columns: Sequence[str]) -> Dataset:
        """The same rows with only ``columns``."""
        missing = [c for c in columns if c not in self.schema.names]
        if missing:
            raise KeyError(f"no column {missing[0]!r}; columns: {', '.join(self.schema.names)}")
        schema = pa.schema([self.schema.field(c) for c in columns])
        return Dataset(self._files, schema, self._start, self._stop, self._decode)

    def shard(self, rank: int, world_size: int) -> Dataset:
        """Shard ``rank`` of ``world_size``: disjoint, together covering every row, sizes
        differing by at most one; consecutive rows, so each shard reads few row groups."""
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in 0..{world_size - 1}, got {rank}")
        lo, hi = bounds(len(self), world_size)[rank]
        return Dataset(self._files, self.schema, self._start + lo, self._start + hi, self._decode)

    # --- reading ------------------------------------------------------------------------------

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step != 1:
                return self.take(range(start, stop, step))
            return self._range(self._start + start, self._start + max(start, stop))
        index = int(key)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"row {key} is out of range for a dataset of {len(self)} rows")
        table = self._range(self._start + index, self._start + index + 1)
        return self._rows(table)[0]

    def take(self, indices: Sequence[int] | np.ndarray) -> pa.Table:
        """The given rows (negative indices count from the end), in the given order."""
        rows = np.asarray(indices, dtype=np.int64)
        rows = np.where(rows < 0, rows + len(self), rows)
        if rows.size and (rows.min() < 0 or rows.max() >= len(self)):
            raise IndexError(f"indices out of range for a dataset of {len(self)} rows")
        return self._gather(rows + self._start)

    def to_arrow(self) -> pa.Table:
        """Every row of this view as one Arrow table."""
        return self._range(self._start, self._stop)

    def iter_batches(
        self,
        batch_size: int = 1024,
        columns: Sequence[str] | None = None,
        shuffle: bool = False,
        seed: int | None = None,
        format: str = "numpy",
    ) -> Iterator[Any]:
        """Batches of rows: dicts of numpy arrays / lists (``format="numpy"``) or Arrow record
        batches (``format="arrow"``).

        With ``shuffle``, the rows come in a seeded permutation of all of them (``seed=None``
        draws one). It is read in windows of many batches: each window's rows are gathered row
        group by row group, so a row group is decoded once per window that needs it, and decoded
        groups stay in a cache (``cache_bytes``, 1 GiB by default) across windows; a dataset
        whose decoded size fits the cache is decoded exactly once per epoch.
        """
        view = self.select(columns) if columns is not None else self
        if shuffle:
            order = np.random.default_rng(seed).permutation(len(view)) + view._start
            window = view._window_rows(batch_size)
            for lo in range(0, len(order), window):
                table = view._gather(order[lo : lo + window])
                yield from view._batches(table, batch_size, format)
            return
        held: list[pa.Table] = []
        held_rows = 0
        for table in view._groups_in_order():
            held.append(table)
            held_rows += table.num_rows
            if held_rows >= batch_size:
                joined = pa.concat_tables(held)
                cut = held_rows - held_rows % batch_size
                yield from view._batches(joined.slice(0, cut), batch_size, format)
                held, held_rows = [joined.slice(cut)], held_rows - cut
        if held_rows:
            yield from view._batches(pa.concat_tables(held), batch_size, format)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.iter_rows()

    def iter_rows(
        self, indices: Sequence[int] | np.ndarray | None = None, batch_size: int = 1024
    ) -> Iterator[dict[str, Any]]:
        """Row dicts: all rows in order, or the rows at ``indices``, in that order (read a window
        of ``64 * batch_size`` rows at a time, each row group once per window)."""
        if indices is None:
            for batch in self.iter_batches(batch_size, format="arrow"):
                yield from self._rows(pa.Table.from_batches([batch]))
            return
        window = 64 * batch_size
        for lo in range(0, len(indices), window):
            yield from self._rows(self.take(indices[lo : lo + window]))

    # --- internals ----------------------------------------------------------------------------

    def _batches(self, table: pa.Table, size: int, fmt: str) -> Iterator[Any]:
        for batch in table.combine_chunks().to_batches(max_chunksize=size):
            yield batch if fmt == "arrow" else self._columns(batch)

    def _columns(self, batch: pa.RecordBatch) -> dict[str, Any]:
        out = {}
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            values = to_numpy(column, batch.schema.field(name))
            if name in self._decode:
                values = [self._decode[name](v) for v in values]
            out[name] = values
        return out

    def _rows(self, table: pa.Table) -> list[dict[str, Any]]:
        columns = self._columns(table.combine_chunks().to_batches()[0]) if table.num_rows else {}
        for name, values in columns.items():
            if isinstance(values, np.ndarray) and values.ndim == 1:
                columns[name] = values.tolist()  # scalars as Python values in a row dict
        return [
            {name: values[i] for name, values in columns.items()} for i in range(table.num_rows)
        ]

    def _window_rows(self, batch_size: int) -> int:
        """Rows gathered at once in a shuffled pass: 64 batches, but not much over 256 MB."""
        total = sum(p["bytes"] for p in self.manifest["partitions"]) or 1
        per_row = max(1, total // max(1, self.manifest["total_rows"]))
        return max(
            batch_size, min(64 * batch_size, (256 << 20) // per_row // batch_size * batch_size)
        )

    def _groups_in_order(self) -> Iterator[pa.Table]:
        """This view's rows, group by group; the next row groups are decoded in threads while
        the current one is used (pyarrow releases the GIL while it decodes)."""
        files = _index(self._files)
        wanted = list(files.index.spans(self._start, self._stop))
        pool = _threads(files)
        ahead = [pool.submit(self._group, g) for g, _, _ in wanted[:READ_THREADS]]
        for n, (_, lo, hi) in enumerate(wanted):
            table = ahead.pop(0).result()
            if n + READ_THREADS < len(wanted):
                ahead.append(pool.submit(self._group, wanted[n + READ_THREADS][0]))
            yield table.slice(lo, hi - lo)

    def _range(self, start: int, stop: int) -> pa.Table:
        """Global rows ``start`` to ``stop`` (consecutive), read group by group."""
        files = _index(self._files)
        pieces = [self._group(g).slice(lo, hi - lo) for g, lo, hi in files.index.spans(start, stop)]
        if not pieces:
            return self.schema.empty_table()
        return pa.concat_tables(pieces)

    def _gather(self, rows: np.ndarray) -> pa.Table:
        """Global rows in the given order: each row group needed is read once."""
        if rows.size == 0:
            return self.schema.empty_table()
        files = _index(self._files)
        plan = files.index.gather(rows)
        parts, local = plan.parts, plan.local
        tables = list(_threads(files).map(self._group, plan.groups))  # decoded side by side
        columns = []
        for c, column_type in enumerate(self.schema.types):
            chunks = [t.column(c).combine_chunks() for t in tables]
            if _is_large_binary_data(column_type, chunks):
                columns.append(_gather_binary(chunks, parts, plan.slot, local, column_type))
                continue
            pieces = [
                chunk.take(pa.array(local[part])) for chunk, part in zip(chunks, parts, strict=True)
            ]
            # One contiguous array first: a take across many chunks is far slower than one copy.
            columns.append(pa.concat_arrays(pieces).take(pa.array(plan.inverse)))
        return pa.Table.from_arrays(columns, schema=self.schema)

    def _group(self, g: int) -> pa.Table:
        """Row group ``g`` with this view's columns: from the cache, or read and cached."""
        files = self._files
        key = (g, tuple(self.schema.names))
        with files.lock:
            if key in files.cache:
                files.cache.move_to_end(key)
                return files.cache[key]
        group = files.groups[g]
        handle = _handle(files, group.partition)
        if files.manifest["format"] == "arrow":
            batch = handle.get_batch(group.index)
            table = pa.Table.from_batches([batch]).select(self.schema.names)
            return table  # memory-mapped: nothing to cache
        try:
            table = handle.read_row_group(group.index, columns=self.schema.names)
        except (OSError, pa.ArrowInvalid) as e:
            entry = files.manifest["partitions"][group.partition]
            raise OutputError(
                f"{files.store}/{entry['file']}, row group {group.index}, is damaged: {e} "
                "(recordmill verify tells more)"
            ) from e
        table = table.cast(self.schema) if table.schema != self.schema else table
        with files.lock:  # a read-ahead thread may be decoding beside us
            files.stats.groups_read += 1
            files.stats.rows_read += table.num_rows
            files.cache[key] = table
            files.cache_bytes += table.nbytes
            while files.cache_bytes > files.cache_limit and len(files.cache) > 1:
                _, dropped = files.cache.popitem(last=False)
                files.cache_bytes -= dropped.nbytes
        return table


def _is_large_binary_data(t: pa.DataType, chunks: list[pa.Array]) -> bool:
    """Bytes or strings of 1 KB and more a value (images, audio), with no nulls."""
    if not (pa.types.is_binary(t) or pa.types.is_string(t)) or any(c.null_count for c in chunks):
        return False
    total = sum(len(c.buffers()[2] or b"") for c in chunks)
    values = sum(len(c) for c in chunks)
    return values > 0 and total // values >= 1024


def _gather_binary(
    chunks: list[pa.Array],
    parts: list[np.ndarray],
    slot: np.ndarray,
    local: np.ndarray,
    t: pa.DataType,
) -> pa.Array:
    """Gather large values with one copy each, straight into the output order (Arrow's take
    would copy them into group order first and again into the final order)."""
    offsets = [
        np.frombuffer(c.buffers()[1], np.int32)[c.offset : c.offset + len(c) + 1] for c in chunks
    ]
    data = [np.frombuffer(c.buffers()[2], np.uint8) for c in chunks]
    starts = np.empty(len(slot), dtype=np.int64)
    ends = np.empty(len(slot), dtype=np.int64)
    for off, part in zip(offsets, parts, strict=True):
        starts[part] = off[local[part]]
        ends[part] = off[local[part] + 1]
    out_offsets = np.concatenate([[0], np.cumsum(ends - starts)]).astype(np.int32)
    values = np.concatenate(
        [
            data[g][a:b]
            for g, a, b in zip(slot.tolist(), starts.tolist(), ends.tolist(), strict=True)
        ]
    )
    return pa.Array.from_buffers(
        t, len(slot), [None, pa.py_buffer(out_offsets), pa.py_buffer(values)]
    )


def _handle(files: _Files, partition: int) -> Any:
    # One reader per thread: a pyarrow ParquetFile must not be read from two threads at once.
    key = (partition, threading.get_ident())
    if key not in files.handles:
        entry = files.manifest["partitions"][partition]
        handle = open_partition(files.store, entry["file"], files.manifest["format"])
        _check_rows(files, handle, entry)
        files.handles[key] = handle
    return files.handles[key]


def open_partition(store: Store, name: str, fmt: str) -> Any:
    """A partition file opened for reading: Arrow IPC memory-mapped on a local disk (so a row
    costs only its bytes), Parquet with its page checksums checked."""
    if fmt == "arrow":
        return pa.ipc.open_file(store.input_file(name))
    source = store.fs.open_input_file(store.path(name))
    return pq.ParquetFile(source, page_checksum_verification=True)


def group_rows(handle: Any) -> list[int]:
    """The row count of each row group (Parquet) or record batch (Arrow IPC) of an open file."""
    if isinstance(handle, pq.ParquetFile):
        return [handle.metadata.row_group(i).num_rows for i in range(handle.num_row_groups)]
    return [handle.get_batch(i).num_rows for i in range(handle.num_record_batches)]


def _check_rows(files: _Files, handle: Any, entry: dict[str, Any]) -> None:
    rows = sum(group_rows(handle))
    if rows != entry["rows"]:
        raise OutputError(
            f"{files.store}/{entry['file']} holds {rows} rows, the manifest says {entry['rows']}: "
            "the dataset is damaged (recordmill verify tells more)"
        )


def _index(files: _Files) -> _Files:
    """Build the global row-group map once, from the manifest and the files' footers."""
    _threads(files)
    if files.groups or not files.manifest["partitions"]:
        return files
    start = 0
    for p in range(len(files.manifest["partitions"])):
        for i, n in enumerate(group_rows(_handle(files, p))):
            files.groups.append(_Group(p, i, start, n))
            start += n
    files.index = RowIndex([g.rows for g in files.groups])
    return files


def to_numpy(column: pa.Array | pa.ChunkedArray, field: pa.Field | None = None) -> Any:
    """A column as numpy where that fits: numbers -> an array; tensors and small fixed-shape
    arrays -> one array of shape (rows, *shape), a view of the column's memory for tensors;
    variable-length arrays -> a list of arrays, each with the field's number of dimensions;
    strings, bytes and arrays of them -> lists. Give the ``field`` (it holds a tensor's dtype and
    shape) wherever the column may be a tensor; null rows are None."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    t = column.type
    spec = tensor_spec(field) if field is not None else None
    if spec is not None:
        return _tensors(column, *spec)
    shape, leaf = nested_shape(t)
    numeric = pa.types.is_integer(leaf) or pa.types.is_floating(leaf) or pa.types.is_boolean(leaf)
    if shape and numeric and -1 not in shape and not column.null_count:
        # Fixed shape all the way down: one (rows, *shape) array, no per-row work.
        flat = column
        for _ in shape:
            flat = flat.flatten()
        return flat.to_numpy(zero_copy_only=False).reshape(len(column), *shape)
    if shape and numeric:
        return _arrays(column, shape, numpy_dtype(leaf))
    if not shape and numeric and not column.null_count:
        return column.to_numpy(zero_copy_only=False)
    return column.to_pylist()


def _tensors(column: pa.Array, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
    """Tensor rows as one (rows, *shape) array over the column's own bytes (or, with nulls, a
    list holding None for the null rows)."""
    if not len(column):
        return np.empty((0, *shape), dtype)
    width = column.type.byte_width
    array = np.frombuffer(
        column.buffers()[1],
        dtype=dtype,
        count=len(column) * math.prod(shape),
        offset=column.offset * width,
    ).reshape(len(column), *shape)
    array.flags.writeable = False  # a view of decoded (cached) or memory-mapped bytes
    if not column.null_count:
        return array
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    return [array[i] if ok else None for i, ok in enumerate(valid)]


def _arrays(column: pa.Array, shape: list[int], dtype: np.dtype) -> list[Any]:
    """Arrays of a shape with variable dimensions (or with nulls), one per row, each with the
    declared number of dimensions even when empty."""
    if shape[0] == -1 and -1 not in shape[1:] and pa.types.is_list(column.type):
        # The usual [-1] or [-1, 4]: views of one array of all values, cut at the offsets.
        offsets = column.offsets.to_numpy()
        values = column.values
        for _ in shape[1:]:
            values = values.flatten()
        flat = values.to_numpy(zero_copy_only=False).reshape(-1, *shape[1:])
        flat.flags.writeable = False  # views of it may share the decoded (cached) bytes
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        return [flat[offsets[i] : offsets[i + 1]] if ok else None for i, ok in enumerate(valid)]
    empty = [0 if d == -1 else d for d in shape]
    out = []
    for value in column.to_pylist():
        if value is None:
            out.append(None)
            continue
        array = np.asarray(value, dtype=dtype)
        out.append(array.reshape(empty) if array.ndim != len(shape) and not array.size else array)
    return out
