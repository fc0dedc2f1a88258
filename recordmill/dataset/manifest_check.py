"""Whether a manifest file holds the manifest that was written: read it whole and check it, so
that a changed byte anywhere in what recordmill reads of it is an error (:class:`Damaged`, one
line) and never a crash in a tool or a quietly different dataset.

* Its JSON has a checksum of its own beside it in the file's metadata (``CHECKSUM_KEY``, the
  SHA-256 of the very bytes stored); manifests written before it existed have none and are
  checked by their structure alone.
* An Arrow IPC file keeps its schema, and so the JSON, twice (the stream's schema message and
  the footer); ``pyarrow.ipc.open_file`` reads the footer's only, so the two are compared.
* The file itself: no rows, and the schema that the JSON records (other tools read that one).
* The structure (:func:`check_structure`): every key the readers use is there, of its type, so
  that a damaged key is named (which key, which partition) instead of raising ``KeyError``
  somewhere later.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from recordmill.dataset import layout
from recordmill.dataset.layout import FORMATS

FORMAT_VERSION = 2
MANIFEST_KEY = b"recordmill.manifest"
CHECKSUM_KEY = b"recordmill.manifest.sha256"


class Damaged(ValueError):
    """A manifest file that does not hold an intact manifest; the message says what is wrong."""


def checksum(text: bytes) -> bytes:
    """What ``CHECKSUM_KEY`` holds for the manifest's JSON ``text``."""
    return hashlib.sha256(text).hexdigest().encode()


def decode_schema(text: str) -> pa.Schema:
    """The Arrow schema a manifest records (base64 of its IPC message)."""
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text, validate=True)))


def empty_file(schema: pa.Schema, fmt: str, metadata: dict[bytes, bytes]) -> bytes:
    """A file of ``fmt`` with ``schema``, no rows, and ``metadata``: the Parquet file's key-value
    metadata (kept out of the Arrow schema stored beside it, which would hold it a second
    time), or the Arrow IPC schema's. A Parquet one has no row group at all, which Hugging Face
    datasets needs to skip it."""
    sink = pa.BufferOutputStream()
    if fmt == "arrow":
        schema = schema.with_metadata({**(schema.metadata or {}), **metadata})
        pa.ipc.new_file(sink, schema).close()
    else:
        writer = pq.ParquetWriter(sink, schema)
        writer.add_key_value_metadata(metadata)
        writer.close()
    return sink.getvalue().to_pybytes()


def read(data: bytes, fmt: str) -> dict[str, Any]:
    """The manifest held by the bytes of a manifest file of format ``fmt``, checked whole."""
    metadata, file_schema, rows = _open(data, fmt)
    text = metadata.get(MANIFEST_KEY)
    if text is None:
        raise Damaged(f"it holds no manifest ({MANIFEST_KEY.decode()} is not in its metadata)")
    expected = metadata.get(CHECKSUM_KEY)
    if expected is not None and checksum(text) != expected:
        raise Damaged("its checksum does not match its contents: a byte of it was changed")
    try:
        manifest = json.loads(text)
    except ValueError as e:  # UnicodeDecodeError is one
        raise Damaged(f"its JSON cannot be read ({e})") from None
    check_structure(manifest)
    if manifest["format_version"] != FORMAT_VERSION:
        return manifest  # another version's structure: the caller says what to do
    if rows:
        raise Damaged(f"it holds {rows} rows; a manifest file holds none")
    # As the file would hold the recorded schema (Parquet names a list's item "element").
    recorded = _open(empty_file(decode_schema(manifest["schema"]["arrow"]), fmt, {}), fmt)[1]
    if not file_schema.remove_metadata().equals(recorded.remove_metadata(), check_metadata=True):
        raise Damaged("the schema of the file differs from the schema it records")
    return manifest


