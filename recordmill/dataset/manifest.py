"""The manifest: what a dataset holds, written last; a folder without one is not a dataset.

It lives in the dataset folder as ``_manifest.parquet`` (or ``_manifest.arrow``): a file of the
dataset's own format and schema holding no rows, with the manifest's JSON in its key-value
metadata (``recordmill.manifest``). Every tool that is given the folder thus reads it as an empty
part of the dataset (pyarrow and Spark skip ``_`` files anyway), while a JSON file there would make
Polars, Hugging Face datasets and daft fail. ``recordmill info --json PATH`` prints it.
"""

from __future__ import annotations

import base64
import json
import os
import platform
import shlex
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from recordmill.dataset import layout, manifest_check
from recordmill.dataset.manifest_check import FORMAT_VERSION, MANIFEST_KEY, empty_file
from recordmill.dataset.schema import describe
from recordmill.dataset.storage import Store
from recordmill.errors import OutputError
from recordmill.version import __version__

# What a manifest may hold, refused beyond: its file's bytes (looked at before it is read; a
# million row groups take about 32 MB) and its partitions (a manifest of 300,000 took 19 s and
# 790 MB to refuse).
MAX_MANIFEST_BYTES = 64 << 20
MAX_PARTITIONS = 1 << 17

# Up to this many tasks the manifest lists each; past it, runs of equal row counts (task_entries).
LISTED_TASKS = 1000


