"""The partition file writers: Parquet (with per-column settings) and Arrow IPC, fed tables of
exactly one row group each. Each ``write`` puts exactly that row group's bytes into the file, one
run after the other (checked by the tests): the runs whose offsets and CRC-32C the manifest
records (see dataset/checksum.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from recordmill.dataset.rows import recut


def open_writer(sink: Any, schema: pa.Schema, fmt: str, compression: str) -> Any:
    """A writer of ``fmt`` into ``sink``: ``.write(table)`` one row group, ``.close()``."""
    if fmt == "arrow":
        return ArrowWriter(sink, schema, compression)
    return ParquetWriter(sink, schema, compression)


def row_groups(chunks: Iterator[Any], size: int) -> Iterator[pa.Table]:
    """Re-cut a stream of batches or tables into tables of exactly ``size`` rows (the last smaller)."""
    for parts in recut(chunks, size):
        yield _table(parts)


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    batches = table.to_batches()
    if len(batches) == 1:
        return batches[0]
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=table.schema)
    return pa.concat_batches(batches)


def _table(parts: list[Any]) -> pa.Table:
    tables = [p if isinstance(p, pa.Table) else pa.Table.from_batches([p]) for p in parts]
    return pa.concat_tables(tables)


class ArrowWriter:
    def __init__(self, sink: Any, schema: pa.Schema, compression: str):
        codec = None if compression in ("auto", "none") else compression
        options = pa.ipc.IpcWriteOptions(compression=codec)
        self._writer = pa.ipc.new_file(sink, schema, options=options)

    def write(self, table: pa.Table) -> None:
        # One record batch per row group, as Parquet has, so that readers can count on it.
        self._writer.write_batch(_one_batch(table))

    def close(self) -> None:
        self._writer.close()


def _is_bytes(t: pa.DataType) -> bool:
    """Bytes and tensors (fixed-size binary): opaque to compression, dictionaries and stats."""
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)


def _floats(t: pa.DataType) -> bool:
    """Floating-point numbers, or lists (any depth) of them."""
    while pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        t = t.value_type
    return pa.types.is_floating(t)


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


class ParquetWriter:
    def __init__(self, sink: Any, schema: pa.Schema, compression: str):
        # Bytes columns usually hold already-compressed media (JPEG, PNG): compressing them again
        # costs time and saves nothing, and their statistics and dictionaries are useless. Tensors
        # are stored as they are too, so that they cost what their bytes cost.
        other = [leaf for f in schema if not _is_bytes(f.type) for leaf in _leaves(f.name, f.type)]
        # Floats (measurements, embeddings) rarely repeat: a dictionary is tried page after page
        # before Parquet falls back, which made a table of floats 1.5x larger and its write 2x
        # slower (benchmarks/bench_csv.py). Numbers that repeat (labels, ids) keep theirs.
        dictionary = [
            leaf
            for f in schema
            if not _is_bytes(f.type) and not _floats(f.type)
            for leaf in _leaves(f.name, f.type)
        ]
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
            use_dictionary=dictionary,
            write_statistics=other,
            # A CRC per page lets readers catch a flipped byte instead of returning wrong data.
            write_page_checksum=True,
        )

    def write(self, table: pa.Table) -> None:
        self._writer.write_table(table, row_group_size=max(1, table.num_rows))

    def close(self) -> None:
        self._writer.close()
