"""A dataset's partition files, opened and checked against the manifest, and where each row lies.

Local partitions are all opened when the dataset is opened, so a run that replaces the dataset
(``--overwrite``) cannot change what a reader reads: open files stay readable wherever their folder
goes. Each file's size, its row groups (Parquet) or record batches (Arrow IPC) and its schema are
checked against the manifest before a row of it is returned; Arrow IPC batches carry a CRC-32 per
column that :meth:`Files.verify` checks.
"""

from __future__ import annotations

import bisect
import copy
import errno
import mmap
import os
import resource
import threading
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from recordmill.dataset import manifest as manifest_file
from recordmill.dataset import versions
from recordmill.dataset.checksum import column_crc32
from recordmill.dataset.manifest import arrow_schema
from recordmill.dataset.rows import RowIndex
from recordmill.dataset.storage import Store, open_in
from recordmill.errors import OutputError


@dataclass(frozen=True)
class Group:
    """A row group (Parquet) or record batch (Arrow IPC) of a partition, and its row count."""

    partition: int
    index: int
    rows: int


class Files:
    """The open partition files of one dataset version, and the global row-group map."""

    def __init__(self, store: Store, manifest: dict[str, Any], checksums: bool):
        self.store = store
        self.manifest = manifest
        self.format = manifest["format"]
        self.arrow = self.format == "arrow"
        self.checksums = checksums  # Arrow IPC batches' CRC-32, on sequential/shuffled reads
        self.schema = arrow_schema(manifest).remove_metadata()
        self.names = self.schema.names
        self.groups: list[Group] = []
        self.index = RowIndex([])
        self._starts: list[int] = [0]  # first global row of each group, then the total
        self._pinned = self._pin() if store.local else {}
        self._maps: dict[int, memoryview] = {}
        self._verified: set[tuple[int, str]] = set()  # (group, column) whose checksum matched
        self._valid: set[tuple[int, tuple[str, ...]]] = set()  # Arrow groups' structure checked
        self._build = threading.Lock()
        self._pid = -1
        self._fresh()

    def _fresh(self) -> None:
        """Readers belong to one process: a forked DataLoader worker opens its own (the parent's
        file positions would be shared with it), and on object storage makes its own client (the
        parent's open connections would be shared with it, mixing their replies)."""
        if self._pid not in (-1, os.getpid()) and not self.store.local:
            self.store = Store(copy.deepcopy(self.store.fs), self.store.root)
        self._pid = os.getpid()
        self._handles: dict[tuple[int, int], Any] = {}
        self._build = threading.Lock()

    def ready(self) -> Files:
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
                    groups.append(Group(p, i, n))
                    starts.append(starts[-1] + n)
            self.groups, self._starts = groups, starts
            self.index = RowIndex([g.rows for g in groups])
        return self

    def locate(self, row: int) -> tuple[int, int]:
        """The group holding global ``row``, and the row's number within it."""
        g = bisect.bisect_right(self._starts, row) - 1
        return g, row - self._starts[g]

    def entry(self, g: int) -> dict[str, Any]:
        """The manifest's entry of the partition that holds group ``g``."""
        return self.manifest["partitions"][self.groups[g].partition]

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

    def _pin(self) -> dict[int, Any]:
        """Every partition file, opened; as many as the process may open when that is fewer."""
        count = len(self.manifest["partitions"])
        # Half the process's open files at most: the rest are for everything else.
        budget = _allow_open_files(2 * count + 256) // 2
        return {p: self._open_raw(p) for p in range(min(count, budget))}

    def _open_raw(self, partition: int) -> Any:
        """A partition file, opened for random access, of the size the manifest says."""
        entry = self.manifest["partitions"][partition]
        raw = _opened(self.store, entry, self.format, len(self.manifest["partitions"]))
        if raw.size() != entry["bytes"]:
            raise OutputError(
                f"{self.store}/{entry['file']} holds {raw.size()} bytes, the manifest says "
                f"{entry['bytes']}: the dataset was replaced while it was read (open it again), "
                "or it is damaged (recordmill verify tells more)"
            )
        return raw

    def raw(self, partition: int) -> Any:
        """A local partition's file, opened (pinned when there were files enough)."""
        if partition not in self._pinned:
            self._pinned[partition] = self._open_raw(partition)
        return self._pinned[partition]

    def mapped(self, partition: int) -> memoryview:
        """A local partition's bytes, memory-mapped (the pinned file's: this version's), to take
        runs of from without a copy."""
        if partition not in self._maps:
            entry = self.manifest["partitions"][partition]
            size = entry["bytes"]
            self._maps[partition] = memoryview(self._map(partition, entry) if size else b"")
        return self._maps[partition]

    def _map(self, partition: int, entry: dict[str, Any]) -> mmap.mmap:
        try:
            return _mapped(self, partition, entry)
        except OSError as e:  # a map takes a file descriptor of its own
            if e.errno != errno.EMFILE:
                raise
            raise _too_many(self.store, entry, len(self.manifest["partitions"])) from None

    def handle(self, partition: int) -> Any:
        """This thread's reader of a partition (a pyarrow ParquetFile must not be read from two
        threads at once), checked against the manifest when first opened."""
        key = (partition, threading.get_ident())
        if key not in self._handles:
            raw = self.raw(partition) if self.store.local else self._open_raw(partition)
            handle = _reader(raw, self.format)
            _check_file(self, partition, handle)
            self._handles[key] = handle
        return self._handles[key]

    def verify(self, g: int, batch: pa.RecordBatch, again: bool = False) -> None:
        """Check an Arrow group's columns against the checksums its partition records, once per
        process unless ``again``."""
        group = self.groups[g]
        entry = self.entry(g)
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

    def read(self, g: int, columns: list[str]) -> pa.RecordBatch:
        """Group ``g``'s ``columns`` as they lie in the file: an Arrow batch (memory-mapped on a
        local disk), or a Parquet row group decoded (its pages' checksums checked)."""
        if self.arrow:
            return _arrow_batch(self, g, columns)
        return _parquet_batch(self, g, columns)


