"""Merging staged task fragments into P balanced partition files (Parquet or Arrow IPC).

The rows form one global sequence: task 0's rows, then task 1's, and so on (or a seeded
permutation of it with ``--shuffle``). Partition p holds a consecutive slice of that sequence, and
partition sizes differ by at most one row. Each partition is written by one worker, independently.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from recordmill import layout
from recordmill.errors import writing
from recordmill.rows import RowIndex
from recordmill.settings import WriteSettings
from recordmill.storage import Store

ROW_GROUP_BYTES = 64 << 20
MAX_ROW_GROUP_ROWS = 1 << 17


@dataclass(frozen=True)
class PartitionJob:
    index: int
    count: int
    staging: Store
    schema: pa.Schema
    settings: WriteSettings
    row_group_size: int  # the settings' or, without one, chosen for the rows
    # (task_id, batch row counts) of every non-empty task, in task order.
    fragments: tuple[tuple[int, tuple[int, ...]], ...]
    start: int
    stop: int
    order: np.ndarray | None = None  # global row numbers, with --shuffle


@dataclass(frozen=True)
class PartitionInfo:
    file: str
    rows: int
    bytes: int
    checksum: str

    def progress(self) -> tuple[int, int]:
        """(rows, bytes) done, for the progress bar."""
        return self.rows, self.bytes


def default_row_group_size(total_rows: int, total_bytes: int) -> int:
    per_row = max(1, total_bytes // max(1, total_rows))
    return max(1, min(MAX_ROW_GROUP_ROWS, ROW_GROUP_BYTES // per_row))


def write_partition(
    job: PartitionJob, report: Callable[[Any], None] = lambda _: None
) -> PartitionInfo:
    """Write one partition file from the staged fragments, then the record that marks it done."""
    name = layout.partition_file(job.index, job.count, job.settings.format)
    staging = job.staging
    source = _Fragments(job)
    chunks = source.sequential() if job.order is None else source.shuffled()
    with writing(staging.path(name)):
        sink = staging.output(name)
        writer = _writer(sink, job)
        try:
            for table in _row_groups(chunks, job.row_group_size):
                writer.write(table)
                report((table.num_rows, table.nbytes))
        finally:
            writer.close()
            sink.close()
        info = PartitionInfo(name, job.stop - job.start, staging.size(name), staging.sha256(name))
        staging.makedirs(layout.PARTS_DIR)
        staging.write_text(layout.partition_record_file(name), json.dumps(asdict(info)))
    return info


def finished_partition(staging: Store, job: PartitionJob) -> PartitionInfo | None:
    """The info of a partition an interrupted run finished (file and record both there)."""
    name = layout.partition_file(job.index, job.count, job.settings.format)
    record = layout.partition_record_file(name)
    if not (staging.is_file(record) and staging.is_file(name)):
        return None
    info = PartitionInfo(**json.loads(staging.read_text(record)))
    return info if info.rows == job.stop - job.start else None


def fragments_done_after(jobs: list[PartitionJob]) -> dict[int, list[int]]:
    """For each partition, the tasks whose fragments no partition needs once it and all the
    partitions before it are written (in-order writing only; a shuffle needs every fragment)."""
    if not jobs or jobs[0].order is not None:
        return {}
    released: dict[int, list[int]] = {job.index: [] for job in jobs}
    task_start = 0
    last_partition = 0
    for task_id, batch_rows in jobs[0].fragments:
        task_stop = task_start + sum(batch_rows)
        while jobs[last_partition].stop < task_stop:
            last_partition += 1
        released[last_partition].append(task_id)
        task_start = task_stop
    return released


class _Fragments:
    """The staged batches of all tasks, addressed by global row number."""

    def __init__(self, job: PartitionJob):
        self.job = job
        self.batches: list[tuple[int, int]] = []  # (task_id, batch index)
        sizes = []
        for task_id, batch_rows in job.fragments:
            for b, n in enumerate(batch_rows):
                self.batches.append((task_id, b))
                sizes.append(n)
        self.index = RowIndex(sizes)
        self._readers: dict[int, pa.ipc.RecordBatchFileReader] = {}

    def _reader(self, task_id: int) -> pa.ipc.RecordBatchFileReader:
        return pa.ipc.open_file(self.job.staging.input_file(layout.fragment_file(task_id)))

    def sequential(self) -> Iterator[pa.RecordBatch]:
        for i, lo, hi in self.index.spans(self.job.start, self.job.stop):
            task_id, b = self.batches[i]
            if self.job.staging.local:
                # A mapping per batch: zero-copy, and unmapped once the batch is written, so
                # memory stays bounded by one batch however large a task's fragment is.
                reader = self._reader(task_id)
            else:
                # Elsewhere one reader per fragment: it fetches just the batches asked for, and
                # opening it again would cost a footer request per batch.
                if task_id not in self._readers:
                    self._readers = {task_id: self._reader(task_id)}
                reader = self._readers[task_id]
            yield reader.get_batch(b).slice(lo, hi - lo)

    def shuffled(self) -> Iterator[pa.Table]:
        order = self.job.order
        step = self.job.row_group_size
        for lo in range(0, len(order), step):
            yield self.gather(order[lo : lo + step])

    def gather(self, rows: np.ndarray) -> pa.Table:
        """The given global rows, in the given order."""
        plan = self.index.gather(rows)
        pieces = []
        for i, part in zip(plan.groups, plan.parts, strict=True):
            task_id, b = self.batches[i]
            if task_id not in self._readers:
                self._readers[task_id] = self._reader(task_id)
            pieces.append(self._readers[task_id].get_batch(b).take(pa.array(plan.local[part])))
        table = pa.Table.from_batches(pieces, schema=self.job.schema)
        return table.take(pa.array(plan.inverse))


def _row_groups(chunks: Iterator[Any], size: int) -> Iterator[pa.Table]:
    """Re-cut a stream of batches or tables into tables of exactly ``size`` rows (the last smaller)."""
    held: list[Any] = []
    held_rows = 0
    for chunk in chunks:
        while chunk.num_rows:
            take = min(size - held_rows, chunk.num_rows)
            held.append(chunk.slice(0, take))
            held_rows += take
            chunk = chunk.slice(take)
            if held_rows == size:
                yield _table(held)
                held, held_rows = [], 0
    if held_rows:
        yield _table(held)


def _table(parts: list[Any]) -> pa.Table:
    tables = [p if isinstance(p, pa.Table) else pa.Table.from_batches([p]) for p in parts]
    return pa.concat_tables(tables)


def _writer(sink: Any, job: PartitionJob) -> Any:
    if job.settings.format == "arrow":
        return _ArrowWriter(sink, job.schema, job.settings.compression)
    return _ParquetWriter(sink, job.schema, job.settings.compression)


class _ArrowWriter:
    def __init__(self, sink: Any, schema: pa.Schema, compression: str):
        codec = None if compression in ("auto", "none") else compression
        options = pa.ipc.IpcWriteOptions(compression=codec)
        self._writer = pa.ipc.new_file(sink, schema, options=options)

    def write(self, table: pa.Table) -> None:
        self._writer.write_table(table, max_chunksize=table.num_rows or None)

    def close(self) -> None:
        self._writer.close()


def _is_bytes(t: pa.DataType) -> bool:
    """Bytes and tensors (fixed-size binary): opaque to compression, dictionaries and stats."""
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)


def _leaves(path: str, t: pa.DataType) -> list[str]:
    """The Parquet column paths of a field: per-column settings go by these, not by field name."""
    if isinstance(t, pa.BaseExtensionType):
        return _leaves(path, t.storage_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaves(f"{path}.list.element", t.value_type)
    if pa.types.is_struct(t):
        return [leaf for child in t for leaf in _leaves(f"{path}.{child.name}", child.type)]
    if pa.types.is_map(t):
        return _leaves(f"{path}.key_value.key", t.key_type) + _leaves(
            f"{path}.key_value.value", t.item_type
        )
    return [path]


class _ParquetWriter:
    def __init__(self, sink: Any, schema: pa.Schema, compression: str):
        # Bytes columns usually hold already-compressed media (JPEG, PNG): compressing them again
        # costs time and saves nothing, and their statistics and dictionaries are useless. Tensors
        # are stored as they are too, so that they cost what their bytes cost.
        other = [leaf for f in schema if not _is_bytes(f.type) for leaf in _leaves(f.name, f.type)]
        if compression == "auto":
            codec: Any = {
                leaf: "none" if _is_bytes(f.type) else "zstd"
                for f in schema
                for leaf in _leaves(f.name, f.type)
            }
        else:
            codec = compression
        self._writer = pq.ParquetWriter(
            sink,
            schema,
            compression=codec,
            use_dictionary=other,
            write_statistics=other,
            # A CRC per page lets readers catch a flipped byte instead of returning wrong data.
            write_page_checksum=True,
        )

    def write(self, table: pa.Table) -> None:
        self._writer.write_table(table, row_group_size=max(1, table.num_rows))

    def close(self) -> None:
        self._writer.close()
