"""Reading a written dataset back: ``recordmill.open(path)``.

Rows are found from the manifest's row counts and each file's footer, without scanning. Arrow IPC
partitions are memory-mapped: ``ds[i]`` touches only that row's bytes, and pages stay in the OS's
page cache (shared by DataLoader workers), not in the process's own memory. Parquet row groups
are decoded whole, so they are kept in a cache bounded by bytes (``cache_bytes``); a sequential
pass decodes a few groups ahead in threads (``read_ahead_bytes``) and does not fill the cache.
Shuffled iteration is a true seeded permutation of all rows, gathered a window at a time
(see :meth:`Dataset.iter_batches`).
"""

from __future__ import annotations

import bisect
import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from recordmill.dataset import manifest as manifest_file
from recordmill.dataset.checksum import column_crc32
from recordmill.dataset.columns import row_getter, row_values, to_numpy
from recordmill.dataset.manifest import arrow_schema
from recordmill.dataset.rows import RowIndex, bounds, recut
from recordmill.dataset.storage import Store
from recordmill.errors import OutputError

__all__ = ["Dataset", "ReadStats", "group_rows", "open", "open_partition", "to_numpy"]

CACHE_BYTES = 256 << 20
READ_AHEAD_BYTES = 64 << 20
# A column of small values (labels, names) up to this size is joined into one array for gathers.
JOIN_BYTES = 16 << 20
# Parquet row groups decoded at once; pyarrow decodes without the GIL, so threads use every core.
READ_THREADS = max(1, min(4, os.cpu_count() or 1))


@dataclass
class ReadStats:
    """How much decoding the reads needed: ``groups_read`` counts Parquet row-group decodes."""

    groups_read: int = 0
    rows_read: int = 0


@dataclass(frozen=True)
class _Group:
    partition: int
    index: int  # row group (Parquet) or record batch (Arrow) within the partition
    rows: int


