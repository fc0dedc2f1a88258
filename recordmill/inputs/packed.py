"""What MosaicML MDS shards (``inputs/mds.py``) and LitData chunks (``inputs/litdata.py``) share:
a file that starts with its sample count and a table of offsets, compressed files, raw PIL
pixels kept as PNG, and pickled values (which run code when loaded, so are never loaded unasked).

Both formats lay a file out as ``count: uint32``, ``offsets: uint32[count + 1]`` (from the file's
start), then the samples; the MDS writer puts its JSON config between the table and the samples.
"""

from __future__ import annotations

import bz2
import io
import json
import pickle
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from PIL import Image

from recordmill.dataset.schema import safe_name
from recordmill.errors import ConfigError, InputError

PICKLES = ("refuse", "bytes", "load")
# The codecs of the writers (MDS: br, bz2, gz, snappy, zstd; LitData: zstd), each with a level
# after a colon ("zstd:7") that reading does not need.
CODECS = ("br", "bz2", "gz", "snappy", "zstd")


class Damaged(ValueError):
    """A shard or chunk whose bytes do not hold what its index says."""


def sample_table(data: bytes | memoryview, expected: int, where: str) -> list[memoryview]:
    """The samples of a file laid out as count, offsets, samples: one view each, checked
    against the count its index gives and the file's size."""
    view = memoryview(data)
    if len(view) < 4:
        raise Damaged(f"{where}: {len(view)} bytes, too short for a sample count")
    count = int(np.frombuffer(view[:4], "<u4")[0])
    if count != expected:
        raise Damaged(f"{where}: holds {count:,} samples, its index says {expected:,}")
    end = 4 + 4 * (count + 1)
    if len(view) < end:
        raise Damaged(f"{where}: its offset table is cut short ({len(view):,} bytes)")
    offsets = np.frombuffer(view[4:end], "<u4").astype(np.int64)
    return _slices(view, offsets, end, where)


