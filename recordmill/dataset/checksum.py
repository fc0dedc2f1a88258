"""Checksums that let a reader trust the bytes it reads, so that a damaged or replaced file is
caught instead of returned as data.

Each row group (Parquet) or record batch (Arrow IPC) of a partition is a run of bytes in its
file; the manifest records where each run starts (``group_offsets``, one more than the groups: the
last is where the footer starts) and the CRC-32C of its bytes (``group_crc32c``, and last the
footer's: one per offset). A reader checks
the bytes it fetched or mapped against them: on object storage that also pins the version it
opened (a file replaced by one of the same size has other bytes), and CRC-32C runs in hardware at
well over 10 GB/s (the ``crc32c`` package, which releases the GIL on large buffers).

Datasets written before these were recorded carry, for Arrow IPC only, ``batch_crc32``: one CRC-32
per column, over the column's buffers as a reader finds them in
the file (validity, offsets, values; children's too) and the length and null count of it and
each of its children (held in the batch's header, not in its buffers). The writer takes them from the batch as it
is serialized; the manifest records them (``batch_crc32`` of each partition: a list per batch).
zlib's CRC-32 runs at several GB/s and releases the GIL on large buffers.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import struct
import sys
import zlib
from collections.abc import Callable
from typing import Any

import pyarrow as pa


def _crc32c_function() -> Callable[[Any, int], int]:
    """The ``crc32c`` package's C function, loaded without the package's ``__init__``, which
    imports importlib.metadata to read its own version: 20-40 ms of every process that
    checksums, a write's fork server among them, before its first worker can start."""
    name = "crc32c._crc32c"
    try:
        if name in sys.modules:
            return sys.modules[name].crc32c
        folder = importlib.util.find_spec("crc32c").submodule_search_locations[0]
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_crc32c" + suffix)
            if os.path.exists(path):
                # Not put in sys.modules: the package, imported later, imports its own
                loader = importlib.machinery.ExtensionFileLoader(name, path)
                spec = importlib.util.spec_from_file_location(name, path, loader=loader)
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
                return module.crc32c
    except Exception:  # another layout of the package: imported as usual, below
        pass
    import crc32c

    return crc32c.crc32c


_crc32c = _crc32c_function()


def crc32c(data: Any, value: int = 0) -> int:
    """The CRC-32C of a bytes-like object (a pyarrow Buffer, a memoryview), continuing ``value``."""
    return _crc32c(data, value)


def column_crc32(array: pa.Array) -> int:
    crc = 0
    for buffer in array.buffers():
        if buffer is not None:
            crc = zlib.crc32(buffer, crc)
    for part in _nested(array):
        crc = zlib.crc32(struct.pack("<qq", len(part), part.null_count), crc)
    return crc


def _nested(array: pa.Array) -> list[pa.Array]:
    """The array and every array nested in it."""
    t = array.type
    if isinstance(array, pa.ExtensionArray):
        return [array, *_nested(array.storage)]
    if pa.types.is_struct(t):
        return [array] + [a for i in range(t.num_fields) for a in _nested(array.field(i))]
    if pa.types.is_map(t):
        return [array, *_nested(array.keys), *_nested(array.items)]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [array, *_nested(array.values)]
    return [array]


def batch_crc32(batch: pa.RecordBatch) -> list[int]:
    """The CRC-32 of each column of ``batch`` as it will be read back from an IPC file: taken
    from its serialized form, where slices are rebased and buffers trimmed as the file has them."""
    written = pa.ipc.read_record_batch(batch.serialize(), batch.schema)
    return [column_crc32(column) for column in written.columns]
