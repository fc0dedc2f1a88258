"""recordmill: turn any raw training dataset into partitioned columnar record files, fast.

Reading (``open``, ``read_manifest``, ``read_rejects``) is imported at once; writing (``write``
and the plugin machinery, with pluggy) only when first used, so that a training job that only
reads loads nothing of the write side.
"""

import importlib
import warnings
from typing import Any

from recordmill.errors import (
    ConfigError,
    OutputError,
    PluginError,
    RecordmillError,
    RowError,
    SchemaError,
    TaskError,
)
from recordmill.manifest import read as read_manifest
from recordmill.reader import Dataset, open
from recordmill.rejects import Reject
from recordmill.rejects import read as read_rejects
from recordmill.version import __version__

_LAZY = {
    "write": "recordmill.engine",
    "Summary": "recordmill.engine",
    "hookimpl": "recordmill.hookspecs",
    "hookspec": "recordmill.hookspecs",
    "Options": "recordmill.options",
    "PluginRef": "recordmill.plugins",
    "available_plugins": "recordmill.plugins",
    "load_plugin": "recordmill.plugins",
    "resolve": "recordmill.plugins",
}
# Modules the README uses as attributes (recordmill.decode.image), imported when first used.
_SUBMODULES = ("decode",)
# Format helpers that moved to recordmill.formats: the old names work until the next release.
_MOVED = ("demo", "filelists", "idx", "images", "tfrecord")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"recordmill.{name}")
    if name in _MOVED:
        warnings.warn(
            f"recordmill.{name} is now recordmill.formats.{name}; the old name works until the "
            "next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(f"recordmill.formats.{name}")
    raise AttributeError(f"module 'recordmill' has no attribute {name!r}")


__all__ = [
    "ConfigError",
    "Dataset",
    "Options",
    "OutputError",
    "PluginError",
    "PluginRef",
    "RecordmillError",
    "Reject",
    "RowError",
    "SchemaError",
    "Summary",
    "TaskError",
    "__version__",
    "available_plugins",
    "hookimpl",
    "hookspec",
    "load_plugin",
    "open",
    "read_manifest",
    "read_rejects",
    "resolve",
    "write",
]
