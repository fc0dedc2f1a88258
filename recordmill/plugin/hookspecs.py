"""The hooks a recordmill dataset plugin implements. This module is the reference for plugin authors.

A plugin is a module with plain functions named as these hooks (decorating them with
``recordmill.hookimpl`` is allowed, not needed). Each hook may leave out parameters it does not
use: ``def task_number(): return 4`` is fine. ``options`` is a :class:`recordmill.Options` holding
the values of the plugin's own command-line options, with attribute access (``--image-dir`` arrives
as ``options.image_dir``).

Required: ``task_number`` and ``dict_data``. Optional: ``schema``, ``task_rows``,
``add_options`` and ``worker_imports``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

import pluggy

PROJECT_NAME = "recordmill"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

REQUIRED_HOOKS = ("task_number", "dict_data")


@hookspec(firstresult=True)
def task_number(options: Any) -> int:
    """Return how many independent tasks the dataset splits into (1 means serial).

    Called once, in the main process. Tasks are the unit of parallelism: one class folder of an
    image dataset, one input file, or one slice of a big file are typical tasks.
    """


@hookspec(firstresult=True)
def dict_data(task_id: int, options: Any) -> Iterable[Mapping[str, Any]]:
    """Yield the rows of task ``task_id`` (0 .. task_number()-1), one dict per row.

    Called in a worker process, once per task. Values may be Python scalars, ``str``, ``bytes``,
    numpy scalars and numpy arrays. Every row must have exactly the schema's fields. The rows of
    the whole dataset are task 0's rows in the order yielded, then task 1's, and so on.
    """


@hookspec(firstresult=True)
def schema(options: Any) -> Mapping[str, Any] | Any | None:
    """Return the dataset's schema, or None to infer it from the first rows.

    Either a MindRecord-style dict, ``{"label": {"type": "int32"}, "data": {"type": "bytes"},
    "feat": {"type": "float32", "shape": [16]}}``, or a ``pyarrow.Schema``. Type names: bool,
    int8/16/32/64, uint8/16/32/64, float16/32/64, string, bytes. ``shape`` makes an array field:
    a fixed shape of more than 16 elements (or a nullable one) is a tensor column (raw bytes,
    dtype and shape in the schema), a smaller one fixed-size lists, a -1 anywhere variable-length
    lists; ``"layout": "list"`` or ``"tensor"`` picks for a field. Add ``"nullable": true`` to a
    field to allow None values. Field names are letters, digits and ``_``, not starting with a
    digit.
    """


@hookspec(firstresult=True)
def task_rows(task_id: int, options: Any) -> int | None:
    """Return how many rows task ``task_id`` will yield, if the plugin can tell cheaply (the
    number of files of a class folder, of lines of a list), or None.

    Called in the main process for every task before any row is made. When every task tells,
    and the schema is declared, the run has no ``--shuffle`` and bad input fails it, each
    partition is written straight from the rows, each byte once (no staged copy). A count that
    turns out wrong fails the run, naming the task. An input rejected under ``--on-bad-input
    skip`` would leave a row out, so that policy takes the staged path.
    """


@hookspec
def add_options(parser: argparse._ArgumentGroup) -> None:
    """Add the plugin's own command-line options with ``parser.add_argument(...)``.

    They are shown by ``python writer.py --script NAME --help``, can be set in the ``--config``
    YAML file, and reach the other hooks as ``options``.
    """


@hookspec(firstresult=True)
def worker_imports() -> list[str] | None:
    """Return the modules this plugin's workers need, or None for recordmill's default.

    Called once, in the main process, before the other hooks. The fork server that starts the
    local workers (``--executor process``, the default) imports them once, while the main process
    plans the run, so that every worker starts with them loaded (pyarrow and recordmill's write
    path always). The default is nothing more: recordmill converts a small write's values
    (batches of up to 4,096 numbers, bools, ASCII strings or bytes, and numpy arrays of numbers)
    without pandas. Where rows go through pyarrow's own conversion (longer batches, other
    strings, pandas objects, lists of strings, ``pa.array`` in the plugin), pyarrow imports
    pandas in each worker where it is installed: 0.15 s, which a long write does not notice and
    a plugin that always needs it saves by returning ``["pandas"]`` (the text plugin does). One
    that uses a heavy module in every task names it too (the csv plugin: ``["pyarrow.csv"]``).
    """
