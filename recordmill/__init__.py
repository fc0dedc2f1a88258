"""recordmill: turn any raw training dataset into partitioned columnar record files, fast.

Every name is imported when first used: ``open``, ``mix`` and the other reading names load the
read side (pyarrow, numpy), ``write`` the write side with pluggy, ``show`` the page's; so that a
training job that only reads loads nothing of the write side, and a write starts its fork server
before pyarrow is imported (``recordmill.forkserver``).
"""

import importlib
from typing import TYPE_CHECKING, Any

from recordmill import compat
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
from recordmill.version import __version__

_LAZY = {
    "open": "recordmill.read.dataset",
    "Dataset": "recordmill.read.dataset",
    "mix": "recordmill.read.mixture",
    "Mixture": "recordmill.read.mixture",
    "Reject": "recordmill.dataset.rejects",
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


if TYPE_CHECKING:  # what the names are, for type checkers and editors
    from recordmill.dataset.manifest import read as read_manifest
    from recordmill.dataset.rejects import Reject
    from recordmill.dataset.rejects import read as read_rejects
    from recordmill.read.dataset import Dataset, open
    from recordmill.read.mixture import Mixture, mix

# The subpackages and modules reachable as attributes, as they were when this module imported
# the read side.
_MODULES = {"cli", "dataset", "engine", "executors", "inputs", "kit", "plugin", "read", "report"}

# Names the module gives under another name.
_RENAMED = {"read_manifest": ("recordmill.dataset.manifest", "read"),
            "read_rejects": ("recordmill.dataset.rejects", "read")}  # fmt: skip


def __dir__() -> list[str]:  # the names imported when first used, for dir() and completion
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> Any:
    if name in _LAZY or name in _RENAMED:
        module, attribute = _RENAMED.get(name, (_LAZY.get(name), name))
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    if compat.new_name(f"recordmill.{name}") is not None:  # recordmill.decode.image, ...
        return compat.resolve(f"recordmill.{name}")
    if name in _MODULES:  # recordmill.kit.Path, recordmill.read.xxx after `import recordmill`
        return importlib.import_module(f"recordmill.{name}")
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
