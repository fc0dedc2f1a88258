"""The module names recordmill had before its layers became folders, kept importable.

``import recordmill.torch`` and ``recordmill.decode`` are public names of modules that now live in
``recordmill/read/``; the others (``recordmill.reader``, ``recordmill.schema``...) were internal,
but plugins and scripts imported them, so they keep working with a DeprecationWarning until the
next release. An old name is an alias of the new module (the same object), not a copy.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any

# The plugin kit's modules of other tools' formats: ``recordmill.kit.NAME`` (see recordmill.kit).
KIT_FORMATS = (
    "features",
    "filelists",
    "idx",
    "images",
    "litdata",
    "mds",
    "mindrecord",
    "ofrecord",
    "packed",
    "protobuf",
    "recordio",
    "tfrecord",
    "torchrecord",
)
# Public names: no warning.
PUBLIC = {
    "recordmill.torch": "recordmill.read.torch",
    "recordmill.decode": "recordmill.read.decode",
    "recordmill.hookspecs": "recordmill.plugin.hookspecs",
    **{f"recordmill.kit.{n}": f"recordmill.inputs.{n}" for n in KIT_FORMATS},
}
OLD = {
    "recordmill.reader": "recordmill.read",
    "recordmill.verify": "recordmill.read.verify",
    "recordmill.layout": "recordmill.dataset.layout",
    "recordmill.manifest": "recordmill.dataset.manifest",
    "recordmill.schema": "recordmill.dataset.schema",
    "recordmill.columns": "recordmill.dataset.columns",
    "recordmill.checksum": "recordmill.dataset.checksum",
    "recordmill.rows": "recordmill.dataset.rows",
    "recordmill.storage": "recordmill.dataset.storage",
    "recordmill.rejects": "recordmill.dataset.rejects",
    "recordmill.plugins": "recordmill.plugin.manager",
    "recordmill.options": "recordmill.plugin.options",
    "recordmill.mindrecord": "recordmill.plugin.mr_api",
    "recordmill.settings": "recordmill.engine.settings",
    "recordmill.convert": "recordmill.engine.convert",
    "recordmill.tasks": "recordmill.engine.tasks",
    "recordmill.direct": "recordmill.engine.direct",
    "recordmill.partitions": "recordmill.engine.partitions",
    "recordmill.fragments": "recordmill.engine.fragments",
    "recordmill.writers": "recordmill.engine.writers",
    "recordmill.output": "recordmill.engine.output",
    "recordmill.lease": "recordmill.engine.lease",
    "recordmill.pool": "recordmill.executors.pool",
    "recordmill.progress": "recordmill.executors.progress",
    "recordmill.formats": "recordmill.inputs",
    # Moved once before, from recordmill.X to recordmill.formats.X.
    **{
        f"recordmill.{n}": f"recordmill.inputs.{n}"
        for n in ("demo", "filelists", "idx", "images", "tfrecord")
    },
}


def new_name(old: str) -> str | None:
    """The module an old name stands for (``recordmill.formats.images`` included), or None."""
    if old in PUBLIC or old in OLD:
        return PUBLIC.get(old) or OLD[old]
    if old.startswith("recordmill.formats."):
        return "recordmill.inputs." + old.removeprefix("recordmill.formats.")
    return None


def resolve(old: str) -> ModuleType:
    """The new module for an old name, with a DeprecationWarning for a non-public one."""
    new = new_name(old)
    assert new is not None
    if old not in PUBLIC:
        warnings.warn(
            f"{old} is now {new}; the old name works until the next release",
            DeprecationWarning,
            stacklevel=3,
        )
    return importlib.import_module(new)


# The import system asks a finder and a loader only for these methods; importlib.abc's base
# classes would cost every `import recordmill` 5-10 ms more (importlib.resources, tempfile).
class _AliasLoader:
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return ModuleType(spec.name)  # a placeholder: exec_module puts the real one in its place

    def exec_module(self, module: ModuleType) -> None:
        sys.modules[module.__name__] = resolve(module.__name__)


class _AliasFinder:
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if new_name(name) is None:
            return None
        return importlib.machinery.ModuleSpec(name, _AliasLoader())


def install() -> None:
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.append(_AliasFinder())
