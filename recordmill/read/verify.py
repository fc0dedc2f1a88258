"""``recordmill verify``: re-read a dataset and check it against its manifest, on local disk or
object storage alike: every partition of every version, and each version's against its history
entry."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa

from recordmill.dataset import layout, rejects, versions
from recordmill.dataset import manifest as manifest_file
from recordmill.dataset.storage import Store, open_in
from recordmill.errors import OutputError
from recordmill.read.dataset import group_rows, open_partition
from recordmill.read.files import check_structure


def verify(path: str | os.PathLike[str]) -> list[str]:
    """Every problem found, one line each; an empty list means the dataset is intact."""
    store = Store.at(path)
    try:
        manifest = manifest_file.load(store)
        expected_schema = manifest_file.arrow_schema(manifest)
    except (OutputError, ValueError, KeyError) as e:
        return [f"manifest: {e}"]
    problems = _unlisted(store, manifest) + _versions(manifest)
    total = 0
    for entry in manifest["partitions"]:
        sizes = manifest_file.group_sizes(manifest, entry)
        problems += _check_partition(store, entry, manifest["format"], expected_schema, sizes)
        total += entry["rows"]
    if total != manifest["total_rows"]:
        problems.append(
            f"manifest: partitions hold {total} rows, total_rows says {manifest['total_rows']}"
        )
    _, task_rows = manifest_file.task_totals(manifest)
    if manifest.get("tasks") and task_rows != manifest["total_rows"]:
        problems.append(
            f"manifest: tasks hold {task_rows} rows, total_rows says {manifest['total_rows']}"
        )
    rejected = (manifest.get("rejects") or {}).get("count", 0)
    if rejected:
        try:
            listed_rejects = len(rejects.read(store, manifest))
        except OutputError as e:
            problems.append(f"rejects: {e}")
        else:
            if listed_rejects != rejected:
                problems.append(f"rejects: {listed_rejects} listed, the manifest counts {rejected}")
    return problems


def _unlisted(store: Store, manifest: dict[str, Any]) -> list[str]:
    """Partition files in the folder that the manifest does not list."""
    listed = {p["file"] for p in manifest["partitions"]}
    latest = versions.current(manifest)
    problems = []
    for extra in store.listdir():
        version = layout.partition_version(extra)
        if version is None or extra in listed:
            continue
        if version > latest:
            problems.append(
                f"{extra}: a partition of version {version}, which is not published (an append "
                "that did not finish: recordmill write --append --resume finishes it)"
            )
        else:
            problems.append(f"{extra}: a partition file the manifest does not list")
    return problems


def _versions(manifest: dict[str, Any]) -> list[str]:
    """Each version's partitions against its history entry: rows, files and checksums."""
    history = versions.history(manifest)
    numbers = [h["version"] for h in history]
    if numbers != list(range(1, versions.current(manifest) + 1)):
        return [f"manifest: version {versions.current(manifest)}, but its history has {numbers}"]
    problems = []
    for h in history:
        own = [p for p in manifest["partitions"] if versions.version_of(p) == h["version"]]
        rows = sum(p["rows"] for p in own)
        if rows != h["rows"] or len(own) != h["partitions"]:
            problems.append(
                f"manifest: version {h['version']}'s partitions hold {rows} rows in {len(own)} "
                f"files, its history says {h['rows']} rows in {h['partitions']} files"
            )
        elif [p["checksum"] for p in own] != h["checksums"]:
            problems.append(
                f"manifest: version {h['version']}'s partitions have other checksums than its "
                "history lists (the same rows and files): files of another history"
            )
    found = [versions.version_of(p) for p in manifest["partitions"]]
    if found != sorted(found):
        problems.append("manifest: the partitions are not listed version by version")
    return problems


def _check_partition(
    store: Store, entry: dict, fmt: str, schema: pa.Schema, expected: list[int] | None
) -> list[str]:
    name = entry["file"]
    try:
        if store.local:  # not a link, a FIFO or a device: never read through those
            os.close(open_in(store, name))
    except FileNotFoundError:
        pass  # said below
    except OutputError as e:
        return [f"{name}: {str(e).removeprefix(store.path(name) + ' ')}"]
    if not store.is_file(name):
        return [f"{name}: missing"]
    problems = []
    size = store.size(name)
    if size != entry["bytes"]:
        problems.append(
            f"{name}: {size} bytes, the manifest says {entry['bytes']} (truncated or altered)"
        )
    checksum = store.sha256(name)
    if checksum != entry["checksum"]:
        problems.append(
            f"{name}: checksum {checksum} does not match the manifest's {entry['checksum']}"
        )
    try:
        handle = open_partition(store, name, fmt)
        found = handle.schema if fmt == "arrow" else handle.schema_arrow
        groups = group_rows(handle)
        for i in range(handle.num_record_batches if fmt == "arrow" else 0):
            check_structure(handle.get_batch(i), f"record batch {i}")
    except (pa.ArrowInvalid, OSError) as e:
        return [*problems, f"{name}: cannot be read: {e}"]
    except OutputError as e:
        return [*problems, f"{name}: {e}"]
    rows = sum(groups)
    if rows != entry["rows"]:
        problems.append(f"{name}: {rows} rows, the manifest says {entry['rows']}")
    elif expected is not None and groups != expected:
        problems.append(
            f"{name}: {len(groups)} row groups, the manifest says {entry['row_groups']} of "
            f"{expected[0]} rows (the last smaller)"
        )
    if not found.equals(schema):
        problems.append(f"{name}: its schema differs from the manifest's")
    return problems
