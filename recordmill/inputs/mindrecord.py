"""Reading MindSpore's MindRecord files without MindSpore (``mindrecord_writer`` writes them, for
demo data and tests).

Read from MindSpore's source (``mindspore/ccsrc/minddata/mindrecord/``: ``shard_header.cc``,
``shard_writer.cc``, ``shard_column.cc``, ``shard_reader.cc``; ``mindrecord/filewriter.py``) and
checked against files that ``mindspore.mindrecord.FileWriter`` 2.10 wrote.

A dataset is one shard file (``x.mindrecord``) or several (``x.mindrecord0`` .. ``N-1``), each with
a SQLite index ``.db`` beside it, which this reader does not need. A shard file starts with
``uint64 n`` (little-endian) and ``n`` bytes of JSON, the header: ``schema`` (MindRecord types
``int32``/``int64``/``float32``/``float64``/``string``/``bytes``, arrays with a ``shape``),
``blob_fields``, ``shard_addresses`` (every shard's file name), ``header_size``, ``page_size``,
``version`` and this shard's ``page`` list. Page ``k`` starts at ``header_size + k * page_size``.

A ``BLOB_DATA`` page holds rows ``start_row_id`` .. ``end_row_id`` of the shard, each ``uint64
length`` (little-endian) + the row's blob: with one blob field, its bytes; with several, in the
order of ``blob_fields``, ``uint64 size`` (big-endian) + bytes each. Bytes fields are stored as
they are, arrays as their little-endian elements; from version 3.0, int32/int64 arrays are
compressed (``uint32 count`` big-endian, 2 bits per element saying its width, 1/2/4/8 bytes, then
the elements, little-endian), when the schema has such an array. The other (scalar) fields of each
row are a msgpack map in a ``RAW_DATA`` page, in the row group whose id is the blob page's
``page_type_id``: ``uint64 length`` + msgpack per row, from the group's ``offset``. Nothing is
checksummed: damage is found where lengths, msgpack or array sizes do not add up.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from recordmill.errors import InputError

DTYPES = {"int32": "<i4", "int64": "<i8", "float32": "<f4", "float64": "<f8"}
TYPES = ("int32", "int64", "float32", "float64", "string", "bytes")
MAX_HEADER = 1 << 30  # MindSpore allows up to 128 MB; a larger length is damage, not a header
COMPRESSED_INTS_FROM = (3, 0)  # the format version from which int arrays are compressed


class MindRecordError(ValueError):
    """A damaged MindRecord file; the message names the file, the page or row and the byte offset."""


@dataclass(frozen=True)
class Header:
    """What a shard's header says."""

    path: str
    schema: dict[str, dict[str, Any]]
    blob_fields: tuple[str, ...]
    shard_addresses: tuple[str, ...]
    header_size: int
    page_size: int
    version: str
    pages: tuple[dict[str, Any], ...]

    @property
    def blob_pages(self) -> list[dict[str, Any]]:
        """The BLOB_DATA pages in row order."""
        pages = [p for p in self.pages if p["page_type"] == "BLOB_DATA"]
        return sorted(pages, key=lambda p: p["page_type_id"])

    @property
    def rows(self) -> int:
        return sum(p["end_row_id"] - p["start_row_id"] for p in self.blob_pages)

    @property
    def compressed_ints(self) -> bool:
        """Whether int arrays are stored compressed (MindSpore's ShardColumn ``compress_integer``)."""
        return version_numbers(self.version) >= COMPRESSED_INTS_FROM and any(
            "shape" in f and f["type"] in ("int32", "int64") for f in self.schema.values()
        )


def version_numbers(version: str) -> tuple[int, ...]:
    """A header's ``version`` as numbers to compare (``"10.0"`` is ``(10, 0)``, after ``"3.0"``);
    ``()`` for none."""
    found = re.match(r"\d+(\.\d+)*", version.strip())
    return tuple(int(n) for n in found.group().split(".")) if found else ()


