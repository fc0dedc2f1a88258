"""Testing a dataset plugin in one call: ``recordmill.testing.check_plugin(plugin, **options)``.

It runs a small write of the plugin in this process (``workers=0``: a ``breakpoint()`` in
``dict_data`` stops there) and checks what plugin authors get wrong, each failure one line
naming the task and row (:class:`PluginCheckFailed`, an ``AssertionError``, so pytest shows it as
a failed assert):

- every row fits the schema (the declared one, or the one inferred from the first rows);
- two runs give the same rows, in the same order (a dataset that differs from run to run cannot
  be resumed, appended to or compared);
- each task gives the same rows when it runs alone, last, or first (tasks are independent: they
  run in any order, on any worker);
- ``task_rows()``, where the plugin has it, is the number of rows ``dict_data()`` yields;
- each option's default is what its help text says it is (``"(default: 4)"``; a help that
  describes its default in words is not checked).

It returns the rows, a ``pyarrow.Table``, for the author's own asserts. Use it from pytest::

    from recordmill.testing import check_plugin

    def test_my_plugin(tmp_path):
        rows = check_plugin("my_plugin", input=str(tmp_path / "data"))
        assert rows.num_rows == 30

or as the pytest fixture ``check_plugin`` (recordmill registers it with pytest), which gives a
:class:`PluginCheck` (``rows``, ``rejects``, ``summary``) and takes the modules of the folder
plugins it loaded out of ``sys.modules`` after the test::

    def test_my_plugin(check_plugin, tmp_path):
        checked = check_plugin("path/to/my_plugin", input=str(tmp_path / "data"))
        assert checked.rows.num_rows == 30 and checked.rejects == []
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa

from recordmill.dataset.rejects import Reject
from recordmill.dataset.rejects import read as read_rejects
from recordmill.engine.pipeline import Summary, write
from recordmill.kit import Source
from recordmill.plugin.manager import load_plugin
from recordmill.plugin.options import plugin_options
from recordmill.read.dataset import open as open_dataset

__all__ = ["PluginCheck", "PluginCheckFailed", "check_plugin", "run_check"]

_DEFAULT = re.compile(r"\(default:?\s*([^)]*)\)")


class PluginCheckFailed(AssertionError):
    """A plugin does something a dataset plugin must not; the message names task and row."""


@dataclass(frozen=True)
class PluginCheck:
    """What a checked plugin wrote: its ``rows``, the inputs it left out (``rejects``, as
    ``recordmill.read_rejects`` lists them) and the write's ``summary``."""

    rows: pa.Table
    rejects: list[dict[str, Any]]
    summary: Summary


def check_plugin(plugin: str | os.PathLike[str] | ModuleType, **options: Any) -> pa.Table:
    """Write ``plugin`` with ``options`` (its own options, by their Python names) twice in this
    process, check it (see the module) and return its rows. Give options that make a small
    dataset: every task runs four times."""
    return _checked(plugin, options, "fail").rows


def run_check(plugin: str | os.PathLike[str] | ModuleType, **options: Any) -> PluginCheck:
    """:func:`check_plugin`'s checks, giving the rows, the rejects and the summary (what the
    ``check_plugin`` pytest fixture gives): an input the plugin rejects is listed in
    ``rejects`` (written with ``--on-bad-input skip``), not a failed check."""
    return _checked(plugin, options, "skip")


