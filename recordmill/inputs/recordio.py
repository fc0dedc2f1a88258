"""Reading MXNet RecordIO files (``.rec``, as ``im2rec`` and ``mx.recordio`` write them) without MXNet.

The format is dmlc-core's (``include/dmlc/recordio.h``, ``src/recordio.cc``): a sequence of physical
records ``uint32 magic 0xced7230a``, ``uint32 lrecord``, the data, zero padding to a multiple of 4
bytes (little-endian). ``lrecord``'s upper 3 bits are a continuation flag (cflag), its lower 29 bits
the data's length. The writer never lets the magic number appear at a 4-byte-aligned position of
the file: where a record's data holds it at an aligned position, the data is cut there into parts
(cflag 1 start, 2 middle, 3 end; 0 is a record in one part) and the magic itself is left out, so a
reader joins the parts putting the magic back between them. Hence every aligned magic in an
undamaged file is a record header, and a reader can start anywhere: the next aligned magic whose
cflag is 0 or 1 begins a record (the file is splittable).

MXNet's image records (``mx.recordio.pack``, ``im2rec``) start with an ``IRHeader``, struct
``IfQQ`` (flag, label, id, id2); when flag > 0 the labels are the ``flag`` float32 values after it
(and ``label`` is 0); the image file's bytes follow. ``MXIndexedRecordIO`` writes an ``.idx`` file
beside the ``.rec``: lines ``key \\t byte offset``.
"""

from __future__ import annotations

import io
import itertools
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", MAGIC)
LENGTH_MASK = (1 << 29) - 1
IR_FORMAT = "<IfQQ"  # flag, label, id, id2: MXNet's _IR_FORMAT, little-endian as it writes it
IR_SIZE = struct.calcsize(IR_FORMAT)
_SCAN_BLOCK = 1 << 20


class RecordIOError(ValueError):
    """A damaged RecordIO file or index; the message names the file, the record and its offset."""


class Record(NamedTuple):
    """One logical record: ``number`` counts from 0 in its file (None where a task that starts
    mid-file cannot know it); ``data`` is None when ``problem`` says why it could not be read, and
    ``resume`` is then the byte where reading went on (None if nothing was passed over)."""

    number: int | None
    offset: int
    data: bytes | None
    problem: str | None
    resume: int | None = None


class ImageRecord(NamedTuple):
    """An unpacked ``IRHeader`` record: ``labels`` is the header's one label, or its ``flag`` labels."""

    flag: int
    labels: np.ndarray
    id: int
    id2: int
    image: bytes


def padded(length: int) -> int:
    return (length + 3) & ~3


def _read_one(f: Any, offset: int, size: int) -> tuple[bytes, int]:
    """The record starting at ``offset`` (its parts joined) and the offset after it; raises
    RecordIOError with the reason (the caller adds where)."""
    parts, pos = [], offset
    while True:
        f.seek(pos)
        header = f.read(8)
        where = "" if pos == offset else f" (its part at byte {pos})"
        if len(header) < 8:
            raise RecordIOError(f"the file ends inside a record header{where} (truncated)")
        magic, lrecord = struct.unpack("<II", header)
        if magic != MAGIC:
            raise RecordIOError(
                f"no record header{where}: {header[:4].hex()} where the magic number "
                f"{MAGIC_BYTES.hex()} should be (damaged file)"
            )
        cflag, length = lrecord >> 29, lrecord & LENGTH_MASK
        expected = (0, 1) if pos == offset else (2, 3)
        if cflag not in expected:
            raise RecordIOError(
                f"part flag {cflag}{where} where {' or '.join(map(str, expected))} should be "
                "(damaged file)"
            )
        if pos + 8 + padded(length) > size:
            raise RecordIOError(
                f"the file ends inside the record{where}: {length} bytes announced, "
                f"{max(0, size - pos - 8)} left (truncated)"
            )
        parts.append(f.read(length))
        pos += 8 + padded(length)
        if cflag in (0, 3):
            f.seek(pos)
            if pos < size and f.read(4) != MAGIC_BYTES and _holds_a_header(parts[-1]):
                # No header where the next record should start, and one inside this record's
                # data (where the writer leaves none): its length is damaged, too long, and its
                # data took bytes of the records after it. (A damaged header after an intact
                # record is the next record's problem.)
                raise RecordIOError(
                    f"its length ({length} bytes{where}) runs over the next record's header: "
                    "a damaged length"
                )
            return MAGIC_BYTES.join(parts), pos