def read_header(path: str | os.PathLike[str]) -> Header:
    path = os.fspath(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise MindRecordError(f"{path}: header at byte 0: the file ends before its header")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER:
            raise MindRecordError(
                f"{path}: header at byte 0: a header length of {length} bytes (damaged, encrypted "
                "with mindspore.mindrecord.set_enc_key, or not a MindRecord file)"
            )
        text = f.read(length)
    if len(text) < length:
        raise MindRecordError(
            f"{path}: header at byte 8: the file ends inside the header (truncated: "
            f"{len(text)} of {length} bytes)"
        )
    try:
        raw = json.loads(text)
        schema = raw["schema"][0]
        header = Header(
            path=path,
            schema=dict(schema["schema"]),
            blob_fields=tuple(schema["blob_fields"]),
            shard_addresses=tuple(raw["shard_addresses"]),
            header_size=int(raw["header_size"]),
            page_size=int(raw["page_size"]),
            version=str(raw.get("version", "")),
            pages=tuple(raw["page"] or ()),
        )
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise MindRecordError(
            f"{path}: header at byte 8: not a MindRecord header (damaged? {type(e).__name__}: {e})"
        ) from None
    for name, field in header.schema.items():
        if field.get("type") not in TYPES:
            raise MindRecordError(
                f"{path}: header at byte 8: field {name!r} has type {field.get('type')!r}, "
                f"not one of {', '.join(TYPES)}"
            )
    return header


def is_shard_name(name: str) -> bool:
    """``x.mindrecord`` or ``x.mindrecordN``; not the ``.db`` index nor a writer's temp files."""
    stem, dot, suffix = name.rpartition(".mindrecord")
    return bool(dot and stem) and (suffix == "" or suffix.isdigit())


def shard_paths(path: str | os.PathLike[str]) -> list[str]:
    """Every shard of the dataset(s) at ``path``: a shard file (its header lists its siblings, in
    its folder) or a folder (every dataset in it), in shard order."""
    path = os.fspath(path)
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if is_shard_name(n))
        if not names:
            raise InputError(f"--input {path} holds no MindRecord file (x.mindrecord[N])")
        found: list[str] = []
        for name in names:
            full = os.path.join(path, name)
            if full not in found:
                found.extend(p for p in _siblings(full) if p not in found)
        return found
    if not os.path.isfile(path):
        raise InputError(f"--input {path} is neither a file nor a folder")
    return _siblings(path)


def _siblings(path: str) -> list[str]:
    folder = os.path.dirname(path)
    try:
        names = read_header(path).shard_addresses
    except MindRecordError:
        return [path]  # reading its rows reports the damage (or lists it among the rejects)
    paths = [os.path.join(folder, os.path.basename(n)) for n in names] or [path]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise InputError(
            f"{path}: its header lists shards {', '.join(names)}; missing: {', '.join(missing)}"
        )
    return paths


def recordmill_schema(header: Header) -> dict[str, dict[str, Any]]:
    """The header's schema in recordmill's terms (the types have the same names)."""
    spec = {}
    for name, field in header.schema.items():
        column: dict[str, Any] = {"type": field["type"]}
        if "shape" in field:
            column["shape"] = [int(n) for n in field["shape"]]
        spec[name] = column
    return spec


def rows(
    header: Header, page_type_ids: Sequence[int] | None = None
) -> Iterator[tuple[str, dict[str, Any] | None, str | None]]:
    """(source, row, problem) for each row of the shard's blob pages (those of ``page_type_ids``,
    or all): ``problem`` says why the row is unreadable, else None; ``source`` is ``path:row``. A
    damaged or missing page yields one (``path:page N``, None, problem) for all its rows."""
    raw_groups = {}
    for page in header.pages:
        if page["page_type"] == "RAW_DATA":
            groups = sorted(page["row_group_ids"], key=lambda g: g["offset"])
            for k, group in enumerate(groups):
                end = groups[k + 1]["offset"] if k + 1 < len(groups) else page["page_size"]
                raw_groups[group["id"]] = (page, group["offset"], end)
    wanted = None if page_type_ids is None else set(page_type_ids)
    with open(header.path, "rb") as f:
        for blob_page in header.blob_pages:
            if wanted is not None and blob_page["page_type_id"] not in wanted:
                continue
            try:
                yield from _page_rows(f, header, blob_page, raw_groups)
            except MindRecordError as e:
                yield f"{header.path}:page {blob_page['page_id']}", None, str(e)


def _page_at(f: Any, header: Header, page: dict[str, Any], start: int, end: int) -> bytes:
    offset = header.header_size + page["page_id"] * header.page_size + start
    f.seek(offset)
    data = f.read(end - start)
    if len(data) < end - start:
        raise MindRecordError(
            f"{header.path}: {page['page_type']} page {page['page_id']} at byte {offset}: the "
            f"file ends inside the page (truncated: {len(data)} of {end - start} bytes)"
        )
    return data


def _records(data: bytes, count: int, where: str, base: int) -> list[tuple[int, bytes]]:
    """``count`` (offset, bytes) records of ``uint64 length`` + bytes filling ``data`` exactly."""
    out, at = [], 0
    for i in range(count):
        if at + 8 > len(data):
            raise MindRecordError(f"{where}, row {i} at byte {base + at}: the page ends early")
        (length,) = struct.unpack_from("<Q", data, at)
        if at + 8 + length > len(data):
            raise MindRecordError(
                f"{where}, row {i} at byte {base + at}: a length of {length} bytes runs past the "
                "page's end (damaged)"
            )
        out.append((base + at, data[at + 8 : at + 8 + length]))
        at += 8 + length
    if at != len(data):
        raise MindRecordError(
            f"{where} at byte {base + at}: {len(data) - at} bytes after its {count} rows (damaged)"
        )
    return out


