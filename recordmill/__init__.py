"""recordmill: turn any raw training dataset into partitioned columnar record files, fast.

Reading (``open``, ``mix``, ``read_manifest``, ``read_rejects``) is imported at once; writing (``write``
and the plugin machinery, with pluggy) only when first used, so that a training job that only
reads loads nothing of the write side; ``show`` (a dataset's HTML page) also when first used.
"""

import importlib
from typing import Any

from recordmill import compat
from recordmill.dataset.manifest import read as read_manifest
from recordmill.dataset.rejects import Reject
from recordmill.dataset.rejects import read as read_rejects
from recordmill.errors import (
    ConfigError,
    OutputError,
    PluginError,
    RecordmillError,
    RecordmillWarning,
    RowError,
    SchemaError,
    TaskError,
)
from recordmill.read.dataset import Dataset, open
from recordmill.read.mixture import Mixture, mix
from recordmill.version import __version__

_LAZY = {
    "write": "recordmill.engine.pipeline",
    "Summary": "recordmill.engine.pipeline",
    "hookimpl": "recordmill.plugin.hookspecs",
    "hookspec": "recordmill.plugin.hookspecs",
    "Options": "recordmill.plugin.options",
    "PluginRef": "recordmill.plugin.manager",
    "available_plugins": "recordmill.plugin.manager",
    "load_plugin": "recordmill.plugin.manager",
    "resolve": "recordmill.plugin.manager",
    "show": "recordmill.report",
}
compat.install()  # recordmill.torch, recordmill.decode and the module names of before the layers


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if compat.new_name(f"recordmill.{name}") is not None:  # recordmill.decode.image, ...
        return compat.resolve(f"recordmill.{name}")
    if name == "kit":  # recordmill.kit.Path in a plugin that did `import recordmill` only
        return importlib.import_module("recordmill.kit")
    raise AttributeError(f"module 'recordmill' has no attribute {name!r}")


__all__ = [
    "ConfigError",
    "Dataset",
    "Mixture",
    "Options",
    "OutputError",
    "PluginError",
    "PluginRef",
    "RecordmillError",
    "RecordmillWarning",
    "Reject",
    "RowError",
    "SchemaError",
    "Summary",
    "TaskError",
    "__version__",
    "available_plugins",
    "hookimpl",
    "hookspec",
    "kit",
    "load_plugin",
    "mix",
    "open",
    "read_manifest",
    "read_rejects",
    "resolve",
    "show",
    "write",
]
