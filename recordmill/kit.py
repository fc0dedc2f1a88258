"""What a dataset plugin needs from recordmill, in one public module (``recordmill.kit``).

- ``Path``: the ``type=`` of an option that names a file or folder (``--input``, ``--image-dir``),
  made absolute where the command line is parsed, so that every worker (a Dask or Ray cluster's,
  started in another folder) finds it.
- ``Reject`` and ``bad_input``: an input left out on purpose, listed among the dataset's rejects
  (``bad_input`` follows ``--on-bad-input``: a ``Reject`` under ``skip``, else an error).
- ``Source``: yielded by ``dict_data`` before the rows of one input (``yield Source(path)``), so
  that a row that does not fit the schema, or its reject, names that input and the row's number in
  it (``wav/a.wav, row 3 (task 19, row 40)``), not only the task's.
- The errors a plugin raises, each said in one line: ``InputError`` (bad input), ``ConfigError``
  (options that do not go together), ``SchemaError`` (a schema that cannot be).

What is here stays: a change goes through a deprecation, never silently.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from recordmill.dataset.rejects import Reject, bad_input
from recordmill.errors import ConfigError, InputError, SchemaError

__all__ = ["ConfigError", "InputError", "Path", "Reject", "SchemaError", "Source", "bad_input"]


@dataclass(frozen=True)
class Source:
    """The input the rows yielded after it come from (a file path, a URL, a record's key)."""

    name: str


def Path(text: str) -> str:
    """An option naming a file or folder, as an absolute path (``~`` expanded): use it as
    ``parser.add_argument("--input", type=recordmill.kit.Path)``. Relative to the folder the
    command runs in, not to a worker's."""
    return os.path.abspath(os.path.expanduser(text))
