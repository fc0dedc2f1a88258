"""Row groups as record batches, for every read: memory-mapped Arrow IPC batches, which cost
nothing to keep, or Parquet row groups (and anything read from object storage) decoded and kept
in a cache bounded by bytes, least recently used first out. Decoding runs in threads (pyarrow
releases the GIL), so a pass can decode ahead of the rows it hands out.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from recordmill.errors import ConfigError, RecordmillWarning
from recordmill.read.files import Files
from recordmill.read.machine.cache import DiskCache
from recordmill.read.machine.cache_folder import UnsafeCache
from recordmill.read.machine.checked import Checked, check_once, file_key, log_checked
from recordmill.read.machine.shared_orders import Orders
from recordmill.read.options import CachePlace, ReadOptions
from recordmill.read.segments import Segments

# Parquet row groups decoded at once; pyarrow decodes without the GIL, so threads use every core.
READ_THREADS = max(1, min(4, os.cpu_count() or 1))


@dataclass
class ReadStats:
    """How much decoding the reads needed: ``groups_read`` counts Parquet row-group decodes;
    ``bytes_checked`` the bytes this process summed against their checksums."""

    groups_read: int = 0
    rows_read: int = 0
    bytes_checked: int = 0


class Groups:
    """Row group ``g`` of a dataset with the columns of a schema, from where it is cheapest."""

    def __init__(
        self,
        files: Files,
        cache_limit: int,
        read_ahead_bytes: int,
        place: CachePlace | None = None,
        checked: Checked | None = None,
    ):
        self.files = files
        # What this machine checked already, shared by its processes (None: this process's own).
        self.checked = checked
        # Where large epoch orders are drawn once a machine (read/machine/shared_orders.py).
        self.orders = Orders(place.folder if place is not None else None)
        self.segments = Segments(files)
        # Arrow IPC on a local disk is memory-mapped: its batches cost nothing to keep.
        self.mapped = files.arrow and files.store.local
        # Anything else, given a cache folder (and written with group checksums), is read from
        # parts kept there as mapped Arrow IPC.
        self.disk: DiskCache | None = None
        if place is not None and not self.mapped and self.segments.available:
            try:
                self.disk = DiskCache(files, self.segments, place, checked=checked)
            except UnsafeCache as e:  # another user's: read on from the dataset itself
                warnings.warn(f"{e}; reading from {files.store}", RecordmillWarning, stacklevel=4)
            except ConfigError as e:  # the default folder cannot be made: read on without
                if not place.default:
                    raise
                warnings.warn(f"{e}; reading from {files.store}", RecordmillWarning, stacklevel=4)
        self.cache_limit = cache_limit
        self.read_ahead_bytes = read_ahead_bytes
        self.stats = ReadStats()
        self.opened: tuple[str, ReadOptions] | None = None  # open()'s, to open it elsewhere
        self.rejects: list | None = None  # with open(on_error="skip"): the rows left out
        self._pid = -1
        self._fresh()

    def _fresh(self) -> None:
        """Caches and threads belong to one process: a forked DataLoader worker starts its own
        (the parent's threads do not exist there)."""
        self._pid = os.getpid()
        self._batches: dict[tuple[int, tuple[str, ...]], pa.RecordBatch] = {}
        self._cache: OrderedDict[tuple[int, tuple[str, ...]], pa.RecordBatch] = OrderedDict()
        self._cache_bytes = 0
        self._verified: set[int] = set()  # mapped groups whose bytes matched their checksum
        self._keys: dict[int, str | None] = {}  # each partition file's key in ``checked``
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def ready(self) -> Groups:
        """The row-group map built, and this process's own caches and threads."""
        if self._pid != os.getpid():
            self._fresh()
        self.files.ready()
        return self

    @property
    def pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="recordmill-read")
        return self._pool

    def group(
        self,
        g: int,
        schema: pa.Schema,
        *,
        keep: bool = True,
        cached: bool = True,
    ) -> pa.RecordBatch:
        """Row group ``g`` with ``schema``'s columns. Arrow on a local disk: a memory-mapped
        batch, nothing decoded, its bytes checked against the manifest once per process (a
        dataset written before group checksums were recorded: its columns' CRC-32s).
        Otherwise from the cache, or read (and cached when ``keep``); bytes fetched are checked
        each time they are fetched, and Parquet checks its pages' checksums as it decodes.
        ``cached=False``: not through the disk cache (a pass in order, past a default one)."""
        key = (g, tuple(schema.names))
        if self.disk is not None and cached:  # mapped from the disk cache: nothing to keep
            return self.disk.group(g, schema.names)
        if self.mapped:
            batch = self._batches.get(key)
            if batch is None:
                batch = self._batches[key] = self._read(g, schema)
            self._check_mapped(g, batch)
            return batch
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        batch = self._read(g, schema)
        if self.files.arrow and not self.segments.available:
            self.files.verify(g, batch, again=True)
        with self._lock:  # a read-ahead thread may be decoding beside us
            self.stats.groups_read += 1
            self.stats.rows_read += batch.num_rows
            if keep:
                self._keep(key, batch)
        return batch

    def _keep(self, key: tuple[int, tuple[str, ...]], batch: pa.RecordBatch) -> None:
        self._cache[key] = batch
        self._cache_bytes += batch.nbytes
        while self._cache_bytes > self.cache_limit and len(self._cache) > 1:
            _, dropped = self._cache.popitem(last=False)
            self._cache_bytes -= dropped.nbytes

    def is_checked(self, g: int) -> bool:
        """Whether mapped group ``g`` needs no check before it is read: this process or the
        machine checked its bytes, or there is nothing to check them against."""
        if not self.segments.available:
            return False  # a dataset from before group checksums: its columns are checked
        if g in self._verified or not self.files.checksums:
            return True
        key = self._key(self.files.groups[g].partition)
        return (
            self.checked is not None
            and key is not None
            and self.checked.seen(key, self.files.groups[g].index)
        )

    def _check_mapped(self, g: int, batch: pa.RecordBatch) -> None:
        if not self.segments.available:  # an older layout: random access is checked too
            self.files.verify(g, batch)
            return
        if g in self._verified or not self.files.checksums:
            return
        group = self.files.groups[g]
        key = self._key(group.partition)

        def check() -> None:
            data = self.segments.fetch(group.partition, group.index, group.index + 1)
            self.segments.check(group.partition, group.index, group.index + 1, data)
            self.stats.bytes_checked += len(data)
            log_checked(len(data))

        check_once(self.checked, key, group.index, check)  # unless the machine did already
        self._verified.add(g)

    def _key(self, partition: int) -> str | None:
        """The partition file's key in the machine's record (as the file is now)."""
        if partition not in self._keys:
            entry = self.files.manifest["partitions"][partition]
            path = self.files.store.path(entry["file"])
            self._keys[partition] = (
                None if self.checked is None else file_key(path, entry["checksum"])
            )
        return self._keys[partition]

    def _read(self, g: int, schema: pa.Schema) -> pa.RecordBatch:
        if self.segments.available and not self.files.store.local:
            return self.segments.group(g, schema.names)
        batch = self.files.read(g, schema.names)
        if not self.files.arrow and batch.schema != schema:
            batch = pa.Table.from_batches([batch]).cast(schema).combine_chunks().to_batches()[0]
        return batch