def _slices(view: memoryview, offsets: np.ndarray, start: int, where: str) -> list[memoryview]:
    if offsets[0] < start or np.any(np.diff(offsets) < 0) or offsets[-1] > len(view):
        raise Damaged(
            f"{where}: its offsets run from {offsets[0]:,} to {offsets[-1]:,}, expected "
            f"increasing from {start:,} to at most the file's {len(view):,} bytes"
        )
    return [view[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]


def laid_out(samples: Sequence[bytes], between: bytes = b"") -> bytes:
    """A file of count, offsets and ``samples`` (``between`` after the table: MDS's config), as
    both writers lay it out; for demo data and tests."""
    start = 4 + 4 * (len(samples) + 1) + len(between)
    offsets = np.cumsum([start] + [len(s) for s in samples]).astype("<u4")
    head = np.array([len(samples)], "<u4").tobytes() + offsets.tobytes()
    return head + between + b"".join(samples)


def items_at(view: memoryview, offsets: np.ndarray, where: str) -> list[memoryview]:
    """The items of a buffer at the given offsets (from the buffer's start), checked."""
    return _slices(view, offsets.astype(np.int64), 0, where)


def sized(view: memoryview, start: int, count: int, where: str) -> list[memoryview]:
    """``count`` items whose sizes (uint32 each) lie at ``start``, the items right after."""
    end = start + 4 * count
    if len(view) < end:
        raise ValueError(f"{len(view):,} bytes, too short for the sizes of its {count} {where}")
    offsets = np.concatenate(
        [[0], np.cumsum(np.frombuffer(view[start:end], "<u4"), dtype=np.int64)]
    )
    if end + int(offsets[-1]) != len(view):
        raise ValueError(
            f"{len(view):,} bytes, its {count} {where} and their sizes take {end + int(offsets[-1]):,}"
        )
    return items_at(view, offsets + end, where)


def text(data: memoryview) -> str:
    return bytes(data).decode("utf-8")


def inflate(codec: str, data: bytes | memoryview, size: int | None, where: str) -> bytes:
    """``data`` decompressed with the writer's ``codec`` (its level ignored), never past ``size``
    (the index's) or :data:`MAX_INFLATE`: a small forged file inflates no further than that."""
    name = codec.split(":", 1)[0]
    if name not in CODECS:
        raise ConfigError(f"{where}: compression {codec!r} is not read (expected one of {CODECS})")
    cap = MAX_INFLATE if size is None else min(size, MAX_INFLATE)
    try:
        out = _inflated(name, data, cap)  # (each decompressor takes a view: no copy)
    except (OSError, EOFError, ValueError, zlib.error, pa.ArrowException) as e:
        raise Damaged(f"{where}: does not decompress as {name} ({e})") from None
    if len(out) > cap:
        said = f"its index says {size:,}" if size is not None else f"more than {MAX_INFLATE:,}"
        raise Damaged(f"{where}: decompresses to more bytes than it may ({said})")
    if size is not None and len(out) != size:
        raise Damaged(f"{where}: decompresses to {len(out):,} bytes, its index says {size:,}")
    return out


# Where no index gives a decompressed size, what one file or frame may inflate to at most.
MAX_INFLATE = 1 << 30


def _inflated(name: str, data: bytes | memoryview, cap: int) -> bytes:
    """At most ``cap + 1`` bytes of ``data`` decompressed (one more: a file that goes on)."""
    if name == "gz":
        return zlib.decompressobj(wbits=31).decompress(data, cap + 1)
    if name == "bz2":
        return bz2.BZ2Decompressor().decompress(data, max_length=cap + 1)
    if name == "snappy":  # its length comes first, as a varint: checked before it is allocated
        length = _varint(data)
        if length > cap:
            raise ValueError(f"it says {length:,} bytes, more than the {cap:,} it may hold")
        return pa.decompress(data, decompressed_size=length, codec="snappy").to_pybytes()
    stream = pa.CompressedInputStream(pa.BufferReader(data), _ARROW[name])
    return stream.read(cap + 1)


_ARROW = {"zstd": "zstd", "br": "brotli"}


def _varint(data: bytes | memoryview) -> int:
    """The unsigned LEB128 number a snappy block starts with (its decompressed length)."""
    value = 0
    for k, byte in enumerate(data[:5]):
        value |= (byte & 0x7F) << (7 * k)
        if byte < 0x80:
            return value
    raise ValueError("no length at its start")


def checked_array(found: np.ndarray, spec: dict[str, Any], first: str) -> np.ndarray:
    """An array whose dtype or number of dimensions is not its column's (learnt from the
    ``first`` sample or item): that row's reject, named, never a cast."""
    if found.dtype.name != spec["type"] or found.ndim != len(spec["shape"]):
        raise ValueError(
            f"an array of {found.dtype} with {found.ndim} dimensions, the column holds "
            f"{spec['type']} with {len(spec['shape'])} (from the {first})"
        )
    return found


def pil_png(data: bytes | memoryview) -> bytes:
    """The layout both writers give a PIL image (width, height, mode's length as uint32, the mode,
    the raw pixels), as PNG bytes: lossless, and read by every tool."""
    if len(data) < 12:
        raise ValueError(f"a PIL image of {len(data)} bytes, too short for its size and mode")
    width, height, size = np.frombuffer(data[:12], "<u4").tolist()
    mode, raw = bytes(data[12 : 12 + size]).decode("ascii"), bytes(data[12 + size :])
    if width * height > 8 * len(raw):  # checked before Pillow allocates it: 1 bit a pixel at least
        raise ValueError(f"a PIL image of {width:,} x {height:,} pixels in {len(raw):,} bytes")
    image = Image.frombytes(mode, (width, height), raw)
    out = io.BytesIO()
    image.save(out, "PNG")  # a mode PNG cannot hold raises OSError: that row's reject
    return out.getvalue()


def check_pickles(how: str, columns: list[str], where: str) -> None:
    """Pickled columns with ``--pickles refuse`` (the default): one line saying the choices."""
    if columns and how == "refuse":
        raise ConfigError(
            f"{where}: column {columns[0]} holds pickled values, which run code when loaded; "
            "--pickles bytes keeps each pickle's bytes without loading it, --pickles load loads "
            "them as JSON text (only for files you trust)"
        )


def pickle_field(how: str) -> dict[str, Any]:
    return {"type": "bytes" if how == "bytes" else "string", "nullable": True}


def pickled(how: str) -> Callable[[bytes | memoryview], Any]:
    """The decoder of a pickled column under ``--pickles``."""
    if how == "bytes":
        return bytes

    def load(data: bytes | memoryview) -> str:
        try:
            value = pickle.loads(data)  # asked for: --pickles load
        except Exception as e:  # whatever the pickle's own code raised: this row's reject
            raise ValueError(f"does not unpickle ({type(e).__name__}: {e})") from None
        try:
            return json.dumps(value, ensure_ascii=False)
        except TypeError:
            raise ValueError(f"an unpickled {type(value).__name__} has no JSON text") from None

    return load


Column = tuple[str, str, dict[str, Any], Callable[[memoryview], Any]]
# What decoding a value of a damaged or forged file may raise: that value's error, one line.
DECODING = (ValueError, OSError, IndexError, KeyError, TypeError, OverflowError, struct.error)


def described(
    names: Sequence[str],
    kinds: Sequence[str],
    first: Sequence[memoryview] | None,
    reader: Any,
    pickles: str,
    where: str,
) -> tuple[Column, ...]:
    """(name in the file, column, field, decoder) of each of a format's columns, its kinds
    (encodings, formats) typed by ``reader.field`` and decoded by ``reader.decoder``;
    ``first``: the first sample's values, for the kinds whose type it gives."""
    out, seen = [], {}
    for i, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        column = safe_name(name)
        if column in seen:
            raise ConfigError(
                f"{where}: {seen[column]!r} and {name!r} both become column {column!r}"
            )
        seen[column] = name
        try:
            spec = reader.field(kind, first[i] if first else None, pickles)
        except DECODING as e:
            raise InputError(f"{where}: column {name!r}: {e}") from None
        out.append((name, column, spec, reader.decoder(kind, spec, pickles)))
    return tuple(out)


def row(columns: Sequence[Column], values: Sequence[memoryview]) -> dict[str, Any]:
    """A sample's row from its values' bytes; a value that does not decode raises ValueError
    naming its column."""
    out = {}
    for (name, column, _, decode), value in zip(columns, values, strict=True):
        try:
            out[column] = decode(value)
        except DECODING as e:
            raise ValueError(f"column {name!r}: {e}") from None
    return out
