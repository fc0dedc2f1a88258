"""What a dataset plugin needs from recordmill, in one public module (``recordmill.kit``); the
built-in plugins import nothing else of recordmill (``tests/test_imports.py`` checks it).

- ``Path``: the ``type=`` of an option that names a file or folder (``--input``, ``--image-dir``),
  made absolute where the command line is parsed, so that every worker (a Dask or Ray cluster's,
  started in another folder) finds it.
- ``Reject`` and ``bad_input``: an input left out on purpose, listed among the dataset's rejects
  (``bad_input`` follows ``--on-bad-input``: a ``Reject`` under ``skip``, else an error).
- ``Source``: yielded by ``dict_data`` before the rows of one input (``yield Source(path)``, or
  ``Source(path, first=1000)`` for a task that starts at the input's row 1,000), so
  that a row that does not fit the schema, or its reject, names that input and the row's number in
  it (``wav/a.wav, row 3 (task 19, row 40)``), not only the task's.
- The errors a plugin raises, each said in one line: ``InputError`` (bad input), ``ConfigError``
  (options that do not go together), ``SchemaError`` (a schema that cannot be); the category of
  its warnings, ``RecordmillWarning`` (what the command line prints, one line each); and for their
  messages ``counted(3, "file")`` (``"3 files"``), ``did_you_mean(name, names)`` and
  ``SKIP_HINT`` (how to skip bad input instead).
- Declaring a schema: ``from_yaml(path)`` (a YAML file of ``column: type``), ``infer_schema(rows)``,
  ``to_arrow_schema(declared)``, ``safe_name(text)`` (a column name from any text).
- Inputs: ``input_files(path, pattern)`` (a file, or a folder's files matching a glob, sorted),
  ``tasks_for(size, asked)`` (how many tasks an input of ``size`` bytes splits into: ``asked``,
  or with 0 about 64 of 256 KiB to ``TASK_BYTES``), ``task_size(total)`` (the bytes of such a
  task), ``Options`` (what every hook receives as ``options``).
- Other tools' formats, read without the tools, as modules: ``recordmill.kit.images`` (the image
  pipeline: ``--encode``/``--size`` options, decoding, ``row()``), ``features`` (feature lists to
  columns), ``filelists``, ``idx`` (MNIST), ``tfrecord``, ``mindrecord``, ``recordio``,
  ``ofrecord``, ``torchrecord``, ``protobuf``: ``from recordmill.kit.tfrecord import records``.

What is here stays: a change goes through a deprecation, never silently.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

from recordmill.compat import KIT_FORMATS
from recordmill.dataset.rejects import Reject, bad_input
from recordmill.dataset.schema import from_yaml, infer_schema, safe_name, to_arrow_schema
from recordmill.errors import (
    SKIP_HINT,
    ConfigError,
    InputError,
    RecordmillWarning,
    SchemaError,
    counted,
    did_you_mean,
)

# And, loaded when first used (they need the write side): TASK_BYTES, task_size, tasks_for,
# input_files, Options, and the FORMATS modules.
__all__ = [
    "FORMATS",
    "SKIP_HINT",
    "ConfigError",
    "InputError",
    "Path",
    "RecordmillWarning",
    "Reject",
    "SchemaError",
    "Source",
    "bad_input",
    "counted",
    "did_you_mean",
    "from_yaml",
    "infer_schema",
    "safe_name",
    "to_arrow_schema",
]

# The modules of other tools' formats, ``recordmill.kit.NAME``, loaded when first used;
# ``import recordmill.kit.images`` finds them through recordmill.compat's aliases.
FORMATS = KIT_FORMATS
__path__: list[str] = []


@dataclass(frozen=True)
class Source:
    """The input the rows yielded after it come from (a file path, a URL, a record's key);
    ``first``: the number, in that input, of the first row yielded after it (a task that starts
    at record 1,000 of a file says so, and its rows are named by their numbers in the file)."""

    name: str
    first: int = 0


def Path(text: str) -> str:
    """An option naming a file or folder, as an absolute path (``~`` expanded): use it as
    ``parser.add_argument("--input", type=recordmill.kit.Path)``. Relative to the folder the
    command runs in, not to a worker's."""
    return os.path.abspath(os.path.expanduser(text))


def __getattr__(name: str) -> Any:
    # The write side's names, and the format modules, only when a plugin asks for them.
    if name in ("TASK_BYTES", "task_size", "tasks_for"):
        return getattr(importlib.import_module("recordmill.inputs"), name)
    if name == "input_files":
        return importlib.import_module("recordmill.inputs.features").input_files
    if name == "Options":
        return importlib.import_module("recordmill.plugin.options").Options
    if name in FORMATS:
        return importlib.import_module(f"recordmill.inputs.{name}")
    raise AttributeError(f"module 'recordmill.kit' has no attribute {name!r}")