class _Files:
    """What all views of one dataset share: open files, the row-group map, the decode cache."""

    def __init__(
        self,
        store: Store,
        manifest: dict[str, Any],
        cache_limit: int,
        ahead: int,
        checksums: bool = True,
    ):
        self.store = store
        self.manifest = manifest
        self.arrow = manifest["format"] == "arrow"
        # Arrow IPC on a local disk is memory-mapped: its batches cost nothing to keep.
        self.mapped = self.arrow and store.local
        self.cache_limit = cache_limit
        self.read_ahead_bytes = ahead
        self.stats = ReadStats()
        self.groups: list[_Group] = []
        self.starts: list[int] = [0]  # first global row of each group, then the total
        self.index = RowIndex([])
        # Local partitions are opened now, all of them: a run that replaces the dataset
        # (--overwrite) then cannot change what this reader reads (the files stay readable
        # while they are open, wherever their folder goes).
        self._pinned = self._pin() if store.local else {}
        self.checksums = checksums  # Arrow IPC batches' CRC-32, on sequential/shuffled reads
        self.schema = arrow_schema(manifest).remove_metadata()
        self.names = self.schema.names
        self._verified: set[tuple[int, str]] = set()  # (group, column) whose checksum matched
        self._pid = -1
        self._fresh()

    def _fresh(self) -> None:
        """Open files and threads belong to one process: a forked DataLoader worker starts its
        own (the parent's threads do not exist there and its file positions are shared)."""
        self._pid = os.getpid()
        self._handles: dict[tuple[int, int], Any] = {}
        self._batches: dict[tuple[int, tuple[str, ...]], pa.RecordBatch] = {}
        self._cache: OrderedDict[tuple[int, tuple[str, ...]], pa.RecordBatch] = OrderedDict()
        self._cache_bytes = 0
        self._lock = threading.Lock()
        self._build = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def ready(self) -> _Files:
        """Build the global row-group map once: from the manifest, where it records each
        partition's row groups (all of ``row_group_size`` rows but the last), else from every
        file's footer."""
        if self._pid != os.getpid():
            self._fresh()
        if self.index.total or not self.manifest["total_rows"]:
            return self
        with self._build:  # threads of one process share the map: build it once, whole
            if self.index.total:
                return self
            groups, starts = [], [0]
            for p in range(len(self.manifest["partitions"])):
                for i, n in enumerate(self.expected_rows(p) or group_rows(self.handle(p))):
                    groups.append(_Group(p, i, n))
                    starts.append(starts[-1] + n)
            self.groups, self.starts = groups, starts
            self.index = RowIndex([g.rows for g in groups])
        return self

    def expected_rows(self, partition: int) -> list[int] | None:
        """The row count of each row group of a partition, as the manifest says."""
        entry = self.manifest["partitions"][partition]
        sizes = manifest_file.group_sizes(self.manifest, entry)
        if sizes is not None and len(sizes) != entry["row_groups"]:
            size = self.manifest["settings"]["row_group_size"]
            raise OutputError(
                f"the manifest of {self.store} is damaged: {entry['file']} has {entry['rows']} "
                f"rows in {entry['row_groups']} row groups of {size} (recordmill verify tells more)"
            )
        return sizes

    @property
    def pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="recordmill-read")
        return self._pool

    def locate(self, row: int) -> tuple[int, int]:
        """The group holding global ``row``, and the row's number within it."""
        g = bisect.bisect_right(self.starts, row) - 1
        return g, row - self.starts[g]

    def _pin(self) -> dict[int, Any]:
        """Every partition file, opened; as many as the process may open when that is fewer."""
        count = len(self.manifest["partitions"])
        # Half the process's open files at most: the rest are for everything else.
        budget = _allow_open_files(2 * count + 256) // 2
        return {p: self._open_raw(p) for p in range(min(count, budget))}

    def _open_raw(self, partition: int) -> Any:
        """A partition file, opened for random access, of the size the manifest says."""
        entry = self.manifest["partitions"][partition]
        try:
            raw = _open_file(self.store, entry["file"], self.manifest["format"])
        except FileNotFoundError:
            raise OutputError(
                f"{self.store}/{entry['file']} is missing: the dataset was replaced (a run with "
                "--overwrite) or damaged while it was read; open it again"
            ) from None
        if raw.size() != entry["bytes"]:
            raise OutputError(
                f"{self.store}/{entry['file']} holds {raw.size()} bytes, the manifest says "
                f"{entry['bytes']}: the dataset was replaced while it was read (open it again), "
                "or it is damaged (recordmill verify tells more)"
            )
        return raw

    def handle(self, partition: int) -> Any:
        # One reader per thread: a pyarrow ParquetFile must not be read from two threads at once.
        key = (partition, threading.get_ident())
        if key not in self._handles:
            raw = self._pinned.get(partition) or self._open_raw(partition)
            handle = _reader(raw, self.manifest["format"])
            self._check(partition, handle)
            self._handles[key] = handle
        return self._handles[key]

    def verify(self, g: int, batch: pa.RecordBatch, again: bool = False) -> None:
        """Check a mapped Arrow group's columns against the checksums its partition records,
        once per process: what sequential and shuffled reads do (``ds[i]`` does not)."""
        group = self.groups[g]
        entry = self.manifest["partitions"][group.partition]
        sums = entry.get("batch_crc32")
        if not sums or not self.checksums:
            return
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            if (g, name) in self._verified and not again:
                continue
            if column_crc32(column) != sums[group.index][self.names.index(name)]:
                raise OutputError(
                    f"{self.store}/{entry['file']}, record batch {group.index}, column "
                    f"{name!r}: its checksum does not match the manifest: the file is damaged, or "
                    "was replaced while it was read (recordmill verify tells more)"
                )
            self._verified.add((g, name))

    def _check(self, partition: int, handle: Any) -> None:
        """Refuse a file whose row groups are not those the manifest says (for Arrow IPC, the
        count here; each batch's rows when it is first read, which costs nothing then)."""
        entry = self.manifest["partitions"][partition]
        expected = self.expected_rows(partition)
        if isinstance(handle, pa.ipc.RecordBatchFileReader) and expected is not None:
            found, wanted = handle.num_record_batches, f"{len(expected)} record batches"
            ok = found == len(expected)
            if not handle.schema.remove_metadata().equals(self.schema):
                found, wanted, ok = "another schema", "the manifest's", False
        else:
            rows = group_rows(handle)
            found, wanted = _groups_text(rows), _groups_text(expected or [entry["rows"]])
            ok = rows == expected if expected is not None else sum(rows) == entry["rows"]
        if not ok:
            raise OutputError(
                f"{self.store}/{entry['file']} does not match the manifest ({found} found, "
                f"{wanted} expected): the dataset is damaged (recordmill verify tells more)"
            )

    def group(
        self, g: int, schema: pa.Schema, keep: bool = True, check: bool = False
    ) -> pa.RecordBatch:
        """Row group ``g`` with ``schema``'s columns. Arrow: a memory-mapped batch, nothing
        decoded (its checksums checked when ``check``). Parquet: from the cache, or decoded
        (and cached when ``keep``); its pages' checksums are checked as they are decoded."""
        key = (g, tuple(schema.names))
        if self.mapped:
            batch = self._batches.get(key)
            if batch is None:
                batch = self._decode(g, schema)
                self._batches[key] = batch
            if check:
                self.verify(g, batch)
            return batch
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        batch = self._decode(g, schema)
        if self.arrow:  # read from object storage: checked each time it is read
            self.verify(g, batch, again=True)
        with self._lock:  # a read-ahead thread may be decoding beside us
            self.stats.groups_read += 1
            self.stats.rows_read += batch.num_rows
            if keep:
                self._cache[key] = batch
                self._cache_bytes += batch.nbytes
                while self._cache_bytes > self.cache_limit and len(self._cache) > 1:
                    _, dropped = self._cache.popitem(last=False)
                    self._cache_bytes -= dropped.nbytes
        return batch

    def _decode(self, g: int, schema: pa.Schema) -> pa.RecordBatch:
        group = self.groups[g]
        if self.arrow:
            batch = self.handle(group.partition).get_batch(group.index)
            if batch.num_rows != group.rows:
                entry = self.manifest["partitions"][group.partition]
                raise OutputError(
                    f"{self.store}/{entry['file']}, record batch {group.index}, holds "
                    f"{batch.num_rows} rows, the manifest says {group.rows}: the dataset is "
                    "damaged (recordmill verify tells more)"
                )
            return batch.select(schema.names)
        try:
            table = self.handle(group.partition).read_row_group(
                group.index, columns=schema.names, use_threads=False
            )
        except (OSError, pa.ArrowInvalid) as e:
            entry = self.manifest["partitions"][group.partition]
            raise OutputError(
                f"{self.store}/{entry['file']}, row group {group.index}, is damaged: {e} "
                "(recordmill verify tells more)"
            ) from e
        table = table.cast(schema) if table.schema != schema else table
        return table.combine_chunks().to_batches()[0]


