"""``recordmill verify``: re-read a dataset and check it against its manifest."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from recordmill import layout, rejects
from recordmill import manifest as manifest_file
from recordmill.errors import OutputError
from recordmill.partitions import sha256_file
from recordmill.reader import group_rows


def verify(path: str | Path) -> list[str]:
    """Every problem found, one line each; an empty list means the dataset is intact."""
    root = Path(path)
    try:
        manifest = manifest_file.read(root)
        expected_schema = manifest_file.arrow_schema(manifest)
    except (OutputError, ValueError, KeyError) as e:
        return [f"manifest: {e}"]
    problems = []
    listed = {p["file"] for p in manifest["partitions"]}
    for extra in sorted(
        f.name for f in root.iterdir() if layout.PARTITION.match(f.name) and f.name not in listed
    ):
        problems.append(f"{extra}: a partition file the manifest does not list")
    total = 0
    for entry in manifest["partitions"]:
        problems += _check_partition(
            root / entry["file"], entry, manifest["format"], expected_schema
        )
        total += entry["rows"]
    if total != manifest["total_rows"]:
        problems.append(
            f"manifest: partitions hold {total} rows, total_rows says {manifest['total_rows']}"
        )
    task_rows = sum(t["rows"] for t in manifest.get("tasks", []))
    if manifest.get("tasks") and task_rows != manifest["total_rows"]:
        problems.append(
            f"manifest: tasks hold {task_rows} rows, total_rows says {manifest['total_rows']}"
        )
    rejected = (manifest.get("rejects") or {}).get("count", 0)
    if rejected:
        try:
            listed = len(rejects.read(root))
        except OutputError as e:
            problems.append(f"rejects: {e}")
        else:
            if listed != rejected:
                problems.append(f"rejects: {listed} listed, the manifest counts {rejected}")
    return problems


def _check_partition(path: Path, entry: dict, fmt: str, schema: pa.Schema) -> list[str]:
    name = entry["file"]
    if not path.is_file():
        return [f"{name}: missing"]
    problems = []
    size = path.stat().st_size
    if size != entry["bytes"]:
        problems.append(
            f"{name}: {size} bytes, the manifest says {entry['bytes']} (truncated or altered)"
        )
    checksum = sha256_file(path)
    if checksum != entry["checksum"]:
        problems.append(
            f"{name}: checksum {checksum} does not match the manifest's {entry['checksum']}"
        )
    try:
        if fmt == "arrow":
            handle = pa.ipc.open_file(pa.memory_map(str(path)))
            found = handle.schema
        else:
            handle = pq.ParquetFile(path)
            found = handle.metadata.schema.to_arrow_schema()
        rows = sum(group_rows(handle))
    except (pa.ArrowInvalid, OSError) as e:
        return [*problems, f"{name}: cannot be read: {e}"]
    if rows != entry["rows"]:
        problems.append(f"{name}: {rows} rows, the manifest says {entry['rows']}")
    if not found.equals(schema):
        problems.append(f"{name}: its schema differs from the manifest's")
    return problems
