"""Reading TFRecord files of ``tf.train.Example`` without TensorFlow.

A TFRecord file is a sequence of records: ``uint64 length``, ``uint32 masked CRC-32C of the
length``, ``data``, ``uint32 masked CRC-32C of the data`` (little-endian). Both CRCs are checked.
The data of each record is a serialized ``tf.train.Example``, decoded here from the protobuf wire
format: a map from feature name to a list of bytes, float32 or int64 values.

A file may be compressed as a whole, as TensorFlow's ``TFRecordOptions(compression_type=...)``
writes it: ``GZIP`` (a gzip stream) or ``ZLIB`` (a zlib stream). ``compression="auto"`` tells
them apart by their first bytes, not by the file's name.
"""

from __future__ import annotations

import gzip
import io
import os
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from recordmill.inputs.protobuf import encode_varint, fields, message, packed_varints, signed

try:
    from crc32c import crc32c as _crc32c
except ImportError:  # the pure-Python fallback is exact but slow: pip install recordmill[tfrecord]
    _crc32c = None

_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data: bytes) -> int:
    if _crc32c is not None:
        return _crc32c(data)
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class TFRecordError(ValueError):
    """A damaged TFRecord file; the message names the file, the record and its byte offset."""


COMPRESSIONS = ("auto", "none", "gzip", "zlib")


def detect_compression(head: bytes) -> str:
    """``none``, ``gzip`` or ``zlib``, from a file's first 12 bytes: an uncompressed file starts
    with a record header whose CRC matches; gzip with 1f 8b; zlib with a header whose check
    bits hold (RFC 1950)."""
    if len(head) == 12 and masked_crc(head[:8]) == struct.unpack("<I", head[8:12])[0]:
        return "none"
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
        return "zlib"
    return "none"


class _ZlibReader(io.RawIOBase):
    """A zlib stream, read as the bytes it holds."""

    def __init__(self, raw: Any):
        self._raw, self._inflate = raw, zlib.decompressobj()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = b""
        while not data:
            if self._inflate.eof:
                return 0
            chunk = self._inflate.unconsumed_tail or self._raw.read(1 << 16)
            if not chunk:
                raise EOFError("the compressed stream ends before its end marker")
            data = self._inflate.decompress(chunk, len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _open(path: str, compression: str) -> tuple[Any, str]:
    raw = open(path, "rb")  # noqa: SIM115 - closed by the caller, with what wraps it
    if compression == "auto":
        compression = detect_compression(raw.read(12))
        raw.seek(0)
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb"), compression
    if compression == "zlib":
        return io.BufferedReader(_ZlibReader(raw), 1 << 16), compression
    return raw, compression


def records(
    path: str | os.PathLike[str], compression: str = "auto"
) -> Iterator[tuple[int, int, bytes, str | None]]:
    """(record index, byte offset, data, problem) for each record. ``problem`` says why a record's
    data is damaged (its CRC does not match), else None; a damaged header, a truncated file or a
    damaged compressed stream, after which nothing can be trusted, raises
    :class:`TFRecordError`. Offsets count the uncompressed bytes."""
    path = os.fspath(path)
    f, compression = _open(path, compression)
    with f:
        index = offset = 0
        try:
            while header := f.read(12):
                where = f"{path}: record {index} at byte {offset}"
                if len(header) < 12:
                    raise TFRecordError(f"{where}: the file ends inside a record header")
                length, length_crc = struct.unpack("<QI", header)
                if masked_crc(header[:8]) != length_crc:
                    hint = "" if compression != "none" else _compression_hint(index)
                    raise TFRecordError(
                        f"{where}: the length's CRC does not match (damaged file{hint})"
                    )
                data = f.read(length)
                footer = f.read(4)
                if len(data) < length or len(footer) < 4:
                    raise TFRecordError(f"{where}: the file ends inside the record (truncated)")
                problem = None
                if masked_crc(data) != struct.unpack("<I", footer)[0]:
                    problem = f"{where}: the data's CRC does not match (damaged record)"
                yield index, offset, data, problem
                index += 1
                offset += 16 + length
        except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
            raise TFRecordError(
                f"{path}: record {index} at byte {offset} (uncompressed): the {compression} "
                f"stream is damaged or cut short: {e}"
            ) from None


def _compression_hint(index: int) -> str:
    if index:
        return ""
    return "; if it is compressed in a way not recognised, --compression-type gzip or zlib says how"


def _feature(buf: bytes) -> tuple[str, list | np.ndarray]:
    """One ``tf.train.Feature``: ("bytes", [...]), ("float", array) or ("int64", array)."""
    for number, _, value in fields(buf):
        if number == 1:
            return "bytes", [v for n, _, v in fields(value) if n == 1]
        if number == 2:
            parts = [v for n, _, v in fields(value) if n == 1]
            return "float", np.frombuffer(b"".join(parts), "<f4")
        if number == 3:
            values = []
            for n, wire, v in fields(value):
                if n != 1:
                    continue
                if wire == 0:
                    values.append(signed(v))
                else:
                    values.extend(signed(item) for item in packed_varints(v))
            return "int64", np.array(values, dtype=np.int64)
    return "bytes", []  # a feature with no kind set: an empty list


def parse_example(data: bytes) -> dict[str, tuple[str, list | np.ndarray]]:
    """A serialized ``tf.train.Example`` as {name: (kind, values)}."""
    features: dict[str, tuple[str, list | np.ndarray]] = {}
    for number, _, value in fields(data):
        if number != 1:
            continue
        for entry_number, _, entry in fields(value):
            if entry_number != 1:
                continue
            name, feature = "", b""
            for n, _, v in fields(entry):
                if n == 1:
                    name = v.decode("utf-8")
                elif n == 2:
                    feature = v
            features[name] = _feature(feature)
    return features


def encode_example(features: dict[str, bytes | float | int | list]) -> bytes:
    """A serialized ``tf.train.Example``: bytes/str -> bytes_list, float -> float_list,
    int -> int64_list; a list holds several values of one kind."""
    entries = b""
    for name, value in features.items():
        values = value if isinstance(value, (list, tuple, np.ndarray)) else [value]
        first = values[0] if len(values) else b""
        if isinstance(first, (bytes, str)):
            body = b"".join(message(1, v.encode() if isinstance(v, str) else v) for v in values)
            feature = message(1, body)
        elif isinstance(first, (float, np.floating)):
            feature = message(2, message(1, np.asarray(values, "<f4").tobytes()))
        else:
            feature = message(3, message(1, b"".join(encode_varint(int(v)) for v in values)))
        entries += message(1, message(1, name.encode()) + message(2, feature))
    return message(1, entries)


def write_records(path: str | os.PathLike[str], payloads: list[bytes]) -> None:
    """Write a TFRecord file (for demo data and tests; recordmill itself only reads them)."""
    with open(path, "wb") as f:
        for data in payloads:
            header = struct.pack("<Q", len(data))
            f.write(header + struct.pack("<I", masked_crc(header)))
            f.write(data + struct.pack("<I", masked_crc(data)))