def _open(data: bytes, fmt: str) -> tuple[dict[bytes, bytes], pa.Schema, int]:
    """The file's metadata, its schema (without that metadata) and its row count."""
    # Any error at all: these are bytes that may be damaged anywhere, and pyarrow raises
    # OSError, ArrowInvalid, ArrowNotImplementedError, binascii.Error ... for them.
    try:
        if fmt == "arrow":
            footer = pa.ipc.open_file(pa.BufferReader(data))
            # The first copy: the stream's schema message, after the 8 bytes of ARROW1 magic.
            first = pa.ipc.open_stream(pa.BufferReader(data[8:])).schema
            if data[:6] != b"ARROW1" or not first.equals(footer.schema, check_metadata=True):
                raise Damaged("its two copies of the schema (and of the manifest) differ")
            rows = sum(footer.get_batch(i).num_rows for i in range(footer.num_record_batches))
            return dict(footer.schema.metadata or {}), footer.schema, rows
        # Rejects can make a footer large; the defaults stop at 100 MB of strings.
        parquet = pq.ParquetFile(pa.BufferReader(data), thrift_string_size_limit=(1 << 31) - 1)
        footer = parquet.metadata
        # pyarrow reads neither the magic at the start nor the Parquet schema beside the Arrow
        # one; other tools do.
        made = pq.ParquetFile(pa.BufferReader(empty_file(parquet.schema_arrow, "parquet", {})))
        if data[:4] != b"PAR1" or _columns(parquet.schema) != _columns(made.schema):
            raise Damaged("its Parquet header or schema is damaged")
        return dict(footer.metadata or {}), parquet.schema_arrow, footer.num_rows
    except Damaged:
        raise
    except Exception as e:
        kind = {"parquet": "a Parquet", "arrow": "an Arrow IPC"}.get(fmt, fmt)
        said = " ".join(str(e).split())  # pyarrow's messages can end in a newline
        raise Damaged(f"it cannot be read as {kind} file ({type(e).__name__}: {said})") from None


def _columns(schema: pq.ParquetSchema) -> list[tuple[Any, ...]]:
    """A Parquet schema's columns as names, levels and physical types: what a damaged byte
    changes, and what no pyarrow version writes otherwise (annotations did change)."""
    return [
        (c.path, c.max_definition_level, c.max_repetition_level, c.physical_type) for c in schema
    ]


# What each key holds: a type, a tuple of types (None allowed), a dict of keys (``?``: may be
# missing; other keys are let be, for what later versions add), or a list of one kind.
_COUNT = "count"  # an int >= 0, not a bool
_FIELD = {"name": str, "type": str, "nullable": bool, "shape?": list, "layout?": str}
_PARTITION = {
    "file": str,
    "rows": _COUNT,
    "bytes": _COUNT,
    "checksum": str,
    "row_groups?": (_COUNT, None),
    "group_offsets?": ([_COUNT], None),
    "group_crc32c?": ([_COUNT], None),
    "batch_crc32?": ([[_COUNT]], None),
    "values?": (dict, None),
}
_TASK = {"task_id": _COUNT, "rows": _COUNT, "count?": _COUNT}
_MANIFEST = {
    "format_version": _COUNT,
    "format": str,
    "total_rows": _COUNT,
    "schema": {"fields": [_FIELD], "arrow": str},
    "partitions": [_PARTITION],
    "tasks": [_TASK],
    "rejects": {"count": _COUNT, "file": (str, None)},
    "plugin": {"name": str, "source?": (str, None), "target?": (str, None), "options": dict},
    "settings": {"row_group_size?": (_COUNT, None)},
    "versions": {"recordmill": str, "pyarrow": str, "python?": str},
    "created?": str,
    "run?": {"plugin": str, "options": dict, "task_number": _COUNT, "settings": dict},
}
# How messages name an entry of a list: the partition by its file, the field by its name.
_ENTRY_NAMES = {
    "partitions": lambda i, e: f"partition {i} ({e.get('file')})",
    "fields": lambda i, e: f"schema field {i} ({e.get('name')})",
    "tasks": lambda i, e: f"task entry {i}",
}