def _arrow_batch(files: Files, g: int, columns: list[str]) -> pa.RecordBatch:
    """Group ``g``'s ``columns`` of an Arrow IPC partition, its rows counted and its structure
    checked (once a process for these columns)."""
    group = files.groups[g]
    batch = files.handle(group.partition).get_batch(group.index)
    if batch.num_rows != group.rows:
        raise OutputError(
            f"{files.store}/{files.entry(g)['file']}, record batch {group.index}, holds "
            f"{batch.num_rows} rows, the manifest says {group.rows}: the dataset is "
            "damaged (recordmill verify tells more)"
        )
    batch = batch.select(columns)
    if (g, tuple(columns)) not in files._valid:
        check_structure(
            batch, f"{files.store}/{files.entry(g)['file']}, record batch {group.index}"
        )
        files._valid.add((g, tuple(columns)))
    return batch


def _parquet_batch(files: Files, g: int, columns: list[str]) -> pa.RecordBatch:
    """Group ``g``'s ``columns`` of a Parquet partition, decoded (its pages' checksums checked)."""
    group = files.groups[g]
    try:
        table = files.handle(group.partition).read_row_group(
            group.index, columns=columns, use_threads=False
        )
    except (OSError, pa.ArrowInvalid) as e:
        raise OutputError(
            f"{files.store}/{files.entry(g)['file']}, row group {group.index}, is damaged: {e} "
            "(recordmill verify tells more)"
        ) from e
    return table.combine_chunks().to_batches()[0] if table.num_rows else _empty(table)


def _check_file(files: Files, partition: int, handle: Any) -> None:
    """Refuse a file whose row groups or schema are not those the manifest says (for Arrow
    IPC, the count here; each batch's rows when it is first read, which costs nothing)."""
    entry = files.manifest["partitions"][partition]
    expected = files.expected_rows(partition)
    arrow = isinstance(handle, pa.ipc.RecordBatchFileReader)
    if arrow and expected is not None:
        count = handle.num_record_batches
        found, wanted = f"{count} record batches", f"{len(expected)} record batches"
        ok = count == len(expected)
    else:
        rows = group_rows(handle)
        found = _groups_text(rows)
        wanted = _groups_text(expected) if expected is not None else f"{entry['rows']} rows"
        ok = rows == expected if expected is not None else sum(rows) == entry["rows"]
    schema = handle.schema if arrow else handle.schema_arrow
    if ok and not schema.equals(files.schema):  # never cast to it silently
        found, wanted, ok = "another schema", "the manifest's", False
    if not ok:
        raise OutputError(
            f"{files.store}/{entry['file']} does not match the manifest ({found} found, "
            f"{wanted} expected): the dataset is damaged (recordmill verify tells more)"
        )


