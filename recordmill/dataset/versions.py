"""A dataset's versions: a write with ``--append`` adds one, its rows after all the others.

The manifest keeps them. Every partition entry carries the ``version`` that added it,
``version`` is the current one, and ``history`` lists every version: its number, when it was
written, the rows, partitions, tasks and rejects it added, the plugin and options that made them,
the settings, and its partitions' checksums. Version K of a dataset is the partitions of
versions 1 to K, in order: a prefix of its rows, so a row keeps its number in every later version.

The top of the manifest describes the dataset as a whole (``total_rows``, ``partitions``, the
``tasks`` of every version numbered on from one version to the next, all ``rejects``) and, for
``plugin``, ``settings`` and ``created``, the run that wrote the current version. A manifest
written before versions existed is version 1. (The older key ``versions`` is another thing: the
recordmill, pyarrow and Python versions that wrote the manifest.)
"""

from __future__ import annotations

import hashlib
from typing import Any

from recordmill.dataset.manifest import task_entries, task_totals
from recordmill.errors import OutputError


def current(manifest: dict[str, Any]) -> int:
    """The version a manifest describes."""
    return int(manifest.get("version", 1))


def history(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per version, oldest first (one, made from the manifest, for a manifest
    written before versions existed)."""
    if "history" in manifest:
        return manifest["history"]
    return [entry(manifest, 1)]


def version_of(partition: dict[str, Any]) -> int:
    """The version that added a partition (its manifest entry)."""
    return int(partition.get("version", 1))


def entry(manifest: dict[str, Any], version: int) -> dict[str, Any]:
    """The history entry of ``version``, from the manifest built for its run's own partitions."""
    parts = manifest["partitions"]
    rejected = manifest.get("rejects") or {}
    return {
        "version": version,
        "created": manifest.get("created"),
        "rows": sum(p["rows"] for p in parts),
        "partitions": len(parts),
        "tasks": task_totals(manifest)[0],
        "rejects": {"count": rejected.get("count", 0), "file": rejected.get("file")},
        "plugin": manifest.get("plugin"),
        "settings": manifest.get("settings"),
        "recordmill": (manifest.get("versions") or {}).get("recordmill"),
        "checksums": [p["checksum"] for p in parts],
    }


def first(manifest: dict[str, Any]) -> dict[str, Any]:
    """A run's manifest as version 1 of a dataset (a first write, or ``--overwrite``)."""
    return {
        **manifest,
        "partitions": [{**p, "version": 1} for p in manifest["partitions"]],
        "version": 1,
        "history": [entry(manifest, 1)],
    }


def appended(base: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """The manifest of ``base``'s dataset with a new version: the partitions, tasks and rejects
    of ``own`` (the manifest built for the appending run's own partitions) after its own."""
    version = current(base) + 1
    added = [{**p, "version": version} for p in own["partitions"]]
    kept = [{**p, "version": version_of(p)} for p in base["partitions"]]
    files = rejects_files(base) + rejects_files(own)
    count = (base.get("rejects") or {}).get("count", 0) + own["rejects"]["count"]
    return {
        **own,
        "schema": base["schema"],  # the same fields: the dataset's own bytes kept
        "total_rows": base["total_rows"] + sum(p["rows"] for p in added),
        "partitions": kept + added,
        "tasks": task_entries(_runs(base.get("tasks") or []) + _runs(own["tasks"])),
        "rejects": _rejects(count, files),
        "version": version,
        "history": [*history(base), entry(own, version)],
    }


def at_version(
    manifest: dict[str, Any], version: int | None, where: str = "the dataset"
) -> dict[str, Any]:
    """The manifest as version ``version`` had it (None: the current one): its partitions,
    rows, tasks and rejects, and the run that wrote it. ``where`` names the dataset in errors."""
    latest = current(manifest)
    if version is None or version == latest:
        return manifest
    if not 1 <= version <= latest:
        raise OutputError(
            f"{where} has no version {version}: its versions are 1 to {latest} "
            f"(recordmill history {where} lists them)"
        )
    kept = history(manifest)[:version]
    last = kept[-1]
    partitions = [p for p in manifest["partitions"] if version_of(p) <= version]
    files = [h["rejects"]["file"] for h in kept if h["rejects"].get("file")]
    tasks = sum(h["tasks"] for h in kept)
    return {
        **manifest,
        "total_rows": sum(p["rows"] for p in partitions),
        "partitions": partitions,
        "tasks": task_entries(_cut(_runs(manifest.get("tasks") or []), tasks)),
        "rejects": _rejects(sum(h["rejects"]["count"] for h in kept), files),
        "plugin": last["plugin"],
        "settings": last["settings"],
        "created": last["created"],
        "version": version,
        "history": kept,
    }


def fingerprint(manifest: dict[str, Any]) -> str:
    """What identifies the rows of the version a manifest describes: a hash of its partitions'
    checksums, in order. Another history with as many versions and rows (``--overwrite``, then
    ``--append``) has another one; a later version of the same history keeps every partition,
    and an earlier version's fingerprint is computed from the rows it had."""
    digest = hashlib.sha256()
    for partition in manifest["partitions"]:
        digest.update(f"{partition.get('checksum')}\n".encode())
    return digest.hexdigest()[:16]


def latest_run(manifest: dict[str, Any]) -> dict[str, Any]:
    """The history entry of the run that wrote the current version."""
    return history(manifest)[-1]


def rejects_files(manifest: dict[str, Any]) -> list[str]:
    """The rejects files of every version, oldest first."""
    rejected = manifest.get("rejects") or {}
    if "files" in rejected:
        return list(rejected["files"])
    return [rejected["file"]] if rejected.get("file") else []


def _rejects(count: int, files: list[str]) -> dict[str, Any]:
    # "file": the first one, as readers from before versions look for it
    return {"count": count, "file": files[0] if files else None, "files": files}


def _runs(entries: list[dict[str, Any]]) -> list[list[int]]:
    """Manifest task entries back to run-length counts ``[rows, tasks]``."""
    return [[t["rows"], t.get("count", 1)] for t in entries]


def _cut(runs: list[list[int]], tasks: int) -> list[list[int]]:
    """The run-length counts of the first ``tasks`` tasks."""
    out = []
    for rows, count in runs:
        if tasks <= 0:
            break
        out.append([rows, min(count, tasks)])
        tasks -= count
    return out
