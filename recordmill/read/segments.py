"""Row groups as the bytes they are in their files: fetched (one ranged read for a run of groups),
checked against the CRC-32C the manifest records for each, and decoded from those bytes.

This is how everything that is not a memory-mapped local file is read: partitions on object
storage, and the parts the disk cache fills. Checking the bytes themselves, rather than what a
library decoded from them, catches damage and also pins the version a reader opened: a partition
replaced on S3 by one of the same size still has other bytes. Datasets written before the manifest
recorded ``group_offsets`` and ``group_crc32c`` have no segments (:attr:`Segments.available` is
False); they are read through pyarrow's own readers, as before.
"""

from __future__ import annotations

import io
import os
import threading
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from recordmill.dataset.checksum import crc32c
from recordmill.errors import OutputError
from recordmill.read.files import Files, check_structure

ARROW_MAGIC = 8  # "ARROW1" and two bytes of padding, before the schema of an Arrow IPC file


class Segments:
    """The bytes of each row group of one dataset version."""

    def __init__(self, files: Files):
        self.files = files
        entries = files.manifest["partitions"]
        self.available = bool(entries) and all(
            e.get("group_crc32c") is not None and e.get("group_offsets") for e in entries
        )
        self._remote: dict[int, Any] = {}
        self._pid = os.getpid()
        self._footers: dict[int, pq.FileMetaData] = {}
        # Where footers read from object storage are kept for the next process (the disk
        # cache's folder, :meth:`keep_footers`): a warm epoch then asks the store for none.
        self._kept: Any = None
        self._lock = threading.RLock()  # footer() opens the file under it

    def offsets(self, partition: int) -> list[int]:
        return self.files.manifest["partitions"][partition]["group_offsets"]

    def span(self, partition: int, first: int, stop: int) -> tuple[int, int]:
        """(offset, length) in the file of row groups ``first`` to ``stop`` of a partition."""
        offsets = self.offsets(partition)
        return offsets[first], offsets[stop] - offsets[first]

    def fetch(self, partition: int, first: int, stop: int) -> pa.Buffer:
        """The bytes of row groups ``first`` to ``stop`` of a partition, read at once (one
        ranged GET on object storage; a zero-copy slice of a memory-mapped local Arrow file)."""
        offset, length = self.span(partition, first, stop)
        if self.files.store.local and not self.files.arrow:
            # Parquet bytes are decoded (a copy) anyway: one pread of the file pinned when the
            # dataset was opened, the version opened even where another replaced it since.
            return pa.py_buffer(self.files.raw(partition).read_at(length, offset))
        if self.files.store.local:
            return pa.py_buffer(self.files.mapped(partition)[offset : offset + length])
        try:
            return pa.py_buffer(self._file(partition).read_at(length, offset))
        except OSError as e:
            raise OutputError(self._where(partition, f"cannot be read: {e}")) from e

    def check(self, partition: int, first: int, stop: int, data: pa.Buffer) -> None:
        """Each row group's bytes in ``data`` against the CRC-32C the manifest records."""
        if not self.files.checksums:
            return
        offsets = self.offsets(partition)
        sums = self.files.manifest["partitions"][partition]["group_crc32c"]
        base = offsets[first]
        if data.size != offsets[stop] - base:
            raise OutputError(self._replaced(partition, first, "are fewer than the manifest says"))
        view = memoryview(data)
        for g in range(first, stop):
            if crc32c(view[offsets[g] - base : offsets[g + 1] - base]) != sums[g]:
                raise OutputError(self._replaced(partition, g, "do not match its checksum"))

    def decode(
        self, partition: int, first: int, stop: int, data: pa.Buffer, columns: list[str]
    ) -> list[pa.RecordBatch]:
        """Row groups ``first`` to ``stop`` of a partition, one batch each, from their bytes."""
        if self.files.arrow:
            batches = _arrow_batches(data, first == 0, self.files.schema, columns)
            name = self.files.manifest["partitions"][partition]["file"]
            for batch in batches:  # fetched: checked each time, as their bytes are
                check_structure(batch, f"{self.files.store}/{name}, a record batch")
            return batches
        offset, _ = self.span(partition, first, stop)
        size = self.files.manifest["partitions"][partition]["bytes"]
        source = _Sparse(size, [(offset, data)])
        reader = pq.ParquetFile(
            source,
            metadata=self.footer(partition),
            page_checksum_verification=True,
            pre_buffer=False,
        )
        try:
            # Neither of Arrow's thread pools (no pre-buffer, no threads): a pool thread still
            # in this Python file at exit aborts the interpreter (apache/arrow#50482, #34314).
            return [
                _one(reader.read_row_group(g, columns=columns, use_threads=False))
                for g in range(first, stop)
            ]
        except (OSError, pa.ArrowInvalid) as e:
            raise OutputError(self._where(partition, f"is damaged: {e}")) from e

    def group(self, g: int, columns: list[str]) -> pa.RecordBatch:
        """Global row group ``g``, fetched, checked and decoded."""
        group = self.files.groups[g]
        data = self.fetch(group.partition, group.index, group.index + 1)
        self.check(group.partition, group.index, group.index + 1, data)
        return self.decode(group.partition, group.index, group.index + 1, data, columns)[0]

    def footer(self, partition: int) -> pq.FileMetaData:
        """A Parquet partition's footer, read once (one ranged read of the file's end)."""
        with self._lock:
            if partition not in self._footers:
                self._footers[partition] = self._read_footer(partition)
            return self._footers[partition]

    def footer_bytes(self, partition: int) -> bytes:
        """The bytes after the last row group: the footer, as the file holds it, checked."""
        offsets = self.offsets(partition)
        size = self.files.manifest["partitions"][partition]["bytes"]
        data = self._file(partition).read_at(size - offsets[-1], offsets[-1])
        data = data if isinstance(data, bytes) else data.to_pybytes()
        if self.files.checksums and crc32c(data) != self._footer_crc(partition):
            raise OutputError(self._replaced(partition, None, "do not match its checksum"))
        return data

    def _footer_crc(self, partition: int) -> int:
        """The CRC-32C the manifest records for a partition's footer (after its groups')."""
        sums = self.files.manifest["partitions"][partition]["group_crc32c"]
        return sums[len(self.offsets(partition)) - 1]

    def keep_footers(self, folder: Any) -> None:
        """Keep the footers read from object storage in ``folder`` (a cache ``Folder``), and
        take them from there, checked against the manifest's CRC-32C, in later processes."""
        self._kept = folder

    def _footer_data(self, partition: int) -> bytes:
        if self._kept is None:
            return self.footer_bytes(partition)
        crc = self._footer_crc(partition)
        name = f"footer-{partition}.{crc:08x}"
        data = self._kept.kept(name, self.files.manifest["partitions"][partition]["bytes"])
        if data is None or crc32c(data) != crc:
            data = self.footer_bytes(partition)
            self._kept.keep(name, data)
        return data

    def _read_footer(self, partition: int) -> pq.FileMetaData:
        if self.files.store.local:
            return self.files.handle(partition).metadata
        try:
            footer = _parse_footer(self._footer_data(partition))
        except (OSError, pa.ArrowInvalid) as e:
            raise OutputError(self._where(partition, f"has a damaged footer: {e}")) from e
        if not footer.schema.to_arrow_schema().equals(self.files.schema):  # never cast to it
            raise OutputError(self._where(partition, "has another schema than the manifest's"))
        return footer

    def _file(self, partition: int) -> Any:
        """The partition's file for ranged reads: the pinned local file, or an object (opened
        once per process: one HEAD request)."""
        if self.files.store.local:
            return self.files.raw(partition)
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's open objects are not ours
                self._pid, self._remote = os.getpid(), {}
                self.files.ready()  # a client of this process's own (Files._fresh)
            if partition not in self._remote:
                entry = self.files.manifest["partitions"][partition]
                path = self.files.store.path(entry["file"])
                self._remote[partition] = self.files.store.fs.open_input_file(path)
            return self._remote[partition]

    def _where(self, partition: int, what: str) -> str:
        entry = self.files.manifest["partitions"][partition]
        return f"{self.files.store}/{entry['file']} {what} (recordmill verify tells more)"

    def _replaced(self, partition: int, g: int | None, what: str) -> str:
        entry = self.files.manifest["partitions"][partition]
        kind = "record batch" if self.files.arrow else "row group"
        part = "footer" if g is None else f"{kind} {g}"
        return (
            f"{self.files.store}/{entry['file']}, {part}: its bytes {what}: the dataset was "
            "replaced while it was read (open it again), or it is damaged (recordmill verify "
            "tells more)"
        )


