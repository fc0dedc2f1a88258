"""Reading (and, for demo data and tests, writing) MindSpore's MindRecord files without MindSpore.

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
import sqlite3
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from recordmill.errors import InputError

DTYPES = {"int32": "<i4", "int64": "<i8", "float32": "<f4", "float64": "<f8"}
TYPES = ("int32", "int64", "float32", "float64", "string", "bytes")
MAX_HEADER = 1 << 30  # MindSpore allows up to 128 MB; a larger length is damage, not a header


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
        return self.version >= "3.0" and any(
            "shape" in f and f["type"] in ("int32", "int64") for f in self.schema.values()
        )


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


def compress_ints(values: np.ndarray) -> bytes:
    """The inverse of :func:`uncompress_ints` (ShardColumn::CompressInt): each integer in the
    fewest of 1, 2, 4 or 8 bytes."""
    values = np.asarray(values, np.int64).ravel()
    kinds = np.full(values.size, 3, np.uint8)
    for kind, (low, high) in enumerate(((-(2**7), 2**7), (-(2**15), 2**15), (-(2**31), 2**31))):
        fits = (values >= low) & (values < high) & (kinds == 3)
        kinds[fits] = kind
    padded = np.zeros((values.size + 3) // 4 * 4, np.uint8)
    padded[: values.size] = kinds
    bitmap = (padded.reshape(-1, 4) << np.array([6, 4, 2, 0], np.uint8)).sum(1).astype(np.uint8)
    body = b"".join(
        int(v).to_bytes(1 << int(k), "little", signed=True)
        for v, k in zip(values, kinds, strict=True)
    )
    return values.size.to_bytes(4, "big") + bitmap.tobytes() + body


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


def packb(value: Any) -> bytes:
    """msgpack of a map of str/int/float values, as nlohmann::json::to_msgpack writes it."""
    if isinstance(value, dict):
        assert len(value) < 16
        return bytes([0x80 | len(value)]) + b"".join(packb(k) + packb(v) for k, v in value.items())
    if isinstance(value, str):
        raw = value.encode()
        if len(raw) < 32:
            return bytes([0xA0 | len(raw)]) + raw
        for tag, fmt, limit in ((0xD9, ">B", 1 << 8), (0xDA, ">H", 1 << 16), (0xDB, ">I", 1 << 32)):
            if len(raw) < limit:
                return bytes([tag]) + struct.pack(fmt, len(raw)) + raw
    if isinstance(value, (int, np.integer)):
        value = int(value)
        if 0 <= value < 128 or -32 <= value < 0:
            return struct.pack(">b" if value < 0 else ">B", value)
        if value >= 0:
            for tag, fmt, limit in ((0xCC, ">B", 8), (0xCD, ">H", 16), (0xCE, ">I", 32)):
                if value < 1 << limit:
                    return bytes([tag]) + struct.pack(fmt, value)
            return b"\xcf" + struct.pack(">Q", value)
        for tag, fmt, limit in ((0xD0, ">b", 7), (0xD1, ">h", 15), (0xD2, ">i", 31)):
            if value >= -(1 << limit):
                return bytes([tag]) + struct.pack(fmt, value)
        return b"\xd3" + struct.pack(">q", value)
    if isinstance(value, np.float32):
        return b"\xca" + struct.pack(">f", value)
    return b"\xcb" + struct.pack(">d", float(value))


# Writing, as MindSpore's FileWriter does (for demo data and tests; recordmill only reads them).


def write_dataset(
    path: str | os.PathLike[str],
    schema: dict[str, dict[str, Any]],
    rows: Sequence[dict[str, Any]],
    shard_num: int = 1,
    page_size: int = 1 << 15,
    header_size: int = 1 << 14,
) -> list[Path]:
    """Write ``rows`` as a MindRecord dataset of ``shard_num`` shards (``path``, or ``pathN``), with
    their ``.db`` index files; the rows are split into consecutive runs, one per shard."""
    path = Path(path)
    names = [path.name] if shard_num == 1 else [f"{path.name}{k}" for k in range(shard_num)]
    blob_fields = [
        n for n in sorted(schema) if "shape" in schema[n] or schema[n]["type"] == "bytes"
    ]
    ordered = {n: schema[n] for n in sorted(schema)}
    index_fields = [n for n in ordered if n not in blob_fields]
    header_fields = Header("", ordered, tuple(blob_fields), (), 0, 0, "3.0", ())
    bounds = np.linspace(0, len(rows), shard_num + 1).round().astype(int)
    shards = []
    for k in range(shard_num):
        chunk = rows[bounds[k] : bounds[k + 1]]
        raws = [packb({n: _plain(r[n], ordered[n]) for n in index_fields}) for r in chunk]
        blobs = [_blob(header_fields, r) for r in chunk]
        shards.append(_layout(k, raws, blobs, page_size))
    schema_json = [{"blob_fields": blob_fields, "desc": path.name, "schema": ordered}]
    written = []
    for k, (pages, bodies, index) in enumerate(shards):
        header = {
            "header_size": header_size,
            "index_fields": [{"index_field": n, "schema_id": 0} for n in index_fields] or None,
            "page": pages,
            "page_size": page_size,
            "compression_size": 0,
            "schema": schema_json,
            "shard_addresses": names,
            "shard_id": k,
            "statistics": None,
            "version": "3.0",
        }
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
        if len(text) + 8 > header_size:
            raise ValueError(f"the header needs {len(text) + 8} bytes; raise header_size")
        target = path.parent / names[k]
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text)
            for page, body in zip(pages, bodies, strict=True):
                f.seek(header_size + page["page_id"] * page_size)
                f.write(body)
        _write_index(target, names[k], ordered, index_fields, chunk, index)
        written.append(target)
    return written


def _plain(value: Any, field: dict[str, Any]) -> Any:
    if field["type"] == "float32":
        return np.float32(value)
    return value.item() if isinstance(value, np.generic) else value


def _blob(header: Header, row: dict[str, Any]) -> bytes:
    parts = []
    for name in header.blob_fields:
        field, value = header.schema[name], row[name]
        if field["type"] == "bytes":
            parts.append(bytes(value))
        elif header.compressed_ints and field["type"] in ("int32", "int64"):
            parts.append(compress_ints(np.asarray(value)))
        else:
            parts.append(np.asarray(value, DTYPES[field["type"]]).tobytes())
    if not parts:
        return b"\0\0\0\0"  # MindSpore's dummy blob for a schema without blob fields
    if len(parts) == 1:
        return parts[0]
    return b"".join(len(p).to_bytes(8, "big") + p for p in parts)


def _layout(shard: int, raws: list[bytes], blobs: list[bytes], page_size: int):
    """Pages (header entries), their bodies, and each row's (raw page, raw offsets, group, blob
    page, blob offsets) for the index: blob pages of consecutive rows, each one a row group of
    the raw pages, which follow."""
    groups: list[list[int]] = []
    blob_bytes = raw_bytes = 0
    for i, (raw, blob) in enumerate(zip(raws, blobs, strict=True)):
        if 8 + len(blob) > page_size or 8 + len(raw) > page_size:
            raise ValueError(f"row {i} does not fit in a page of {page_size} bytes")
        if (
            not groups
            or blob_bytes + 8 + len(blob) > page_size
            or raw_bytes + 8 + len(raw) > page_size
        ):
            groups.append([])
            blob_bytes = raw_bytes = 0
        groups[-1].append(i)
        blob_bytes += 8 + len(blob)
        raw_bytes += 8 + len(raw)
    pages: list[dict[str, Any]] = []
    bodies: list[bytes] = []
    index: list[tuple] = []
    for g, rows_in in enumerate(groups):
        body = b"".join(struct.pack("<Q", len(blobs[i])) + blobs[i] for i in rows_in)
        page = _page(len(pages), shard, "BLOB_DATA", g, rows_in[0], rows_in[-1] + 1, len(body))
        page["row_group_ids"] = [{"id": 0, "offset": 0}]
        pages.append(page)
        bodies.append(body)
    raw_page: dict[str, Any] | None = None
    raw_pages = 0
    for g, rows_in in enumerate(groups):
        body = b"".join(struct.pack("<Q", len(raws[i])) + raws[i] for i in rows_in)
        if raw_page is None or raw_page["page_size"] + len(body) > page_size:
            raw_page = _page(len(pages), shard, "RAW_DATA", raw_pages, 0, 0, 0)
            raw_pages += 1
            pages.append(raw_page)
            bodies.append(b"")
        start = raw_page["page_size"]
        raw_page["row_group_ids"].append({"id": g, "offset": start})
        raw_page["page_size"] += len(body)
        bodies[raw_page["page_id"]] += body
        blob_at = raw_at = 0
        for i in rows_in:
            raw_end, blob_end = raw_at + 8 + len(raws[i]), blob_at + 8 + len(blobs[i])
            index.append(
                (raw_page["page_id"], start + raw_at, start + raw_end, g, g, blob_at, blob_end)
            )
            raw_at, blob_at = raw_end, blob_end
    return pages, bodies, index


def _page(page_id, shard, kind, type_id, start, end, size) -> dict[str, Any]:
    return {
        "end_row_id": end,
        "page_id": page_id,
        "page_size": size,
        "page_type": kind,
        "page_type_id": type_id,
        "row_group_ids": [],
        "shard_id": shard,
        "start_row_id": start,
    }


SQL_TYPES = {"int32": "INTEGER", "int64": "INTEGER", "float32": "REAL", "float64": "REAL"}


def _write_index(target, name, schema, index_fields, rows, index) -> None:
    """The ``.db`` SQLite index MindSpore's reader needs (the same tables as its writer's)."""
    db = Path(f"{target}.db")
    db.unlink(missing_ok=True)
    extra = "".join(
        f",INC_{k} INT, {n}_0 {SQL_TYPES.get(schema[n]['type'], 'TEXT')}"
        for k, n in enumerate(index_fields)
    )
    key = ",".join(["ROW_ID", *(f"INC_{k}" for k in range(len(index_fields)))])
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE SHARD_NAME(NAME TEXT NOT NULL)")
        conn.execute("INSERT INTO SHARD_NAME VALUES (?)", (name,))
        conn.execute(
            "CREATE TABLE INDEXES(  ROW_ID INT NOT NULL, PAGE_ID_RAW INT NOT NULL, "
            "PAGE_OFFSET_RAW INT NOT NULL, PAGE_OFFSET_RAW_END INT NOT NULL, ROW_GROUP_ID INT NOT "
            "NULL, PAGE_ID_BLOB INT NOT NULL, PAGE_OFFSET_BLOB INT NOT NULL, PAGE_OFFSET_BLOB_END "
            f"INT NOT NULL{extra}, PRIMARY KEY({key}))"
        )
        for row_id, (row, entry) in enumerate(zip(rows, index, strict=True)):
            values = [v for n in index_fields for v in (0, _plain(row[n], schema[n]))]
            values = [float(v) if isinstance(v, np.floating) else v for v in values]
            marks = ",".join("?" * (8 + len(values)))
            conn.execute(f"INSERT INTO INDEXES VALUES ({marks})", (row_id, *entry, *values))
    conn.close()


# Demo data: a few dozen rows of every MindRecord type, in two shards.

DEMO_SCHEMA = {
    "id": {"type": "int64"},
    "label": {"type": "int32"},
    "score": {"type": "float32"},
    "weight": {"type": "float64"},
    "file_name": {"type": "string"},
    "data": {"type": "bytes"},
    "bbox": {"type": "float32", "shape": [-1, 4]},
    "tokens": {"type": "int64", "shape": [-1]},
    "mask": {"type": "int32", "shape": [2, 3]},
    "embedding": {"type": "float64", "shape": [4]},
}
DEMO_ROWS = 40


def demo_rows(rng: np.random.Generator, count: int = DEMO_ROWS) -> list[dict[str, Any]]:
    from io import BytesIO

    from PIL import Image

    out = []
    for i in range(count):
        pixels = rng.integers(0, 256, size=(16, 16, 3), dtype=np.uint8)
        jpeg = BytesIO()
        Image.fromarray(pixels).save(jpeg, format="JPEG", quality=80)
        boxes = int(rng.integers(0, 4))
        out.append(
            {
                "id": i,
                "label": int(rng.integers(0, 10)),
                "score": np.float32(rng.random()),
                "weight": float(rng.normal()),
                "file_name": f"images/{i:05d}.jpg",
                "data": jpeg.getvalue(),
                "bbox": rng.random((boxes, 4)).astype(np.float32),
                "tokens": rng.integers(-(2**40), 2**40, size=int(rng.integers(0, 6))),
                "mask": rng.integers(-5, 300, size=(2, 3)).astype(np.int32),
                "embedding": rng.normal(size=4),
            }
        )
    return out


def make_demo(folder: Path, rng: np.random.Generator) -> None:
    """A two-shard MindRecord dataset, ``demo.mindrecord0`` and ``1`` with their ``.db`` files."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_dataset(folder / "demo.mindrecord", DEMO_SCHEMA, demo_rows(rng), shard_num=2)
