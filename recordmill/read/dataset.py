"""Reading a written dataset back: ``recordmill.open(path)`` gives a :class:`Dataset`.

Rows are found from the manifest's row counts and each file's footer, without scanning. Arrow IPC
partitions are memory-mapped: ``ds[i]`` touches only that row's bytes, and pages stay in the OS's
page cache (shared by DataLoader workers), not in the process's own memory. Parquet row groups
are decoded whole, so they are kept in a cache bounded by bytes (``cache_bytes``); a sequential
pass decodes a few groups ahead in threads (``read_ahead_bytes``) and does not fill the cache.
Shuffled iteration is a true seeded permutation of all rows, gathered a window at a time
(see :meth:`Dataset.iter_batches`). Where each part lives: ``files`` (the open files and their
checks), ``groups`` (row groups, cached), ``gather`` (rows in any order), ``passes`` (how a pass
reads), ``iteration`` (a view's passes and gathers, and each batch's ``decode``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from recordmill.dataset.columns import row_getter, to_numpy
from recordmill.dataset.manifest import arrow_schema
from recordmill.dataset.rows import bounds
from recordmill.dataset.storage import Store
from recordmill.errors import ColumnError
from recordmill.read import formats, iteration, order, passes, tokens
from recordmill.read.files import group_rows, open_files, open_partition
from recordmill.read.gather import Gatherer, Taken
from recordmill.read.groups import Groups, ReadStats
from recordmill.read.machine.cache import DiskCache, cache_location, plan_parts
from recordmill.read.machine.checked import Checked
from recordmill.read.options import (
    CACHE_BYTES,
    READ_AHEAD_BYTES,
    CacheLimit,
    ReadOptions,
    check_cache_limit,
)
from recordmill.read.skips import ReadReject, skips

__all__ = ["Dataset", "ReadStats", "group_rows", "open", "open_partition", "to_numpy"]

_BY_ROW = "a Dataset is indexed by row number or slice; for a column"


def open(
    path: str,
    *,
    filesystem: pafs.FileSystem | None = None,
    decode: Mapping[str, Callable[[Any], Any]] | None = None,
    cache_bytes: int = CACHE_BYTES,
    read_ahead_bytes: int = READ_AHEAD_BYTES,
    checksums: bool = True,
    cache_dir: str | os.PathLike[str] | bool | None = None,
    cache_limit: CacheLimit = None,
    version: int | None = None,
    on_error: str = "raise",
) -> Dataset:
    """Open a dataset written by recordmill: a local path or any pyarrow filesystem URI.

    ``version``: the rows of that version of a dataset that grew by ``--append`` (those of the
    first ``version`` writes, in order); by default the current one. ``ds.version`` says which
    version a reader holds: it keeps reading it to the end whatever is appended meanwhile.

    ``decode`` maps field names to functions applied to their values when rows are returned as
    Python/numpy (for example ``{"data": recordmill.decode.image}``). ``cache_bytes`` bounds the
    decoded Parquet row groups kept for random access and shuffles (256 MiB by default; Arrow IPC
    needs none); ``read_ahead_bytes`` bounds what a sequential pass decodes ahead (64 MiB).
    ``checksums=False`` skips the checks of the bytes read against the manifest's checksums
    (Parquet's page checksums are checked always).

    ``cache_dir`` keeps what a dataset on object storage, or in Parquet, is read from on local
    disk as memory-mapped Arrow IPC, fetched and checked once and shared by every process on
    the machine, at most ``cache_limit`` (bytes, a size such as ``"50GB"``, or a fraction of the
    free space of its disk; default: half of it);
    shuffles then take the rows in an order that fetches each part about once per epoch (see
    :meth:`Dataset.shuffled`). By default (``RECORDMILL_CACHE_DIR``, else the user's cache
    folder, said once in the log) shuffles and random reads go through it and passes in order
    read the files; ``cache_dir=False``: no cache. Local Arrow IPC is read where it is.

    ``on_error="skip"``: a row whose ``decode`` function raises is left out of ``rows()``,
    ``iter_rows()`` and ``iter_batches()`` (whose batches may then be short) and listed in
    ``ds.read_rejects``; ``ds[i]`` still raises. The PyTorch loaders keep batches full.
    """
    _check_arguments(version, on_error, cache_limit)
    store = Store.at(path) if filesystem is None else Store(filesystem, str(path).rstrip("/"))
    files = open_files(store, checksums, version=version)
    place = cache_location(cache_dir, cache_limit, files)
    checked = Checked.at(place and place.folder) if checksums else None  # on this machine
    groups = Groups(files, cache_bytes, read_ahead_bytes, place, checked)
    # How to open it again in another process (a Dataset pickled into a DataLoader worker).
    version = int(files.manifest.get("version", 1))
    cache_dir = False if cache_dir is False else (place and place.given())
    given = (filesystem, cache_bytes, read_ahead_bytes, checksums, cache_dir, cache_limit)
    groups.opened = (os.fspath(path), ReadOptions(*given, version, on_error))
    groups.rejects = [] if on_error == "skip" else None
    return _whole(groups, dict(decode or {}))


def _whole(groups: Groups, decode: dict[str, Callable[[Any], Any]]) -> Dataset:
    """Every row of the dataset ``groups`` reads, ``decode`` checked against its columns."""
    schema = arrow_schema(groups.files.manifest)
    unknown = [name for name in decode if name not in schema.names]
    if unknown:
        raise ColumnError(
            f"decode= names no column {unknown[0]!r}; columns: {', '.join(schema.names)}"
        )
    return Dataset(groups, schema, 0, groups.files.manifest["total_rows"], decode)


def _check_arguments(version: int | None, on_error: str, cache_limit: Any) -> None:
    if version is not None and (type(version) is not int or version < 1):  # not bool, not 2.0
        raise ValueError(
            f"version must be a whole number from 1 (recordmill history lists them), got "
            f"{type(version).__name__} {version!r}"
        )
    skips(on_error)
    check_cache_limit(cache_limit)


class Dataset:
    """Rows ``start`` to ``stop`` of a written dataset, with ``schema``'s columns."""

    def __init__(
        self,
        groups: Groups,
        schema: pa.Schema,
        start: int,
        stop: int,
        decode: dict[str, Callable[[Any], Any]],
    ):
        self._groups = groups
        self.schema = schema
        self.manifest: dict[str, Any] = groups.files.manifest
        self.version = int(self.manifest.get("version", 1))  # it reads (see recordmill history)
        self._start = start
        self._stop = stop
        self._decode = {k: v for k, v in decode.items() if k in schema.names}
        self._getters = [(f.name, row_getter(f), self._decode.get(f.name)) for f in schema]
        self._gatherer = Gatherer(groups, schema)
        self._last: tuple[int, list[pa.Array]] = (-1, [])
        self._per_row: int | None = None

    # --- what it is ---------------------------------------------------------------------------

    @property
    def stats(self) -> ReadStats:
        return self._groups.stats

    @property
    def cache(self) -> DiskCache | None:  # the disk cache it reads from (cache_dir), if any
        return self._groups.disk

    @property
    def read_rejects(self) -> list[ReadReject]:  # the rows left out (open(on_error="skip"))
        return self._groups.rejects or []

    def __len__(self) -> int:
        return self._stop - self._start

    def __repr__(self) -> str:
        store = self._groups.files.store
        return f"<recordmill.Dataset {store}: {len(self):,} rows, columns {self.schema.names}>"

    def __reduce__(self) -> tuple[Any, ...]:  # files do not travel: opened again (_reopen)
        where = (self.schema.names, self._start, self._stop)
        return (_reopen, (self._groups.opened, self._decode, where))

    def warm(self) -> Dataset:
        """Load now what reading needs (the row-group map, pyarrow's lazy imports: pandas, 0.2 s)
        so that processes forked afterwards, such as DataLoader workers, do not each pay."""
        self._groups.ready()
        pa.array([0])
        return self

    # --- views --------------------------------------------------------------------------------

    def select(self, columns: Sequence[str]) -> Dataset:
        """The same rows with only ``columns``."""
        missing = [c for c in columns if c not in self.schema.names]
        if missing:
            raise ColumnError(f"no column {missing[0]!r}; columns: {', '.join(self.schema.names)}")
        schema = pa.schema([self.schema.field(c) for c in columns])
        return Dataset(self._groups, schema, self._start, self._stop, self._decode)

    def shard(self, rank: int, world_size: int) -> Dataset:
        """Shard ``rank`` of ``world_size``: disjoint, together covering every row, sizes
        differing by at most one; consecutive rows, so each shard reads few row groups."""
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in 0..{world_size - 1}, got {rank}")
        lo, hi = bounds(len(self), world_size)[rank]
        return Dataset(self._groups, self.schema, self._start + lo, self._start + hi, self._decode)

    # --- reading ------------------------------------------------------------------------------

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, (str, slice)):  # (a row, the hot path, is read here)
            return _sliced(self, key)
        index = int(key)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"row {key} is out of range for a dataset of {len(self)} rows")
        groups = self._groups.ready()
        g, local = groups.files.locate(self._start + index)
        if self._last[0] != g:  # the arrays of the group read last, kept: wrapping them costs
            self._last = (g, groups.group(g, self.schema).columns)
        return _row(self._last[1], self._getters, local)

    def take(self, indices: Sequence[int] | np.ndarray) -> pa.Table:
        """The given rows (negative indices count from the end), in the given order."""
        return iteration.taken(self, self._global(indices))

    def rows(self, indices: Sequence[int] | np.ndarray) -> list[dict[str, Any]]:
        """The row dicts ``ds[i]`` gives, for many rows at once (a DataLoader batch)."""
        rows = self._global(indices)
        got = iteration.rows_at(self, rows, keep=True)
        return formats.decoded(got, iteration.decoding(self, rows))

    def gather(self, indices: Sequence[int] | np.ndarray) -> pa.RecordBatch:
        """The rows ``rows`` reads, as one Arrow batch of newly made arrays, not decoded."""
        return iteration.gather_batch(self, self._global(indices), keep=True)

    def _global(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        rows = np.asarray(indices, dtype=np.int64)
        rows = np.where(rows < 0, rows + len(self), rows)
        if rows.size and (rows.min() < 0 or rows.max() >= len(self)):
            raise IndexError(f"indices out of range for a dataset of {len(self)} rows")
        return rows + self._start

    def to_arrow(self) -> pa.Table:
        """Every row of this view as one Arrow table."""
        return iteration.range_table(self, self._start, self._stop)

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
        if type(batch_size) is not int or batch_size < 1:
            raise ValueError(f"batch_size must be a whole number from 1, got {batch_size!r}")
        formats.check_format(format)
        view = self.select(columns) if columns is not None else self
        if shuffle:
            yield from iteration.shuffled_batches(view, batch_size, seed, format)
        else:
            yield from iteration.batches_in_order(view, batch_size, format)

    token_blocks = tokens.token_blocks  # packed blocks of a column of token ids

    def shuffled(self, seed: int, epoch: int = 0, blocks: int | None = None) -> np.ndarray:
        """This view's rows (0 to len - 1) in epoch ``epoch``'s order (:mod:`~.read.order`): a
        block shuffle for ``blocks`` cached parts (:meth:`order_blocks`), 0: a permutation."""
        blocks = self.order_blocks() if blocks is None else blocks
        return _shuffled(self._groups, self._start, self._stop, seed, epoch, blocks)

    def order_blocks(self) -> int:
        """The cache's capacity in parts that shapes shuffles (``DiskCache.order_blocks``)."""
        disk = self._groups.ready().disk
        return 0 if disk is None else disk.order_blocks()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.iter_rows()

    def iter_rows(
        self, indices: Sequence[int] | np.ndarray | None = None, batch_size: int = 1024
    ) -> Iterator[dict[str, Any]]:
        """Row dicts: all rows in order, or the rows at ``indices``, in that order (gathered a
        window at a time, as a shuffled pass is)."""
        return iteration.iter_rows(self, indices, batch_size)

    # --- internals (the bulk reads are iteration.py's) -----------------------------------------

    def _window(self, batch_size: int) -> int:  # rows gathered at once by a shuffle
        return passes.window_rows(self._groups, batch_size, self._row_bytes())

    def _row_bytes(self) -> int:
        self._per_row = self._per_row or passes.row_bytes(self._groups, self.schema)
        return self._per_row


def _sliced(ds: Dataset, key: str | slice) -> pa.Table:
    """``ds[a:b]`` (a table), or the error of ``ds["column"]``."""
    if isinstance(key, str):
        raise TypeError(f"ds[{key!r}]: {_BY_ROW}: ds.select([{key!r}]) or ds.to_arrow()[{key!r}]")
    start, stop, step = key.indices(len(ds))
    if step != 1:
        return ds.take(range(start, stop, step))
    return iteration.range_table(ds, ds._start + start, ds._start + max(start, stop))


def undecoded(ds: Dataset) -> tuple[Dataset, dict[str, Callable[[Any], Any]]]:
    """The same rows without their ``decode=`` functions, and those functions (what a reader
    that decodes row by row, to skip a row that fails, reads through)."""
    return Dataset(ds._groups, ds.schema, ds._start, ds._stop, {}), dict(ds._decode)


def _reopen(
    opened: tuple[str, ReadOptions], decode: dict[str, Any], view: tuple[Any, ...]
) -> Dataset:
    """A pickled :class:`Dataset` opened again: the same version, columns and rows (open files
    and memory maps do not travel to another process)."""
    names, start, stop = view
    path, options = opened
    ds = open(path, decode=decode, **options.given()).select(names)
    return Dataset(ds._groups, ds.schema, start, stop, ds._decode)


def _shuffled(
    groups: Groups, start: int, stop: int, seed: int, epoch: int, blocks: int
) -> np.ndarray:
    """Rows ``start`` to ``stop`` (as 0 to n - 1) in a shuffled order (see Dataset.shuffled)."""
    if blocks == 0:
        return order.permutation(stop - start, seed, epoch, groups.orders)
    disk = groups.ready().disk
    parts = disk.parts if disk is not None else plan_parts(groups.files)
    spans = order.spans([part.rows for part in parts], start, stop)
    return order.block_order(spans, blocks, seed, epoch, groups.orders)


def _row(columns: list[pa.Array], getters: list[Any], local: int) -> dict[str, Any]:
    """Row ``local`` of a group's ``columns``, each value got (and decoded) as ``getters`` say."""
    row = {}
    for column, (name, get, decode) in zip(columns, getters, strict=True):
        value = get(column, local)
        row[name] = decode(value) if decode is not None else value
    return row


def gathered(ds: Dataset, indices: Sequence[int] | np.ndarray) -> list[Taken]:
    """The columns of the rows ``ds.rows`` reads, not decoded: Arrow arrays, a binary column's
    values as ``bytes`` (``Gatherer.values``)."""
    return ds._gatherer.values(ds._global(indices), keep=True)
