"""Reading OneFlow's OFRecord files without OneFlow.

An OFRecord dataset is a folder of part files (``part-0``, ``part-1``, ... or ``part-00000``...).
Each file is a sequence of records: a little-endian ``int64`` length, then that many bytes of a
serialized ``OFRecord`` protobuf message (``oneflow/core/record/record.proto``)::

    message OFRecord { map<string, Feature> feature = 1; }
    message Feature { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                                   DoubleList double_list = 3; Int32List int32_list = 4;
                                   Int64List int64_list = 5; } }
    message BytesList { repeated bytes value = 1; }   // FloatList: float, ... Int64List: int64

The number lists are declared ``[packed = true]``; unpacked ones (one field per value), which any
protobuf parser accepts as well, are read too. There is no checksum: a damaged length or a file
cut short is found by the lengths (a length of 0 too: OneFlow writes no empty record), a damaged
message only if it no longer parses or holds no feature.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from recordmill.inputs.protobuf import (
    ProtobufError,
    encode_varint,
    fields,
    message,
    packed_varints,
    signed,
)

KINDS = ("bytes", "float", "double", "int32", "int64")  # Feature's oneof, field numbers 1..5
_NUMBERS = {kind: number for number, kind in enumerate(KINDS, start=1)}
_DTYPES = {"float": np.dtype("<f4"), "double": np.dtype("<f8")}


class OFRecordError(ValueError):
    """A damaged OFRecord file; the message names the file, the record and its byte offset."""


def records(path: str | os.PathLike[str]) -> Iterator[tuple[int, int, bytes]]:
    """(record index, byte offset of its length, data) for each record. A length that runs past
    the end of the file (a file cut short, or a damaged length) raises :class:`OFRecordError`:
    nothing after it can be found."""
    path = os.fspath(path)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        index = offset = 0
        while head := f.read(8):
            where = f"{path}: record {index} at byte {offset}"
            if len(head) < 8:
                raise OFRecordError(
                    f"{where}: the file ends inside the record's 8-byte length (truncated)"
                )
            (length,) = struct.unpack("<q", head)
            left = size - offset - 8
            if length == 0:  # OneFlow writes no empty record (its reader refuses them)
                raise OFRecordError(f"{where}: the record's length is 0 (a damaged length)")
            if length < 0 or length > left:
                # Checked before reading: a damaged length must not make us allocate gigabytes.
                raise OFRecordError(
                    f"{where}: the record's length is {length} bytes but {left} are left in the "
                    "file (truncated, or a damaged length)"
                )
            data = f.read(length)
            if len(data) < length:
                raise OFRecordError(f"{where}: the file ends inside the record (truncated)")
            yield index, offset, data
            index += 1
            offset += 8 + length


def _numbers(kind: str, buf: bytes) -> np.ndarray:
    """The values of a FloatList, DoubleList, Int32List or Int64List, packed or not."""
    dtype = _DTYPES.get(kind)
    chunks: list[bytes] = []
    ints: list[int] = []
    for number, wire, value in fields(buf):
        if number != 1:
            continue  # an unknown field: protobuf parsers skip them too
        if dtype is not None:
            # packed (wire type 2) or one fixed-width value (5 for float, 1 for double)
            if wire not in (2, 5 if dtype.itemsize == 4 else 1):
                raise ProtobufError(f"a {kind}_list holds a value of wire type {wire}")
            if len(value) % dtype.itemsize:
                raise ProtobufError(f"a packed {kind}_list of {len(value)} bytes")
            chunks.append(value)
        elif wire == 0:
            ints.append(signed(value))
        elif wire == 2:
            ints.extend(signed(v) for v in packed_varints(value))
        else:
            raise ProtobufError(f"an {kind}_list holds a value of wire type {wire}")
    if dtype is not None:
        return np.frombuffer(b"".join(chunks), dtype)
    values = np.array(ints, dtype=np.int64)
    # An int32 is sent as a sign-extended 64-bit varint; protobuf keeps its low 32 bits.
    return values.astype(np.int32) if kind == "int32" else values


def _feature(buf: bytes) -> tuple[str, list[bytes] | np.ndarray]:
    """One ``Feature``: (kind, values); bytes values are a list, numbers an array."""
    found: tuple[str, list[bytes] | np.ndarray] = ("bytes", [])  # no kind set: an empty list
    for number, wire, value in fields(buf):
        if not 1 <= number <= len(KINDS):
            continue
        if wire != 2:
            raise ProtobufError(f"a Feature's field {number} has wire type {wire}, not 2")
        kind = KINDS[number - 1]
        if kind == "bytes":
            items = []
            for n, w, v in fields(value):
                if n == 1 and w != 2:
                    raise ProtobufError(f"a bytes_list holds a value of wire type {w}")
                if n == 1:
                    items.append(v)
            found = kind, items
        else:
            found = kind, _numbers(kind, value)  # a oneof: the last one set wins, as in protobuf
    return found


def parse_ofrecord(data: bytes) -> dict[str, tuple[str, list[bytes] | np.ndarray]]:
    """A serialized ``OFRecord`` as {feature name: (kind, values)}; raises
    :class:`~recordmill.inputs.protobuf.ProtobufError` for bytes that are not one."""
    features: dict[str, tuple[str, list[bytes] | np.ndarray]] = {}
    for number, wire, entry in fields(data):
        if number != 1:
            continue
        if wire != 2:
            raise ProtobufError(f"field 1 (feature) has wire type {wire}, not 2")
        name, feature = b"", b""
        for n, w, v in fields(entry):
            if n in (1, 2) and w != 2:
                raise ProtobufError(f"a feature map entry's field {n} has wire type {w}, not 2")
            if n == 1:
                name = v
            elif n == 2:
                feature = v
        try:
            key = name.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtobufError(f"a feature name is not UTF-8: {name[:40]!r}") from None
        features[key] = _feature(feature)  # a repeated key: the last one wins, as in protobuf
    if not features:
        raise ProtobufError("the record holds no feature")
    return features


def encode_ofrecord(features: dict[str, tuple[str, list | np.ndarray]]) -> bytes:
    """A serialized ``OFRecord`` from {name: (kind, values)}, kinds as in :data:`KINDS`, number
    lists packed as OneFlow declares them."""
    entries = []
    for name, (kind, values) in features.items():
        if kind == "bytes":
            body = b"".join(message(1, bytes(v)) for v in values)
        elif kind in _DTYPES:
            body = message(1, np.asarray(values, _DTYPES[kind]).tobytes()) if len(values) else b""
        else:
            packed = b"".join(encode_varint(int(v)) for v in values)
            body = message(1, packed) if packed else b""
        feature = message(_NUMBERS[kind], body)
        entries.append(message(1, message(1, name.encode()) + message(2, feature)))
    return b"".join(entries)


def write_records(path: str | os.PathLike[str], payloads: list[bytes]) -> None:
    """Write an OFRecord part file (for demo data and tests; recordmill itself only reads)."""
    with open(path, "wb") as f:
        for data in payloads:
            f.write(struct.pack("<q", len(data)) + data)


DEMO_PARTS, DEMO_PART_ROWS = 2, 20


def demo_rows(rng: np.random.Generator) -> list[dict[str, Any]]:
    """The records :func:`make_demo` writes, in file order: ``images`` (a 28 x 28 JPEG, a bar
    whose position is the label), ``labels``, ``scores`` (float32, one per class) and ``id``."""
    rows = []
    for number in range(DEMO_PARTS * DEMO_PART_ROWS):
        label = int(rng.integers(0, 10))
        pixels = np.zeros((28, 28), dtype=np.uint8)
        pixels[4:24, 2 + 2 * label : 5 + 2 * label] = 255
        buffer = io.BytesIO()
        Image.fromarray(pixels, "L").save(buffer, "JPEG", quality=90)
        scores = rng.random(10).astype(np.float32)
        rows.append({"images": buffer.getvalue(), "labels": label, "scores": scores, "id": number})
    return rows


def make_demo(folder: Path, rng: np.random.Generator) -> None:
    """Two part files of 20 records each, as OneFlow's MNIST example makes them: ``images`` (a
    JPEG), ``labels`` (int32), plus ``scores`` (float32) and ``id`` (int64): :func:`demo_rows`."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = demo_rows(rng)
    for part in range(DEMO_PARTS):
        payloads = [
            encode_ofrecord(
                {
                    "images": ("bytes", [row["images"]]),
                    "labels": ("int32", [row["labels"]]),
                    "scores": ("float", row["scores"]),
                    "id": ("int64", [row["id"]]),
                }
            )
            for row in rows[part * DEMO_PART_ROWS : (part + 1) * DEMO_PART_ROWS]
        ]
        write_records(folder / f"part-{part}", payloads)