def _checked(plugin: Any, options: dict[str, Any], on_bad_input: str) -> PluginCheck:
    loaded = load_plugin(plugin)
    _check_defaults(loaded)
    parsed = plugin_options(loaded, options)
    with tempfile.TemporaryDirectory(prefix="recordmill-check-") as tmp:
        first, summary, rejects = _written(plugin, os.path.join(tmp, "a"), options, on_bad_input)
        second = _written(plugin, os.path.join(tmp, "b"), options, on_bad_input)[0]
    if not first.equals(second):
        raise PluginCheckFailed(f"plugin {loaded.name}: {_first_difference(first, second)}")
    count = loaded.task_number(parsed)
    per_task = [_task_rows(loaded, t, parsed) for t in range(count)]
    for t in range(count):
        alone = _task_rows(loaded, t, parsed)  # after every other task ran: any state shows
        if len(alone) != len(per_task[t]) or not all(map(_same, alone, per_task[t])):
            raise PluginCheckFailed(
                f"plugin {loaded.name}: task {t} gives other rows when it runs again after the "
                f"other tasks ({_row_difference(per_task[t], alone)}): tasks must not depend on "
                "each other or on what ran before (they run in any order, on any worker)"
            )
        announced = loaded.task_rows(t, parsed)
        if announced is not None and announced != len(per_task[t]):
            raise PluginCheckFailed(
                f"plugin {loaded.name}: task_rows({t}) says {announced} rows, dict_data({t}) "
                f"yields {len(per_task[t])}"
            )
    return PluginCheck(first, rejects, summary)


def _written(
    plugin: Any, out: str, options: dict[str, Any], on_bad_input: str
) -> tuple[pa.Table, Summary, list[dict[str, Any]]]:
    """The rows of a write in this process (a row that does not fit fails it, naming task and
    row), in their global order; its summary and its rejects."""
    settings = {"workers": 0, "partitions": 1, "progress": False, "on_bad_input": on_bad_input}
    try:
        summary = write(plugin, out, options=options, **settings)
    except Exception as e:
        raise PluginCheckFailed(str(e).splitlines()[0]) from e
    return open_dataset(out).to_arrow(), summary, read_rejects(out)


def _task_rows(plugin: Any, task: int, options: Any) -> list[dict[str, Any]]:
    """What ``dict_data(task)`` yields, rows only (rejects and sources left out)."""
    rows = []
    for item in plugin.dict_data(task, options):
        if isinstance(item, (Reject, Source)):
            continue
        if isinstance(item, (pa.Table, pa.RecordBatch)):
            rows += item.to_pylist()
        else:
            rows.append(item)
    return rows


def _row_difference(before: list[Any], now: list[Any]) -> str:
    if len(before) != len(now):
        return f"{len(before)} rows, then {len(now)}"
    k = next(i for i, (a, b) in enumerate(zip(before, now, strict=True)) if not _same(a, b))
    return f"row {k} differs"


def _same(a: Any, b: Any) -> bool:
    """Whether two rows (or values) are equal, numpy arrays by value, shape and dtype."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))
    return bool(a == b)


def _first_difference(first: pa.Table, second: pa.Table) -> str:
    """Where two runs' rows part, in one line."""
    if first.num_rows != second.num_rows:
        return (
            f"two runs wrote {first.num_rows} and {second.num_rows} rows: it is not deterministic"
        )
    for name in first.schema.names:
        a, b = first[name].to_pylist(), second[name].to_pylist()
        for row, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return (
                    f"two runs wrote other values at row {row}, field {name!r} ({x!r}, then "
                    f"{y!r}): it is not deterministic (seed your random numbers; do not list "
                    "folders or sets without sorting)"
                )
    return "two runs wrote other schemas: it is not deterministic"


def _check_defaults(plugin: Any) -> None:
    """Each option whose help says ``(default: X)`` has X as its default."""
    parser = argparse.ArgumentParser(add_help=False)
    plugin.add_options(parser)
    for action in parser._actions:
        said = _DEFAULT.search(action.help or "")
        if said is None or "%(default)" in (action.help or ""):
            continue
        # The value the help states: its first word, where it is one ("(default: 0, a task per
        # 32 MB)"); a description ("(default: all inferred)") is not checked.
        text, default = said.group(1).split(",")[0].strip(), action.default
        if not text or " " in text or default is None:
            continue
        if str(default) != text:
            flag = max(action.option_strings, key=len, default=action.dest)
            raise PluginCheckFailed(
                f"plugin {plugin.name}: {flag}'s help says its default is {text}, but it is "
                f"{default!r}"
            )
