"""A local disk cache of what a dataset on object storage (or in Parquet) is read from, kept as
memory-mapped Arrow IPC files, so that reads after the first run at the speed of a local mapped
file and the pages are shared by every process on the machine.

The unit is a *part*: consecutive row groups of one partition, fetched with one ranged read
(:mod:`recordmill.read.segments`), checked against the manifest's CRC-32C, decoded, and written as
one Arrow IPC file named for the part and for the CRC-32C of that file's own bytes. How the
folder is shared, safely:

- One folder per dataset version (its files' checksums are in the folder's name): a dataset
  overwritten on S3 never serves parts of the version before.
- A part is filled under an exclusive ``flock`` of its own lock file, so two processes never
  fetch it at once; the file is written under a temporary name and renamed into place whole, so
  a process killed while filling leaves nothing that another trusts (and the kernel drops its
  lock). A cached file is checked against the CRC-32C in its name before a row of it is
  returned, once a machine (:mod:`recordmill.read.machine.checked`); a damaged one is fetched again.
- Bounded: after each fill, parts are removed, least recently used first (each process touches
  the part's marker in ``locks/`` when it opens it), until the folder holds at most ``limit``
  bytes, the new part aside. Shuffled epochs are ordered so that what is needed next is what
  was used last (:mod:`recordmill.read.order`).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from recordmill.dataset.checksum import crc32c
from recordmill.dataset.sizes import human_size
from recordmill.dataset.storage import fd_path
from recordmill.errors import ConfigError, OutputError, RecordmillWarning
from recordmill.read.files import Files, check_structure
from recordmill.read.machine.cache_folder import (
    CACHE_DIR_ENV,
    Folder,
    UnsafeCache,
    default_cache_dir,
    log_once,
)
from recordmill.read.machine.checked import Checked, check_once, file_key, log_checked
from recordmill.read.options import CachePlace, cache_limit_bytes

__all__ = ["CACHE_DIR_ENV", "DiskCache", "Part", "cache_location", "plan_parts"]
from recordmill.read.segments import Segments

# A part holds about 1/64 of the dataset's bytes, within these bounds (and at least one group):
# few requests per epoch for large datasets, several parts to shuffle among for small ones.
MAX_PART_BYTES = 64 << 20
PARTS_PER_DATASET = 64
# Parts a process keeps mapped at once (each holds a file descriptor).
MAX_MAPPED = 256


@dataclass(frozen=True)
class Part:
    """Row groups ``first`` to ``stop`` of partition ``partition`` (global groups ``groups``),
    global rows ``rows``, ``stored`` bytes in the source file."""

    partition: int
    first: int
    stop: int
    groups: range
    rows: range
    stored: int

    @property
    def name(self) -> str:
        return f"{self.partition:05d}-{self.first:06d}-{self.stop:06d}"


def plan_parts(files: Files) -> list[Part]:
    """The dataset's row groups in runs of about the part size, never across partitions."""
    files.ready()
    entries = files.manifest["partitions"]
    total = sum(e["bytes"] for e in entries)
    target = min(MAX_PART_BYTES, max(1, total // PARTS_PER_DATASET))
    parts: list[Part] = []
    g = row = 0
    for p, entry in enumerate(entries):
        offsets = entry["group_offsets"]
        first = 0
        for i in range(1, len(offsets)):
            if offsets[i] - offsets[first] >= target or i == len(offsets) - 1:
                count = sum(files.groups[g + k].rows for k in range(i - first))
                parts.append(
                    Part(
                        p,
                        first,
                        i,
                        range(g, g + i - first),
                        range(row, row + count),
                        offsets[i] - offsets[first],
                    )
                )
                g, row, first = g + i - first, row + count, i
    return parts


class DiskCache:
    """The cached parts of one dataset version in ``folder``, at most ``limit`` bytes."""

    def __init__(
        self,
        files: Files,
        segments: Segments,
        place: CachePlace,
        checked: Checked | None = None,
    ):
        self.files = files
        self.segments = segments
        self.parts = plan_parts(files)
        self.part_of = [k for k, part in enumerate(self.parts) for _ in part.groups]
        self.folder = Folder(Path(place.folder).expanduser().absolute(), _version_key(files))
        self.root = self.folder.root
        segments.keep_footers(self.folder)
        # Only a limit given (the same on every rank) shapes the block shuffle's windows.
        self.chosen = place.limit is not None
        self.limit = cache_limit_bytes(place.limit, self.folder.parts.free())
        # Made by default (no cache_dir given): shuffles and random reads use it, passes in
        # order read the files themselves.
        self.implicit = place.default
        self._largest: int | None = None
        if not self.implicit:  # a cache_dir given: its limit checked now (else at first use)
            _check_limit(self)
        self.fetched_parts = 0  # this process's fetches, for tests and benchmarks
        self._pid = -1
        self._own()  # the mapped parts, their lock, the folder's last change seen
        self._said: set[str] = set()  # warnings said once
        self._checked: set[str] = set()  # cached files whose bytes matched, in this process
        self.checked = checked  # and on this machine, by any process (read/machine/checked.py)

    @property
    def largest(self) -> int:
        """The largest part's bytes as cached (Parquet: from the footers, read when first asked)."""
        if self._largest is None:
            self._largest = max((_cached_bytes(self, part) for part in self.parts), default=0)
            _check_limit(self)
        return self._largest

    @property
    def capacity(self) -> int:
        """How many parts the cache holds at once, whatever their sizes."""
        return max(1, self.limit // max(1, self.largest))

    def order_blocks(self) -> int:
        """How many parts a shuffled order is drawn for (0: a full permutation): the capacity
        of a cache too small for every part, where the user chose ``cache_limit``; a warning,
        once, when the default limit is too small for the dataset."""
        if self.capacity >= len(self.parts):
            return 0
        if self.chosen:
            return self.capacity
        if self.capacity < len(self.parts) and "limit" not in self._said:
            self._said.add("limit")
            warnings.warn(
                f"{self.files.store} does not fit the cache's default limit "
                f"({human_size(self.limit)}), so a shuffled epoch fetches parts again and "
                "again: give cache_limit= (the same on every rank) for a shuffle that fetches "
                "each part about once",
                RecordmillWarning,
                stacklevel=3,
            )
        return 0

    def group(self, g: int, columns: list[str]) -> pa.RecordBatch:
        """Global row group ``g`` with ``columns``, from its cached part."""
        k = self.part_of[g]
        return self.batches(k)[g - self.parts[k].groups.start].select(columns)

    def load(self, groups: Iterable[int], pool: ThreadPoolExecutor) -> None:
        """The parts of row groups ``groups`` mapped in this process, those that were not side
        by side in ``pool`` (each may be fetched): a gather then needs no task a group."""
        self._own()
        needed = {self.part_of[g] for g in groups}
        with self._lock:
            # The mapped parts it needs are the last to be let go: a part loaded for it then lets
            # go of one it does not need (whatever the order the last gather used them in),
            # never one it would load again, nor have the disk's eviction count as used later.
            for k in sorted(needed & set(self._open)):
                self._open.move_to_end(k)
            missing = needed - set(self._open)
        list(pool.map(self.batches, sorted(missing)))

    def batches(self, k: int) -> list[pa.RecordBatch]:
        """Part ``k``'s row groups, one batch each: mapped from the cache (fetched first if it
        is not there)."""
        self._own()
        with self._lock:
            if k in self._open:
                self._open.move_to_end(k)
                return self._open[k][1]
        path, batches = _load(self, k)
        with self._lock:
            self._open[k] = (path, batches)
            # A part another process removed stays readable while mapped, but its disk space
            # is not freed until every process lets it go: those are let go at the next load
            # after the folder changed (a stat of the folder, then of each mapped part only
            # then), and a process keeps at most as many parts mapped as the cache holds.
            if self._seen != (changed := self.folder.parts.changed()):
                self._seen = changed
                for gone in [j for j, (p, _) in self._open.items() if p and not self.folder.has(p)]:
                    del self._open[gone]
            while len(self._open) > min(self.capacity, MAX_MAPPED):
                self._open.popitem(last=False)
        return batches

    def _own(self) -> None:
        if self._pid != os.getpid():  # a forked DataLoader worker: a lock of its own
            self._pid, self._lock, self._seen = os.getpid(), threading.Lock(), -1
            self._open: OrderedDict[int, tuple[str | None, list[pa.RecordBatch]]] = OrderedDict()


# --- filling: DiskCache.batches()'s part, mapped from the folder, fetched into it first -----------


def _load(cache: DiskCache, k: int) -> tuple[str | None, list[pa.RecordBatch]]:
    """Part ``k``'s batches, and the cached file they are mapped from (None: from the
    source, the cache being full)."""
    part = cache.parts[k]
    try:
        return _load_cached(cache, part)
    except OSError as e:  # the folder cannot be used now (no file descriptor left, ...)
        _warn(cache, e)
        return None, _fetch(cache, part)  # from the source, which says its own errors


def _load_cached(cache: DiskCache, part: Part) -> tuple[str | None, list[pa.RecordBatch]]:
    found = cache.folder.find(part.name)
    if found is not None and (batches := _map(cache, found)) is not None:
        return found, batches
    with cache.folder.locked(part.name):
        found = cache.folder.find(part.name, fresh=True)  # another process filled it?
        if found is not None and (batches := _map(cache, found)) is not None:
            return found, batches
        batches = _fetch(cache, part)
        try:
            path = _write(cache, part, batches)
        except OSError as e:  # a full disk: read on from the source, say so once
            _warn(cache, e)
            return None, batches
        cache.folder.evict(path, cache.limit)
    mapped = _map(cache, path)
    return (path, mapped) if mapped is not None else (None, batches)


def _fetch(cache: DiskCache, part: Part) -> list[pa.RecordBatch]:
    data = cache.segments.fetch(part.partition, part.first, part.stop)
    cache.segments.check(part.partition, part.first, part.stop, data)
    batches = cache.segments.decode(part.partition, part.first, part.stop, data, cache.files.names)
    cache.fetched_parts += 1
    schema = cache.files.schema
    return [b if b.schema.equals(schema) else _cast(b, schema) for b in batches]


def _map(cache: DiskCache, name: str) -> list[pa.RecordBatch] | None:
    """A cached part's batches (a regular file of this user's, as opened), its bytes checked
    against the CRC-32C in its name and its structure checked; None (and the file
    removed) when they do not match or it is gone."""
    try:
        fd = cache.folder.parts.open(name, os.O_RDONLY)
        try:
            info = os.fstat(fd)
            data = pa.py_buffer(mmap.mmap(fd, info.st_size, access=mmap.ACCESS_READ))
        finally:
            os.close(fd)
        reader = pa.ipc.open_file(pa.BufferReader(data))
        batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        if name not in cache._checked:
            _check_part(cache, name, info, data, batches)
        cache.folder.touch(name)  # recently used: the last to be evicted
        return batches
    except FileNotFoundError:
        return None
    except (OSError, ValueError, pa.ArrowInvalid, OutputError, UnsafeCache):
        cache.folder.parts.unlink(name)  # damaged (or not ours): fetched again
        return None


def _warn(cache: DiskCache, error: OSError) -> None:
    if "full" not in cache._said:
        cache._said.add("full")
        warnings.warn(
            f"cannot fill the cache in {cache.root}: {error.strerror or error}; reading on "
            f"from {cache.files.store}",
            RecordmillWarning,
            stacklevel=4,
        )


def _write(cache: DiskCache, part: Part, batches: list[pa.RecordBatch]) -> str:
    """Part ``part``'s batches as its cached file: written aside, named for its CRC-32C."""
    partial = f".{part.name}.{os.getpid()}.partial"
    fd = cache.folder.create(partial)
    try:
        # pyarrow's own file (an error in a Python file's close aborts pyarrow 19), of the
        # file just created, never of whatever its name is now
        with pa.OSFile(fd_path(fd), "wb") as sink, pa.ipc.new_file(sink, cache.files.schema) as w:
            for batch in batches:
                w.write_batch(batch)
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as m:
            crc = crc32c(m)
        name = f"{part.name}.{crc:08x}.arrow"
        cache.folder.parts.replace(partial, name)
        # Its bytes were just summed from the disk: checked (for this process only: other
        # processes check it once it settled, read/machine/checked.py).
        cache._checked.add(name)
    finally:
        os.close(fd)
        cache.folder.parts.unlink(partial)
    return name


def _check_limit(cache: DiskCache) -> None:
    if cache.parts and cache.limit < cache.largest:
        raise ConfigError(
            f"cache_limit {human_size(cache.limit)} is smaller than one part of "
            f"{cache.files.store} ({human_size(cache.largest)}): give at least "
            f"cache_limit={cache.largest}"
        )


def _cached_bytes(cache: DiskCache, part: Part) -> int:
    """A part's bytes as cached: Arrow IPC as stored, Parquet as decoded (its footer's
    uncompressed sizes), plus room for the IPC framing."""
    if cache.files.arrow:
        return part.stored + 2048
    footer = cache.segments.footer(part.partition)
    size = sum(footer.row_group(i).total_byte_size for i in range(part.first, part.stop))
    return size + 512 * (part.stop - part.first) + 2048


def _check_part(
    cache: DiskCache,
    name: str,
    info: os.stat_result,
    data: pa.Buffer,
    batches: list[pa.RecordBatch],
) -> None:
    """A cached file's bytes against the CRC-32C in its name, and its batches' structure (what
    a bad offset would make a read of memory past them), unless this machine checked this
    very file (read/machine/checked.py) already."""

    def check() -> None:
        if cache.files.checksums and crc32c(data) != int(name.split(".")[1], 16):
            raise pa.ArrowInvalid("checksum")
        for i, batch in enumerate(batches):
            check_structure(batch, f"{cache.root / 'parts' / name}, record batch {i}")
        log_checked(data.size)

    where = cache.root / "parts" / name
    key = None if cache.checked is None else file_key(where, name, info)
    check_once(cache.checked, key, 0, check)
    cache._checked.add(name)


def cache_location(
    cache_dir: str | os.PathLike[str] | bool | None,
    cache_limit: int | str | float | None,
    files: Files,
) -> CachePlace | None:
    """Where the disk cache is: the ``cache_dir`` given, else ``RECORDMILL_CACHE_DIR``, else
    for Parquet or object storage (whose shuffles are slow without one) the user's cache folder
    (the default); None for none (``cache_dir=False``, or a local Arrow IPC dataset, read where
    it is)."""
    if cache_dir is False:
        return None
    if cache_dir is None or cache_dir is True:
        cache_dir = os.environ.get(CACHE_DIR_ENV) or None
    if cache_dir is not None:
        return CachePlace(os.fspath(cache_dir), cache_limit, default=False)
    if files.arrow and files.store.local:
        return None
    folder = str(default_cache_dir())
    log_once(
        f"shuffled and random reads of {files.store} go through the disk cache in {folder} "
        "(cache_dir=False: none; cache_dir=FOLDER: another)"
    )
    return CachePlace(folder, cache_limit, default=True)


def _version_key(files: Files) -> str:
    """The folder of one dataset version: its location and its files' checksums."""
    digest = hashlib.sha256(str(files.store).encode())
    for entry in files.manifest["partitions"]:
        digest.update(f"{entry['file']}:{entry['checksum']}".encode())
    return f"{files.store.name or 'dataset'}-{digest.hexdigest()[:16]}"


def _cast(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    return pa.Table.from_batches([batch]).cast(schema).combine_chunks().to_batches()[0]


def every_part(cache: DiskCache) -> list[list[pa.RecordBatch]] | None:
    """Each part's batches in order, when this process has every part of ``cache`` mapped;
    else None."""
    cache._own()
    with cache._lock:
        if len(cache._open) < len(cache.parts):
            return None
        return [cache._open[k][1] for k in range(len(cache.parts))]