def check_structure(batch: pa.RecordBatch, where: str) -> None:
    """Refuse an Arrow IPC batch whose offsets point outside its buffers: pyarrow reads a file
    as it is, and a dataset is data made by others (a checksum it records proves only that the
    file is the one its manifest names). Strings are checked as binary: their offsets are what
    memory safety needs, not their UTF-8 (a bad one is an error when the value is made)."""
    try:
        for column in batch.columns:
            if pa.types.is_string(column.type):
                column = column.view(pa.binary())
            elif pa.types.is_large_string(column.type):
                column = column.view(pa.large_binary())
            column.validate(full=True)
    except pa.ArrowInvalid as e:
        raise OutputError(f"{where} is damaged: {e} (recordmill verify tells more)") from None


def _empty(table: pa.Table) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=table.schema)


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


def _opened(store: Store, entry: dict[str, Any], fmt: str, partitions: int) -> Any:
    """A partition's file opened, or one line: missing (replaced while read), or more files
    than the process may open."""
    try:
        return _open_file(store, entry["file"], fmt)
    except FileNotFoundError:
        raise OutputError(
            f"{store}/{entry['file']} is missing: the dataset was replaced (a run with "
            "--overwrite) or damaged while it was read; open it again"
        ) from None
    except OSError as e:
        if e.errno != errno.EMFILE:
            raise
        raise _too_many(store, entry, partitions) from None


def _mapped(files: Files, partition: int, entry: dict[str, Any]) -> mmap.mmap:
    try:
        return mmap.mmap(files.raw(partition).fileno(), entry["bytes"], access=mmap.ACCESS_READ)
    except AttributeError:  # from fileno()
        pass
    # pyarrow 19 and 20 have no working OSFile.fileno(): the file is opened again by name (a
    # version that replaced it meanwhile fails the checksums of its groups).
    fd = open_in(files.store, entry["file"])
    try:
        return mmap.mmap(fd, entry["bytes"], access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


def _too_many(store: Store, entry: dict[str, Any], partitions: int) -> OutputError:
    return OutputError(
        f"cannot open {store}/{entry['file']}: too many open files (the dataset has "
        f"{partitions:,} partitions; the process may open "
        f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]:,} files: ulimit -n)"
    )


def _open_file(store: Store, name: str, fmt: str) -> Any:
    if fmt == "arrow":
        return store.input_file(name)
    if store.local:  # reads with pread: one open file serves every thread
        return store.opened(pa.OSFile, name)
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


def open_files(store: Store, checksums: bool, tries: int = 5, version: int | None = None) -> Files:
    """The dataset's manifest and (on a local disk) all its files, of one version (``version``,
    or the current one): were they replaced in between (a run with --overwrite or --append
    committed), it is tried again."""
    latest = manifest_file.load(store)
    for _ in range(tries):
        manifest = versions.at_version(latest, version, str(store))
        listed = sum(p["rows"] for p in manifest["partitions"])
        if manifest["total_rows"] != listed:
            raise OutputError(
                f"the manifest of {store} is damaged: total_rows is {manifest['total_rows']}, "
                f"its partitions hold {listed} (recordmill verify tells more)"
            )
        try:
            files, error = Files(store, manifest, checksums), None
        except OutputError as e:
            files, error = None, e
        now = manifest_file.load(store) if store.local else latest
        if now == latest:
            if error is not None:  # the same version: the files are damaged
                raise error
            assert files is not None
            return files
        latest = now
    raise OutputError(f"{store} was replaced {tries} times while it was opened; open it again")