def _parse_footer(data: bytes) -> pq.FileMetaData:
    # The footer alone after the magic number that starts every Parquet file reads as a file of
    # no row groups' bytes; the offsets it holds are the real file's.
    return pq.ParquetFile(pa.BufferReader(b"PAR1" + data)).metadata


def _arrow_batches(
    data: pa.Buffer, first_in_file: bool, schema: pa.Schema, columns: list[str]
) -> list[pa.RecordBatch]:
    """The record batches held by consecutive IPC messages (after the file's magic and schema
    message when the run starts the file)."""
    reader = pa.ipc.MessageReader.open_stream(
        pa.BufferReader(data.slice(ARROW_MAGIC) if first_in_file else data)
    )
    batches = []
    for message in reader:
        if message.type == "record batch":
            batches.append(pa.ipc.read_record_batch(message, schema).select(columns))
    return batches


def _one(table: pa.Table) -> pa.RecordBatch:
    batches = table.combine_chunks().to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)


class _Sparse(io.RawIOBase):
    """A file of ``size`` bytes of which only some runs are held (a row group's and the footer's),
    for pyarrow's Parquet reader, which reads only those runs when given the footer."""

    def __init__(self, size: int, pieces: list[tuple[int, Any]]):
        self._size = size
        self._pieces = [(start, memoryview(piece)) for start, piece in pieces]
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = base + pos
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, buffer: Any) -> int:
        if self._pos >= self._size:
            return 0  # the end of the file, as a file says it
        for start, piece in self._pieces:
            if start <= self._pos < start + len(piece):
                chunk = piece[self._pos - start : self._pos - start + len(buffer)]
                buffer[: len(chunk)] = chunk
                self._pos += len(chunk)
                return len(chunk)
        raise OSError(f"bytes at offset {self._pos} were not fetched")