def _page_rows(
    f: Any, header: Header, blob_page: dict[str, Any], raw_groups: dict
) -> Iterator[tuple[str, dict[str, Any] | None, str | None]]:
    first, count = blob_page["start_row_id"], blob_page["end_row_id"] - blob_page["start_row_id"]
    page_id, group_id = blob_page["page_id"], blob_page["page_type_id"]
    where = f"{header.path}: rows {first}..{first + count - 1}, blob page {page_id}"
    if group_id not in raw_groups:
        raise MindRecordError(
            f"{where} at byte {header.header_size + page_id * header.page_size}: no raw page holds "
            f"its row group {group_id} (damaged header)"
        )
    blob_base = header.header_size + page_id * header.page_size
    blobs = _records(
        _page_at(f, header, blob_page, 0, blob_page["page_size"]), count, where, blob_base
    )
    raw_page, start, end = raw_groups[group_id]
    raw_base = header.header_size + raw_page["page_id"] * header.page_size + start
    raw_where = f"{header.path}: rows {first}..{first + count - 1}, raw page {raw_page['page_id']}"
    raws = _records(_page_at(f, header, raw_page, start, end), count, raw_where, raw_base)
    for i, ((blob_at, blob), (raw_at, raw)) in enumerate(zip(blobs, raws, strict=True)):
        source = f"{header.path}:{first + i}"
        try:
            yield source, decode_row(header, raw, blob), None
        except (MindRecordError, ValueError, KeyError, IndexError, struct.error) as e:
            yield (
                source,
                None,
                (
                    f"{header.path}: row {first + i} (raw data at byte {raw_at}, blob at byte "
                    f"{blob_at}): {e} (damaged)"
                ),
            )


def decode_row(header: Header, raw: bytes, blob: bytes) -> dict[str, Any]:
    """One row from its msgpack raw bytes and its blob."""
    values = unpackb(raw) if raw else {}
    if not isinstance(values, dict):
        raise MindRecordError(f"the raw data is a msgpack {type(values).__name__}, not a map")
    row: dict[str, Any] = {}
    for name, field in header.schema.items():
        if name in header.blob_fields:
            continue
        if name not in values:
            raise MindRecordError(f"the raw data lacks field {name!r}")
        row[name] = _scalar(name, field["type"], values[name])
    parts = _blob_parts(blob, len(header.blob_fields))
    for name, part in zip(header.blob_fields, parts, strict=True):
        row[name] = _blob_value(name, header.schema[name], part, header.compressed_ints)
    return row


def _scalar(name: str, kind: str, value: Any) -> Any:
    if kind in ("int32", "int64"):
        if not isinstance(value, int) or isinstance(value, bool):
            raise MindRecordError(f"field {name!r} ({kind}) holds {value!r}")
        return value
    if kind in ("float32", "float64"):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise MindRecordError(f"field {name!r} ({kind}) holds {value!r}")
        return np.float32(value) if kind == "float32" else float(value)
    if kind == "string":
        if not isinstance(value, str):
            raise MindRecordError(f"field {name!r} (string) holds {value!r}")
        return value
    return bytes(value) if isinstance(value, (bytes, bytearray)) else str(value).encode()


def _blob_parts(blob: bytes, fields: int) -> list[bytes]:
    if fields == 0:
        return []  # MindSpore's 4-byte dummy blob
    if fields == 1:
        return [blob]
    parts, at = [], 0
    for _ in range(fields):
        if at + 8 > len(blob):
            raise MindRecordError("the blob ends before all its fields")
        size = int.from_bytes(blob[at : at + 8], "big")
        if at + 8 + size > len(blob):
            raise MindRecordError(f"a blob field of {size} bytes runs past the blob's end")
        parts.append(blob[at + 8 : at + 8 + size])
        at += 8 + size
    if at != len(blob):
        raise MindRecordError(f"{len(blob) - at} bytes after the blob's fields")
    return parts


def _blob_value(name: str, field: dict[str, Any], data: bytes, compressed_ints: bool) -> Any:
    kind = field["type"]
    if kind == "bytes":
        return data
    if kind == "string":
        return data.decode("utf-8")
    if compressed_ints and kind in ("int32", "int64"):
        values = uncompress_ints(data).astype(DTYPES[kind])
    else:
        if len(data) % np.dtype(DTYPES[kind]).itemsize:
            raise MindRecordError(f"field {name!r}: {len(data)} bytes are not whole {kind}s")
        values = np.frombuffer(data, DTYPES[kind])
    shape = field.get("shape")
    if shape:
        fixed = -1 not in shape
        if fixed and int(np.prod(shape)) != values.size:
            raise MindRecordError(f"field {name!r} holds {values.size} values, not shape {shape}")
        values = values.reshape(shape)
    elif values.size == 1:
        return values[0]
    return values


