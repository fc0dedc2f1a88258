"""Writing MindSpore's MindRecord files as its ``FileWriter`` does, for demo data and tests:
recordmill itself only reads them (:mod:`recordmill.inputs.mindrecord`, which documents the
format).
"""

from __future__ import annotations

import json
import os
import sqlite3
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from recordmill.inputs.mindrecord import DTYPES, Header

VERSION = "3.0"  # the format version written: int arrays compressed


def compress_ints(values: np.ndarray) -> bytes:
    """The inverse of :func:`~recordmill.inputs.mindrecord.uncompress_ints`
    (ShardColumn::CompressInt): each integer in the fewest of 1, 2, 4 or 8 bytes."""
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
    header_fields = Header("", ordered, tuple(blob_fields), (), 0, 0, VERSION, ())
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
            "version": VERSION,
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
