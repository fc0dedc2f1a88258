"""Running an unmodified MindRecord ``mr_api.py`` as a recordmill plugin.

A folder holding ``mr_api.py`` (and no ``plugin.py``) is a MindRecord plugin: its module-level
``mindrecord_task_number()``, ``mindrecord_dict_data(task_id)`` and ``mindrecord_schema`` become the
``task_number``, ``dict_data`` and ``schema`` hooks. Such scripts read their own flags at import time
from ``mr_argument.pickle`` in the working directory ("Do NOT change this line"), so, as MindRecord's
``writer.py`` does, recordmill writes the flags it did not consume there before the script is
imported, and removes the file when the run ends, failed or not.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from recordmill.errors import PluginError

LEGACY_MODULE = "mr_api.py"
ARGUMENT_PICKLE = "mr_argument.pickle"
# The option that holds the script's own flags, as given: they make the run what it is, so the
# manifest records them and --resume compares them, like any plugin's options.
MR_ARGUMENTS = "mindrecord_arguments"


class MindRecordPlugin:
    """The hooks of a MindRecord ``mr_api`` module."""

    def __init__(self, module: ModuleType, name: str):
        for required in ("mindrecord_task_number", "mindrecord_dict_data"):
            if not callable(getattr(module, required, None)):
                raise PluginError(f"MindRecord plugin {name}: mr_api.py has no {required}()")
        self.module = module

    def task_number(self) -> int:
        return self.module.mindrecord_task_number()

    def dict_data(self, task_id: int) -> Any:
        return self.module.mindrecord_dict_data(task_id)

    def schema(self) -> Any:
        return getattr(self.module, "mindrecord_schema", None)


@contextlib.contextmanager
def argument_pickle(args: list[str], folder: str | os.PathLike[str] = ".") -> Iterator[Path]:
    """``mr_argument.pickle`` holding ``args`` (a list of strings) while the block runs."""
    path = Path(folder) / ARGUMENT_PICKLE
    # A new file under a name of its own, renamed over the name: a link planted there is
    # replaced, never written through (the current folder may be a shared one).
    fd, temporary = tempfile.mkstemp(prefix=f".{ARGUMENT_PICKLE}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump(list(args), f)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)