def uncompress_ints(data: bytes) -> np.ndarray:
    """MindSpore's compressed integer array (ShardColumn::UncompressInt) as int64."""
    if len(data) < 4:
        raise MindRecordError("a compressed integer array shorter than its count")
    count = int.from_bytes(data[:4], "big")
    bitmap_end = 4 + (count + 3) // 4
    if bitmap_end > len(data):
        raise MindRecordError(f"a compressed array of {count} integers ends in its bitmap")
    bitmap = np.frombuffer(data, np.uint8, bitmap_end - 4, 4)
    kinds = ((bitmap[:, None] >> np.array([6, 4, 2, 0], np.uint8)) & 3).ravel()[:count]
    widths = np.left_shift(1, kinds.astype(np.int64))
    starts = bitmap_end + np.concatenate(([0], np.cumsum(widths)[:-1])) if count else widths
    if bitmap_end + int(widths.sum()) != len(data):
        raise MindRecordError(
            f"a compressed array of {count} integers needs {bitmap_end + int(widths.sum())} "
            f"bytes and has {len(data)}"
        )
    raw = np.frombuffer(data, np.uint8)
    out = np.empty(count, np.int64)
    for kind in range(4):
        chosen = np.nonzero(kinds == kind)[0]
        if chosen.size:
            width = 1 << kind
            picked = raw[starts[chosen][:, None] + np.arange(width)]
            out[chosen] = np.ascontiguousarray(picked).view(f"<i{width}").ravel()
    return out


# msgpack: the subset nlohmann::json::to_msgpack writes (MindSpore's raw data).


def unpackb(data: bytes) -> Any:
    value, end = _unpack(data, 0)
    if end != len(data):
        raise MindRecordError(f"{len(data) - end} bytes after the msgpack value")
    return value


_FIXED = {0xCA: ">f", 0xCB: ">d", 0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q"}
_FIXED.update({0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"})
_SIZED = {0xD9: (">B", "str"), 0xDA: (">H", "str"), 0xDB: (">I", "str")}
_SIZED.update({0xC4: (">B", "bin"), 0xC5: (">H", "bin"), 0xC6: (">I", "bin")})
_SIZED.update({0xDC: (">H", "array"), 0xDD: (">I", "array")})
_SIZED.update({0xDE: (">H", "map"), 0xDF: (">I", "map")})


def _unpack(data: bytes, at: int) -> tuple[Any, int]:
    if at >= len(data):
        raise MindRecordError("the msgpack data ends early")
    tag = data[at]
    at += 1
    if tag <= 0x7F:
        return tag, at
    if tag >= 0xE0:
        return tag - 0x100, at
    if 0xA0 <= tag <= 0xBF:
        return _sized(data, at, tag & 0x1F, "str")
    if 0x90 <= tag <= 0x9F:
        return _sized(data, at, tag & 0x0F, "array")
    if 0x80 <= tag <= 0x8F:
        return _sized(data, at, tag & 0x0F, "map")
    if tag in (0xC0, 0xC2, 0xC3):
        return {0xC0: None, 0xC2: False, 0xC3: True}[tag], at
    if tag in _FIXED:
        fmt = _FIXED[tag]
        size = struct.calcsize(fmt)
        if at + size > len(data):
            raise MindRecordError("the msgpack data ends inside a number")
        value = struct.unpack_from(fmt, data, at)[0]
        return value, at + size
    if tag in _SIZED:
        fmt, kind = _SIZED[tag]
        size = struct.calcsize(fmt)
        if at + size > len(data):
            raise MindRecordError("the msgpack data ends inside a length")
        return _sized(data, at + size, struct.unpack_from(fmt, data, at)[0], kind)
    raise MindRecordError(f"msgpack type byte 0x{tag:02x} is not one MindRecord writes")


def _sized(data: bytes, at: int, size: int, kind: str) -> tuple[Any, int]:
    if kind in ("str", "bin"):
        if at + size > len(data):
            raise MindRecordError(f"a msgpack {kind} of {size} bytes runs past the data's end")
        chunk = data[at : at + size]
        return (chunk.decode("utf-8") if kind == "str" else chunk), at + size
    if kind == "array":
        items = []
        for _ in range(size):
            item, at = _unpack(data, at)
            items.append(item)
        return items, at
    mapping = {}
    for _ in range(size):
        key, at = _unpack(data, at)
        mapping[key], at = _unpack(data, at)
    return mapping, at