def open(
    path: str,
    *,
    filesystem: pafs.FileSystem | None = None,
    decode: Mapping[str, Callable[[Any], Any]] | None = None,
    cache_bytes: int = CACHE_BYTES,
    read_ahead_bytes: int = READ_AHEAD_BYTES,
    checksums: bool = True,
) -> Dataset:
    """Open a dataset written by recordmill: a local path or any pyarrow filesystem URI.

    ``decode`` maps field names to functions applied to their values when rows are returned as
    Python/numpy (for example ``{"data": recordmill.decode.image}``). ``cache_bytes`` bounds the
    decoded Parquet row groups kept for random access and shuffles (256 MiB by default; Arrow IPC
    needs none); ``read_ahead_bytes`` bounds what a sequential pass decodes ahead (64 MiB).
    ``checksums=False`` skips the check of each Arrow IPC record batch's CRC-32 on sequential
    and shuffled reads (Parquet's page checksums are checked always).
    """
    store = Store.at(path) if filesystem is None else Store(filesystem, str(path).rstrip("/"))
    files = _open_files(store, cache_bytes, read_ahead_bytes, checksums)
    schema = arrow_schema(files.manifest)
    return Dataset(files, schema, 0, files.manifest["total_rows"], dict(decode or {}))


def _open_files(
    store: Store, cache_bytes: int, read_ahead_bytes: int, checksums: bool, tries: int = 5
) -> _Files:
    """The dataset's manifest and (on a local disk) all its files, of one version: were they
    replaced in between (a run with --overwrite committed), it is tried again."""
    manifest = manifest_file.load(store)
    for _ in range(tries):
        listed = sum(p["rows"] for p in manifest["partitions"])
        if manifest["total_rows"] != listed:
            raise OutputError(
                f"the manifest of {store} is damaged: total_rows is {manifest['total_rows']}, "
                f"its partitions hold {listed} (recordmill verify tells more)"
            )
        try:
            files, error = _Files(store, manifest, cache_bytes, read_ahead_bytes, checksums), None
        except OutputError as e:
            files, error = None, e
        now = manifest_file.load(store) if store.local else manifest
        if now == manifest:
            if error is not None:  # the same version: the files are damaged
                raise error
            return files
        manifest = now
    raise OutputError(f"{store} was replaced {tries} times while it was opened; open it again")


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
        self._getters = [(f.name, row_getter(f), self._decode.get(f.name)) for f in schema]
        self._whole: _Columns | None = None  # Arrow IPC: every group's columns, end to end
        self._last: tuple[int, list[pa.Array]] = (-1, [])
        self._per_row: int | None = None

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

    def warm(self) -> Dataset:
        """Load now what reading needs: the row-group map, and pyarrow's own lazy imports
        (with pandas installed, pyarrow imports it on first use: 0.2 s), so that processes
        forked afterwards, such as DataLoader workers, do not each pay for them."""
        self._files.ready()
        pa.array([0])
        return self

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
        files = self._files.ready()
        g, local = files.locate(self._start + index)
        if self._last[0] != g:  # the arrays of the group read last, kept: wrapping them costs
            self._last = (g, files.group(g, self.schema).columns)
        row = {}
        for column, (name, get, decode) in zip(self._last[1], self._getters, strict=True):
            value = get(column, local)
            row[name] = decode(value) if decode is not None else value
        return row

    def take(self, indices: Sequence[int] | np.ndarray) -> pa.Table:
        """The given rows (negative indices count from the end), in the given order."""
        rows = self._global(indices)
        window = self._window_rows(1024)
        batches = [self._gather(rows[lo : lo + window]) for lo in range(0, len(rows), window)]
        return pa.Table.from_batches(batches, schema=self.schema)

    def rows(self, indices: Sequence[int] | np.ndarray) -> list[dict[str, Any]]:
        """The row dicts ``ds[i]`` gives, for many rows at once (gathered together: a
        DataLoader batch at a time)."""
        return self._rows(self._gather(self._global(indices), keep=True))

    def _global(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        rows = np.asarray(indices, dtype=np.int64)
        rows = np.where(rows < 0, rows + len(self), rows)
        if rows.size and (rows.min() < 0 or rows.max() >= len(self)):
            raise IndexError(f"indices out of range for a dataset of {len(self)} rows")
        return rows + self._start

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
        draws one), gathered a window of batches at a time: with Arrow IPC each row is copied
        once from the memory-mapped file; with Parquet each window decodes the row groups it
        needs (or finds them in the cache), so a dataset whose decoded size fits ``cache_bytes``
        is decoded exactly once per epoch.
        """
        view = self.select(columns) if columns is not None else self
        if shuffle:
            order = np.random.default_rng(seed).permutation(len(view)) + view._start
            window = view._window_rows(batch_size)
            for lo in range(0, len(order), window):
                batch = view._gather(order[lo : lo + window], check=True)
                yield from view._batches(batch, batch_size, format)
            return
        for parts in recut(view._groups_in_order(view._start, view._stop), batch_size):
            batch = parts[0] if len(parts) == 1 else pa.concat_batches(parts)
            yield from view._batches(batch, batch_size, format)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.iter_rows()

    def iter_rows(
        self, indices: Sequence[int] | np.ndarray | None = None, batch_size: int = 1024
    ) -> Iterator[dict[str, Any]]:
        """Row dicts: all rows in order, or the rows at ``indices``, in that order (gathered a
        window at a time, as a shuffled pass is)."""
        if indices is None:
            for batch in self.iter_batches(batch_size, format="arrow"):
                yield from self._rows(batch)
            return
        rows = self._global(indices)
        window = self._window_rows(batch_size)
        for lo in range(0, len(rows), window):
            gathered = self._gather(rows[lo : lo + window])
            for start in range(0, gathered.num_rows, batch_size):
                yield from self._rows(gathered.slice(start, batch_size))

    # --- internals ----------------------------------------------------------------------------

    def _batches(self, batch: pa.RecordBatch, size: int, fmt: str) -> Iterator[Any]:
        for lo in range(0, batch.num_rows, size):
            piece = batch.slice(lo, size)
            yield piece if fmt == "arrow" else self._columns(piece)

    def _columns(self, batch: pa.RecordBatch) -> dict[str, Any]:
        out = {}
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            values = to_numpy(column, batch.schema.field(name))
            if name in self._decode:
                values = [self._decode[name](v) for v in values]
            out[name] = values
        return out

    def _rows(self, batch: pa.RecordBatch) -> list[dict[str, Any]]:
        rows = row_values(batch)
        for name, decode in self._decode.items():
            for row in rows:
                row[name] = decode(row[name])
        return rows

    def _window_rows(self, batch_size: int) -> int:
        """Rows gathered at once by a shuffle, a whole number of batches. Arrow IPC: about
        16 MiB, as nothing is decoded. Parquet: about ``cache_bytes``, since each window decodes
        every row group it touches (nearly all of them) and a larger window decodes less per
        row; the groups are kept for the next window only when all of them fit the cache."""
        budget = (16 << 20) if self._files.mapped else self._files.cache_limit
        return batch_size * max(1, budget // self._row_bytes() // batch_size)

    def _row_bytes(self) -> int:
        """The bytes a row of this view takes decoded, as its first row group holds them."""
        if self._per_row is None:
            files = self._files.ready()
            first = files.group(0, self.schema) if files.groups else None
            self._per_row = max(1, first.nbytes // first.num_rows) if first else 1
        return self._per_row

    def _groups_in_order(self, start: int, stop: int) -> Iterator[pa.RecordBatch]:
        """Global rows ``start`` to ``stop``, group by group. Parquet groups are decoded ahead
        in threads (pyarrow releases the GIL), up to ``read_ahead_bytes``, and not cached;
        mapped Arrow IPC groups have their checksums checked ahead the same way."""
        files = self._files.ready()
        wanted = list(files.index.spans(start, stop))
        group_bytes = self._row_bytes() * max(1, files.index.total // max(1, len(files.groups)))
        depth = max(1, min(len(wanted), files.read_ahead_bytes // group_bytes))
        if files.mapped:  # nothing to decode; the checksums are checked ahead, in threads
            depth = min(depth, 4 * READ_THREADS)
        ahead = [
            files.pool.submit(files.group, g, self.schema, False, True)
            for g, _, _ in wanted[:depth]
        ]
        try:
            for n, (_, lo, hi) in enumerate(wanted):
                batch = ahead.pop(0).result()
                if n + depth < len(wanted):
                    ahead.append(
                        files.pool.submit(
                            files.group, wanted[n + depth][0], self.schema, False, True
                        )
                    )
                yield batch.slice(lo, hi - lo)
        finally:  # a pass stopped early (an error, a break) leaves nothing reading behind it
            for future in ahead:
                future.cancel()
            wait_for(ahead)

    def _range(self, start: int, stop: int) -> pa.Table:
        """Global rows ``start`` to ``stop`` (consecutive) as one table."""
        pieces = list(self._groups_in_order(start, stop))
        return pa.Table.from_batches(pieces, schema=self.schema)

    def _gather(
        self, rows: np.ndarray, keep: bool | None = None, check: bool = False
    ) -> pa.RecordBatch:
        """Global rows in the given order, as one batch; each row group needed is read once.

        Arrow IPC: every value is taken straight from the memory-mapped groups, laid end to end
        once per view (:class:`_Columns`). Parquet: the groups are decoded side by side in
        threads, each cut down to the rows wanted from it as soon as it is decoded, so only
        those rows are held, not whole groups; then they are put in the requested order. The
        groups are cached when ``keep``; by default only when all of them fit the cache (else a
        sweep over every group would only churn it). ``check``: Arrow IPC groups are checked
        against their checksums first (Parquet checks its pages always).
        """
        if rows.size == 0:
            return pa.RecordBatch.from_pylist([], schema=self.schema)
        files = self._files.ready()
        if files.arrow:
            if self._whole is None:
                batches = [files.group(g, self.schema) for g in range(len(files.groups))]
                self._whole = _Columns(batches, self.schema)
            if check and not self._whole.checked:
                schema = self.schema
                list(
                    files.pool.map(
                        lambda g: files.group(g, schema, check=True), range(len(files.groups))
                    )
                )
                self._whole.checked = True
            return self._whole.take(rows)
        plan = files.index.gather(rows)

        if keep is None:  # else a sweep over more groups than the cache holds only churns it
            keep = self._row_bytes() * files.index.total <= files.cache_limit

        def cut(n: int) -> pa.RecordBatch:
            group = files.group(plan.groups[n], self.schema, keep)
            return group.take(plan.local[plan.parts[n]])

        pieces = list(files.pool.map(cut, range(len(plan.groups))))
        return _Columns(pieces, self.schema).take(plan.inverse)


class _Columns:
    """The columns of many record batches laid end to end, to take rows from in any order
    with one copy of each value. Values of 1 KB and more (images, audio, tensors) are copied
    straight from their batches' buffers; Arrow's own take would first join the chunks."""

    def __init__(self, batches: list[pa.RecordBatch], schema: pa.Schema):
        self.schema = schema
        self.checked = False  # its batches' checksums matched
        self.columns: list[pa.Array | pa.ChunkedArray | _Values] = []
        for c, t in enumerate(schema.types):
            chunks = [b.column(c) for b in batches]
            if _Values.fits(t, chunks):  # large values: copied from where they lie
                self.columns.append(_Values(chunks))
            elif sum(c.nbytes for c in chunks) <= JOIN_BYTES:
                # One array: a take across many chunks costs per chunk, every time.
                self.columns.append(pa.concat_arrays(chunks))
            else:  # a big column of small values stays where it is (no copy of it all)
                self.columns.append(pa.chunked_array(chunks, type=t))

    def take(self, index: np.ndarray) -> pa.RecordBatch:
        arrays = []
        for column, t in zip(self.columns, self.schema.types, strict=True):
            if isinstance(column, _Values):
                arrays.append(column.take(index, t))
            else:
                taken = column.take(pa.array(index))
                arrays.append(
                    taken.combine_chunks() if isinstance(taken, pa.ChunkedArray) else taken
                )
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


class _Values:
    """Where each value of a bytes, string or tensor (fixed-size binary) column lies: its
    batch, its start and its end."""

    def __init__(self, chunks: list[pa.Array]):
        t = chunks[0].type
        if pa.types.is_fixed_size_binary(t):
            width = t.byte_width
            offsets = [np.arange(c.offset, c.offset + len(c) + 1) * width for c in chunks]
            self.data = [np.frombuffer(c.buffers()[1] or b"", np.uint8) for c in chunks]
        else:
            offsets = [
                np.frombuffer(c.buffers()[1], np.int32)[c.offset : c.offset + len(c) + 1]
                for c in chunks
            ]
            self.data = [np.frombuffer(c.buffers()[2] or b"", np.uint8) for c in chunks]
        self.starts = np.concatenate([o[:-1] for o in offsets]).astype(np.int64)
        self.ends = np.concatenate([o[1:] for o in offsets]).astype(np.int64)
        self.chunk = np.repeat(np.arange(len(chunks)), [len(c) for c in chunks])

    @staticmethod
    def fits(t: pa.DataType, chunks: list[pa.Array]) -> bool:
        """Values of 1 KB and more (images, audio, tensors), with no nulls."""
        if any(c.null_count for c in chunks) or not chunks:
            return False
        if pa.types.is_fixed_size_binary(t):
            return t.byte_width >= 1024
        if not (pa.types.is_binary(t) or pa.types.is_string(t)):
            return False
        values = sum(len(c) for c in chunks)
        total = sum(len(c.buffers()[2] or b"") for c in chunks)
        return values > 0 and total // values >= 1024

    def take(self, index: np.ndarray, t: pa.DataType) -> pa.Array:
        starts, ends = self.starts[index], self.ends[index]
        offsets = np.concatenate([[0], np.cumsum(ends - starts)])
        if offsets[-1] >= 2**31:
            raise OverflowError("more than 2 GB of values in one gather; take fewer rows at once")
        values = np.concatenate(
            [
                self.data[k][a:b]
                for k, a, b in zip(
                    self.chunk[index].tolist(), starts.tolist(), ends.tolist(), strict=True
                )
            ]
        )
        if pa.types.is_fixed_size_binary(t):
            return pa.Array.from_buffers(t, len(index), [None, pa.py_buffer(values)])
        buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(values)]
        return pa.Array.from_buffers(t, len(index), buffers)


def _groups_text(rows: list[int]) -> str:
    shown = ", ".join(map(str, rows[:4])) + (", ..." if len(rows) > 4 else "")
    return f"{sum(rows)} rows in {len(rows)} row groups ({shown})"


def open_partition(store: Store, name: str, fmt: str) -> Any:
    """A partition file opened for reading: Arrow IPC memory-mapped on a local disk (so a row
    costs only its bytes), Parquet with its page checksums checked."""
    return _reader(_open_file(store, name, fmt), fmt)


def _allow_open_files(count: int) -> int:
    """Raise this process's limit of open files (the soft one, up to the hard one) to ``count``;
    the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= count:
        return count if soft == resource.RLIM_INFINITY else soft
    limit = count if hard == resource.RLIM_INFINITY else min(count, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    return limit


def _open_file(store: Store, name: str, fmt: str) -> Any:
    if fmt == "arrow":
        return store.input_file(name)
    if store.local:  # reads with pread: one open file serves every thread
        return pa.OSFile(store.path(name))
    return store.fs.open_input_file(store.path(name))


def _reader(raw: Any, fmt: str) -> Any:
    if fmt == "arrow":
        return pa.ipc.open_file(raw)
    return pq.ParquetFile(raw, page_checksum_verification=True, pre_buffer=False)


def group_rows(handle: Any) -> list[int]:
    """The row count of each row group (Parquet) or record batch (Arrow IPC) of an open file."""
    if isinstance(handle, pq.ParquetFile):
        return [handle.metadata.row_group(i).num_rows for i in range(handle.num_row_groups)]
    return [handle.get_batch(i).num_rows for i in range(handle.num_record_batches)]
