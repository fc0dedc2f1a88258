"""What a dataset plugin needs from recordmill, in one public module (``recordmill.kit``).

- ``Path``: the ``type=`` of an option that names a file or folder (``--input``, ``--image-dir``),
  made absolute where the command line is parsed, so that every worker (a Dask or Ray cluster's,
  started in another folder) finds it.
- ``Reject`` and ``bad_input``: an input left out on purpose, listed among the dataset's rejects
  (``bad_input`` follows ``--on-bad-input``: a ``Reject`` under ``skip``, else an error).
- The errors a plugin raises, each said in one line: ``InputError`` (bad input), ``ConfigError``
  (options that do not go together), ``SchemaError`` (a schema that cannot be).

What is here stays: a change goes through a deprecation, never silently.
"""

from __future__ import annotations

import os

from recordmill.dataset.rejects import Reject, bad_input
from recordmill.errors import ConfigError, InputError, SchemaError

__all__ = ["ConfigError", "InputError", "Path", "Reject", "SchemaError", "bad_input"]


def Path(text: str) -> str:
    """An option naming a file or folder, as an absolute path (``~`` expanded): use it as
    ``parser.add_argument("--input", type=recordmill.kit.Path)``. Relative to the folder the
    command runs in, not to a worker's."""
    return os.path.abspath(os.path.expanduser(text))
