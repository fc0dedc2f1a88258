"""``manifest.json``: what a dataset holds. Written last; a folder without one is not a dataset."""

from __future__ import annotations

import base64
import json
import platform
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from recordmill import __version__
from recordmill.errors import OutputError
from recordmill.rejects import REJECTS_FILE
from recordmill.schema import describe

FORMAT_VERSION = 1
MANIFEST = "manifest.json"


def build(
    *,
    fmt: str,
    schema: pa.Schema,
    partitions: list[dict[str, Any]],
    tasks: list[dict[str, Any]],
    rejected: int,
    plugin: dict[str, Any],
    settings: dict[str, Any],
) -> dict[str, Any]:
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
        "rejects": {"count": rejected, "file": REJECTS_FILE if rejected else None},
        "plugin": plugin,
        "settings": settings,
        "versions": {
            "recordmill": __version__,
            "pyarrow": pa.__version__,
            "python": platform.python_version(),
        },
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def read(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise OutputError(f"{folder} is not a recordmill dataset: it has no {MANIFEST}")
    return json.loads(path.read_text())


def arrow_schema(manifest: dict[str, Any]) -> pa.Schema:
    """The exact Arrow schema recorded in a manifest."""
    data = base64.b64decode(manifest["schema"]["arrow"])
    return pa.ipc.read_schema(pa.py_buffer(data))