def _holds_a_header(data: bytes) -> bool:
    """Whether the magic number stands at a 4-byte aligned place in a record's data (the writer
    splits a record there, so an intact record holds none)."""
    words = np.frombuffer(data, "<u4", count=len(data) // 4)
    return bool((words == MAGIC).any())


def is_start(f: Any, pos: int, size: int) -> bool:
    """Whether a record plausibly starts at ``pos`` (aligned): the magic, cflag 0 or 1, a length
    that fits in the file, and after a whole record, the next header or the end of the file."""
    f.seek(pos)
    header = f.read(8)
    if len(header) < 8:
        return False
    magic, lrecord = struct.unpack("<II", header)
    cflag, length = lrecord >> 29, lrecord & LENGTH_MASK
    if magic != MAGIC or cflag > 1:
        return False
    after = pos + 8 + padded(length)
    if after > size:
        return False
    if cflag == 1 or after == size:
        return True
    f.seek(after)
    return f.read(4) == MAGIC_BYTES


def find_start(f: Any, pos: int, size: int) -> int:
    """The first record start at or after byte ``pos`` (rounded up to a multiple of 4), or
    ``size``. In an undamaged file every aligned magic is a header (the writer splits data around
    aligned magics), so continuation parts (cflag 2, 3) are what is passed over; unaligned magics
    inside data are never looked at. The plausibility checks matter only in damaged files."""
    pos = padded(pos)
    while pos < size:
        f.seek(pos)
        block = f.read(_SCAN_BLOCK + 8)  # +8: a header across the block's end is still seen
        at = block.find(MAGIC_BYTES)
        while at != -1 and at < _SCAN_BLOCK:
            if at % 4 == 0 and is_start(f, pos + at, size):
                return pos + at
            at = block.find(MAGIC_BYTES, at + 1)
        pos += _SCAN_BLOCK
    return size


def records(
    path: str | os.PathLike[str],
    start: int = 0,
    end: int | None = None,
    offsets: list[int] | None = None,
    first_number: int | None = 0,
) -> Iterator[Record]:
    """The records of ``path`` that start in [``start``, ``end``), in file order; ``start`` must be
    a record start (see :func:`find_start`). ``offsets`` (from an ``.idx``), when given, are the
    starts expected, record ``first_number`` first: a record elsewhere is a problem. After a
    problem, reading goes on at the next record start (the next of ``offsets``), which the Record
    with the problem holds as ``resume``."""
    path = os.fspath(path)
    size = os.path.getsize(path)
    end = size if end is None else min(end, size)
    number, expected = first_number, 0
    with open(path, "rb") as f:
        pos = start
        while pos < end:
            where = _where(path, number, pos, first_number, start)
            problem = _not_listed(where, offsets, expected, pos)
            if problem is None:
                try:
                    data, after = _read_one(f, pos, size)
                except RecordIOError as e:
                    problem = f"{where}: {e}"
                else:
                    yield Record(number, pos, data, None)
                    pos, expected = after, expected + 1
                    number = None if number is None else number + 1
                    continue
            failed = number
            if offsets is not None:
                expected = next((i for i, o in enumerate(offsets) if o > pos), len(offsets))
                resume = offsets[expected] if expected < len(offsets) else end
                number = None if first_number is None else first_number + expected
            else:
                resume = find_start(f, pos + 4, size)
                number = None  # how many records the skipped bytes held is unknown
            resume = min(resume, end)
            yield Record(failed, pos, None, problem, resume)
            pos = resume
        if pos > end and offsets is None:
            # The last record ran past the next task's first start: the file is damaged there.
            yield _ran_past(path, pos, end)


def _not_listed(where: str, offsets: list[int] | None, expected: int, pos: int) -> str | None:
    """The problem of a record at ``pos`` where the index (if any) lists its ``expected``-th
    start elsewhere, or lists no more records; None when the two agree."""
    if offsets is None or (expected < len(offsets) and offsets[expected] == pos):
        return None
    listed = f"byte {offsets[expected]}" if expected < len(offsets) else "no record"
    return (
        f"{where}: the file has a record there, its index has {listed} next "
        "(the .idx does not match the .rec; --no-index reads the .rec alone)"
    )


def _ran_past(path: str, pos: int, end: int) -> Record:
    """The problem of a range's last record, which ended at ``pos``, past ``end``: the start of
    the next range's first record."""
    return Record(
        None,
        pos,
        None,
        f"{path}: the record before byte {pos} runs past a record start at byte {end} "
        "(damaged file)",
    )


def _where(path: str, number: int | None, pos: int, first: int | None, start: int) -> str:
    if number is not None:
        return f"{path}: record {number} at byte {pos}"
    if first is None and start:
        return f"{path}: a record at byte {pos} (in the range from byte {start})"
    return f"{path}: a record at byte {pos}"


def read_index(path: str | os.PathLike[str]) -> list[tuple[str, int]]:
    """An ``.idx`` file's (key, offset) lines, sorted by offset; RecordIOError naming the line."""
    entries = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            fields = line.rstrip("\n").split("\t")
            try:
                if len(fields) != 2:
                    raise ValueError
                entries.append((fields[0], int(fields[1])))
            except ValueError:
                raise RecordIOError(
                    f"{path}:{number}: {line.strip()!r} is not an index line 'key<TAB>offset'"
                ) from None
    entries.sort(key=lambda e: e[1])
    for (_, a), (key, b) in itertools.pairwise(entries):
        if a == b:
            raise RecordIOError(f"{path}: key {key!r} has the offset {b} of another key")
    return entries


def unpack(data: bytes) -> ImageRecord:
    """An image record's header, labels and image bytes, as ``mx.recordio.unpack`` reads them;
    ValueError when the record is too short for them."""
    if len(data) < IR_SIZE:
        raise ValueError(f"{len(data)} bytes, too short for the {IR_SIZE}-byte image header")
    flag, label, image_id, id2 = struct.unpack_from(IR_FORMAT, data)
    if flag == 0:
        return ImageRecord(0, np.array([label], np.float32), image_id, id2, data[IR_SIZE:])
    end = IR_SIZE + 4 * flag
    if end > len(data):
        raise ValueError(
            f"the image header announces {flag} labels, more than the record's {len(data)} bytes hold"
        )
    labels = np.frombuffer(data, "<f4", flag, IR_SIZE).astype(np.float32)
    return ImageRecord(flag, labels, image_id, id2, data[end:])


def pack(labels: float | list[float], image_id: int, image: bytes, id2: int = 0) -> bytes:
    """An image record as ``mx.recordio.pack`` makes it: one number as the header's label,
    a list as ``flag`` float32 labels after the header."""
    if isinstance(labels, (list, tuple, np.ndarray)):
        values = np.asarray(labels, "<f4")
        return struct.pack(IR_FORMAT, values.size, 0.0, image_id, id2) + values.tobytes() + image
    return struct.pack(IR_FORMAT, 0, labels, image_id, id2) + image


def encode_record(data: bytes) -> bytes:
    """One record's physical bytes as dmlc-core's ``RecordIOWriter::WriteRecord`` writes them."""
    if len(data) >= 1 << 29:
        raise ValueError("RecordIO records hold less than 2**29 bytes")
    out, begin = [], 0
    for i in range(0, len(data) - 3, 4):
        if data[i : i + 4] == MAGIC_BYTES:
            out.append(_part(1 if begin == 0 else 2, data[begin:i]))
            begin = i + 4
    out.append(_part(3 if begin else 0, data[begin:]))
    return b"".join(out)


def _part(cflag: int, chunk: bytes) -> bytes:
    header = struct.pack("<II", MAGIC, cflag << 29 | len(chunk))
    return header + chunk + bytes(padded(len(chunk)) - len(chunk))


def write_records(
    path: str | os.PathLike[str], payloads: list[bytes], keys: list[int] | None = None
) -> None:
    """Write a ``.rec`` file, and with ``keys`` its ``.idx`` (for demo data and tests; recordmill
    itself only reads them)."""
    lines, offset = [], 0
    with open(path, "wb") as f:
        for i, data in enumerate(payloads):
            if keys is not None:
                lines.append(f"{keys[i]}\t{offset}\n")
            raw = encode_record(data)
            f.write(raw)
            offset += len(raw)
    if keys is not None:
        Path(path).with_suffix(".idx").write_text("".join(lines))


def make_demo(folder: Path, rng: np.random.Generator) -> None:
    """Two im2rec-style files of 20 small images each, ``train.rec`` with its ``.idx`` (one label
    a record) and ``val.rec`` without (labels of width 2); one image's JPEG comment holds the magic
    number at an aligned position, so that record is written in parts."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for name, width in (("train", 1), ("val", 2)):
        payloads = []
        for i in range(20):
            label = i % 4
            pixels = np.zeros((24, 32, 3), np.uint8)
            pixels[:, :, label % 3] = 60 * (label + 1)  # a class colour: learnable
            pixels += rng.integers(0, 40, size=pixels.shape, dtype=np.uint8)
            buffer = io.BytesIO()
            Image.fromarray(pixels).save(buffer, "JPEG" if i % 5 else "PNG", quality=90)
            image = buffer.getvalue()
            if i == 7:  # after a 24-byte header, SOI and COM's 4 bytes: the magic at byte 32
                comment = b"rm" + MAGIC_BYTES + b"demo"
                image = (
                    image[:2]
                    + b"\xff\xfe"
                    + struct.pack(">H", len(comment) + 2)
                    + comment
                    + image[2:]
                )
            labels = float(label) if width == 1 else [float(label), float(i) / 2]
            payloads.append(pack(labels, 1000 * width + i, image))
        write_records(folder / f"{name}.rec", payloads, list(range(20)) if width == 1 else None)