def check_structure(manifest: Any) -> None:
    """Refuse a manifest without the keys readers use, of their types (a :class:`Damaged`
    naming the key, and the partition or field it belongs to)."""
    if not isinstance(manifest, dict):
        raise Damaged(f"it holds {type(manifest).__name__} JSON, not an object")
    if not _is(manifest.get("format_version"), _COUNT):
        raise Damaged('"format_version" is missing or not a number')
    if manifest["format_version"] != FORMAT_VERSION:
        return
    _check(manifest, _MANIFEST, "")
    if manifest["format"] not in FORMATS:
        raise Damaged(f'"format" is {manifest["format"]!r}, not one of {", ".join(FORMATS)}')
    try:
        schema = decode_schema(manifest["schema"]["arrow"])
    except Exception as e:  # damaged base64 or IPC bytes: any error of pyarrow's
        said = " ".join(str(e).split())
        raise Damaged(f'"schema"."arrow" cannot be read ({type(e).__name__}: {said})') from None
    if [f["name"] for f in manifest["schema"]["fields"]] != schema.names:
        raise Damaged('"schema"."fields" do not name the fields of "schema"."arrow"')
    _check_files(manifest)


def _check_files(manifest: dict[str, Any]) -> None:
    """Every file a manifest names is a partition or rejects file of its own folder (a name
    like ``../../secret.parquet`` or ``/dev/zero`` would make a reader read elsewhere), named
    once, and its row groups no more than its bytes (a count read into lists before the file is
    compared with it)."""
    seen: set[str] = set()
    for i, entry in enumerate(manifest["partitions"]):
        where = f"partition {i}"
        if not layout.PARTITION.fullmatch(entry["file"]) or entry["file"] in seen:
            said = "named twice" if entry["file"] in seen else "not a partition file name"
            raise Damaged(f'{where}: "file" is {json.dumps(entry["file"])[:80]}, {said}')
        seen.add(entry["file"])
        groups = entry.get("row_groups")
        if groups is not None and groups > max(1, min(entry["bytes"], entry["rows"])):
            raise Damaged(f"{where}: {groups:,} row groups in {entry['bytes']:,} bytes")
        for key in ("group_offsets", "group_crc32c", "batch_crc32"):
            listed = entry.get(key)
            wanted = (groups or 0) + (key != "batch_crc32")  # and the footer, after the groups
            if listed is not None and groups is not None and len(listed) != wanted:
                raise Damaged(f'{where}: "{key}" lists {len(listed)}, {wanted} expected')
    rejects = manifest["rejects"]
    files = [rejects.get("file"), *(rejects.get("files") or [])]
    history = manifest.get("history")
    for entry in history if isinstance(history, list) else []:
        listed = entry.get("rejects") if isinstance(entry, dict) else None
        files.append(listed.get("file") if isinstance(listed, dict) else None)
    for name in files:
        if name is not None and not (isinstance(name, str) and layout.REJECTS.fullmatch(name)):
            raise Damaged(f"a rejects file is {json.dumps(name)[:80]}, not a rejects file name")


def _check(value: dict[str, Any], spec: dict[str, Any], where: str) -> None:
    for name, kind in spec.items():
        key = name.rstrip("?")
        if key not in value:
            if name.endswith("?"):
                continue
            raise Damaged(f'{where}"{key}" is missing')
        item = value[key]
        if not _is(item, kind):
            shown = json.dumps(item)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise Damaged(f'{where}"{key}" is {shown}, not {_kind_name(kind)}')
        if isinstance(kind, dict):
            _check(item, kind, f'{where}"{key}": ')
        elif isinstance(kind, list) and isinstance(kind[0], dict):
            for i, entry in enumerate(item):
                named = _ENTRY_NAMES[key](i, entry) if key in _ENTRY_NAMES else f'"{key}" {i}'
                _check(entry, kind[0], f"{named}: ")


def _is(value: Any, kind: Any) -> bool:
    """Whether ``value`` is of ``kind`` (see ``_MANIFEST``)."""
    if kind is None:
        return value is None
    if kind == _COUNT:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if isinstance(kind, tuple):
        return any(_is(value, k) for k in kind)
    if isinstance(kind, dict):
        return isinstance(value, dict)
    if isinstance(kind, list):
        return isinstance(value, list) and all(_is(v, kind[0]) for v in value)
    return isinstance(value, kind)


def _kind_name(kind: Any) -> str:
    if kind is None:
        return "null"
    if kind == _COUNT:
        return "a whole number"
    if isinstance(kind, tuple):
        return " or ".join(_kind_name(k) for k in kind)
    if isinstance(kind, list):
        return f"a list of {_kind_name(kind[0])}"
    if isinstance(kind, dict):
        return "an object"
    return {str: "a string", bool: "true or false", dict: "an object", list: "a list"}[kind]