def build(
    *,
    fmt: str,
    schema: pa.Schema,
    partitions: list[dict[str, Any]],
    tasks: list[dict[str, Any]],
    rejects: dict[str, Any],
    plugin: dict[str, Any],
    settings: dict[str, Any],
    run: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest's JSON; ``settings`` as written (the row group size used), ``run`` what the
    run was asked for (plugin, options, task count, settings: as run.json records them)."""
    return {
        "format_version": FORMAT_VERSION,
        "format": fmt,
        "total_rows": sum(p["rows"] for p in partitions),
        "schema": {
            "fields": describe(schema),
            "arrow": base64.b64encode(schema.serialize().to_pybytes()).decode("ascii"),
        },
        "partitions": partitions,
        "tasks": tasks,
        "rejects": rejects,
        "plugin": plugin,
        "settings": settings,
        **({"run": run} if run is not None else {}),
        "versions": {
            "recordmill": __version__,
            "pyarrow": pa.__version__,
            "python": platform.python_version(),
        },
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def task_entries(runs: list[list[int]]) -> list[dict[str, int]]:
    """The manifest's ``tasks`` from run-length counts ``[rows, tasks]`` in task order: an entry
    per task (``{"task_id": 3, "rows": 40}``), or, past ``LISTED_TASKS`` tasks, an entry per run
    of tasks with equal counts (``{"task_id": 3, "rows": 0, "count": 999997}``), so that a
    million tasks do not make a manifest of tens of megabytes."""
    entries, task_id = [], 0
    listed = sum(count for _, count in runs) <= LISTED_TASKS
    for rows, count in runs:
        if listed:
            entries += [{"task_id": t, "rows": rows} for t in range(task_id, task_id + count)]
        elif entries and entries[-1]["rows"] == rows:
            entries[-1]["count"] = entries[-1].get("count", 1) + count
        else:
            entries.append(
                {"task_id": task_id, "rows": rows, **({"count": count} if count > 1 else {})}
            )
        task_id += count
    return entries


def task_totals(manifest: dict[str, Any]) -> tuple[int, int]:
    """(tasks, rows) that the manifest's ``tasks`` entries count."""
    entries = manifest.get("tasks") or []
    return (
        sum(t.get("count", 1) for t in entries),
        sum(t["rows"] * t.get("count", 1) for t in entries),
    )


def list_values(partitions: list[dict[str, Any]]) -> dict[str, int]:
    """The ids each list-of-integers column holds in these partitions (a corpus's tokens), as
    their entries record them (none in a dataset written before they did)."""
    total: dict[str, int] = {}
    for entry in partitions:
        for name, count in (entry.get("values") or {}).items():
            total[name] = total.get(name, 0) + int(count)
    return total


def token_counts(partitions: list[dict[str, Any]]) -> dict[str, int]:
    """:func:`list_values` of the columns of token ids ("tokens", "input_ids", ...): what a
    write's summary and ``recordmill info`` call tokens (labels or boxes are not)."""
    counts = list_values(partitions)
    return {n: c for n, c in counts.items() if "token" in n or n.endswith("ids")}


def file_metadata(data: bytes, fmt: str) -> dict[bytes, bytes]:
    """The metadata of a file made by :func:`empty_file`."""
    source = pa.BufferReader(data)
    if fmt == "arrow":
        return dict(pa.ipc.open_file(source).schema.metadata or {})
    # Rejects can make the footer large; the defaults stop at 100 MB of strings.
    footer = pq.ParquetFile(source, thrift_string_size_limit=(1 << 31) - 1).metadata
    return dict(footer.metadata or {})


def to_bytes(manifest: dict[str, Any], schema: pa.Schema) -> bytes:
    """The manifest file: the JSON, and its checksum beside it (see manifest_check.py)."""
    text = json.dumps(manifest, indent=2).encode()
    metadata = {MANIFEST_KEY: text, manifest_check.CHECKSUM_KEY: manifest_check.checksum(text)}
    return empty_file(schema, manifest["format"], metadata)


def find(store: Store) -> str | None:
    """The manifest's file name in a dataset folder, or None when there is none."""
    for fmt in layout.FORMATS:
        if store.is_file(layout.manifest_file(fmt)):
            return layout.manifest_file(fmt)
    return None


def group_sizes(manifest: dict[str, Any], entry: dict[str, Any]) -> list[int] | None:
    """The rows of each row group of a partition as its entry and ``row_group_size`` say (all
    of that size but the last); None when the manifest does not record them."""
    size = (manifest.get("settings") or {}).get("row_group_size")
    if entry.get("row_groups") is None or not size:
        return None
    rows = entry["rows"]
    return [min(size, rows - i * size) for i in range(-(-rows // size))]


def parse(data: bytes, name: str) -> dict[str, Any]:
    """The manifest held by the bytes of the manifest file ``name``, checked whole (a
    :class:`~recordmill.dataset.manifest_check.Damaged` error when it is not intact)."""
    return manifest_check.read(data, name.rsplit(".", 1)[1])


def load(store: Store) -> dict[str, Any]:
    """The manifest of the dataset in ``store``; a clear error for anything else."""
    name = find(store)
    if name is None:
        if store.is_file(layout.OLD_MANIFEST):
            raise OutputError(_old_version(store))
        raise OutputError(
            f"{store} is not a recordmill dataset: it has no {layout.manifest_file('parquet')} "
            f"or {layout.manifest_file('arrow')}"
        )
    size = store.size(name)
    if size > MAX_MANIFEST_BYTES:
        raise OutputError(
            f"the manifest of {store} is damaged: {name} holds {size:,} bytes, more than a "
            f"manifest may ({MAX_MANIFEST_BYTES:,}); it is not read"
        )
    try:
        manifest = parse(store.read_bytes(name), name)
    except manifest_check.Damaged as e:
        raise OutputError(f"the manifest of {store} is damaged: {name}: {e}") from None
    if len(manifest["partitions"]) > MAX_PARTITIONS:
        raise OutputError(
            f"the manifest of {store} is damaged: it lists {len(manifest['partitions']):,} "
            f"partitions, more than a dataset may have ({MAX_PARTITIONS:,})"
        )
    if manifest["format_version"] != FORMAT_VERSION:
        raise OutputError(
            f"{store} is in format version {manifest.get('format_version')}; this recordmill "
            f"{__version__} reads format version {FORMAT_VERSION}: upgrade recordmill to read it"
        )
    return manifest


def read(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of the dataset at ``folder`` (a path or a URI such as ``s3://...``)."""
    return load(Store.at(folder))


def arrow_schema(manifest: dict[str, Any]) -> pa.Schema:
    """The exact Arrow schema recorded in a manifest."""
    return manifest_check.decode_schema(manifest["schema"]["arrow"])


def _old_version(store: Store) -> str:
    """What to do with a dataset of format version 1: write it again, with the command its own
    manifest gives."""
    try:
        old = json.loads(store.read_text(layout.OLD_MANIFEST))
        command = rewrite_command(old, str(store))
    except (OSError, ValueError, KeyError, TypeError):
        command = f"recordmill write --script PLUGIN --output {store} --overwrite ..."
    return (
        f"{store} was written by an earlier recordmill, in format version 1 (a manifest.json "
        f"beside the partitions and arrays as nested lists); this recordmill "
        f"{__version__} reads format version {FORMAT_VERSION}. Write it again with the same "
        "plugin and options (from the folder the first run was started in, or with --script "
        f"naming the plugin's folder):\n  {command}"
    )


def rewrite_command(manifest: dict[str, Any], output: str) -> str:
    """The ``recordmill write`` command that writes a dataset like ``manifest``'s again."""
    plugin = manifest["plugin"]
    settings = manifest.get("settings") or {}
    script = plugin["name"]  # a folder of that name, where the first run was started (format 1)
    if plugin.get("target") and plugin.get("source") == "path":
        script = plugin["target"]
    elif plugin.get("source") in ("builtin", "entrypoint"):
        script = f"{plugin['source']}:{plugin['name']}"
    words = ["recordmill", "write", "--script", script]
    words += ["--output", output, "--overwrite"]
    # The settings recorded are those that make the output what it is; they and the plugin's
    # options are named as their flags.
    names = {"on_bad_row": "on_bad_input"}  # format 1's name for the policy
    options = dict(plugin.get("options") or {})
    script_flags = options.pop("mindrecord_arguments", None) or []  # given as they were
    for key, value in [*settings.items(), *options.items()]:
        flag = "--" + names.get(key, key).replace("_", "-")
        if value is True:
            words.append(flag)
        elif value is not None and value is not False:
            words += [flag, *map(str, value if isinstance(value, list) else [value])]
    return shlex.join(words + [str(w) for w in script_flags])
