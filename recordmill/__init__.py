"""recordmill: turn any raw training dataset into partitioned columnar record files, fast."""

from recordmill.engine import Summary, write
from recordmill.errors import (
    ConfigError,
    OutputError,
    PluginError,
    RecordmillError,
    RowError,
    SchemaError,
    TaskError,
)
from recordmill.hookspecs import hookimpl, hookspec
from recordmill.manifest import read as read_manifest
from recordmill.options import Options
from recordmill.plugins import PluginRef, available_plugins, load_plugin, resolve
from recordmill.reader import Dataset, open
from recordmill.rejects import Reject
from recordmill.rejects import read as read_rejects
from recordmill.version import __version__

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
