"""Where jobs run. ``--executor process`` (the default) is recordmill's own process pool;
``--executor dask`` and ``--executor ray`` run the same jobs on a Dask or Ray cluster, whose
workers write their fragments and partitions straight to the output's staging folder, so no row
passes through this process.

Executors are plugins, found by name: the built-ins below, then the entry-point group
``recordmill.executors``, where a package registers a subclass of :class:`Executor`:

.. code-block:: toml

    [project.entry-points."recordmill.executors"]
    mycluster = "mypackage.recordmill_executor:MyClusterExecutor"

:class:`Executor` is the contract, documented method by method: an executor adds its own flags
(:meth:`Executor.add_options`), receives them as ``options``, checks that its workers can run the
job (:meth:`Executor.check`), and runs jobs (:meth:`Executor.execute`), reporting progress.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Mapping
from typing import Any

from recordmill.errors import ConfigError
from recordmill.executors.base import Executor, Limits
from recordmill.executors.dask_executor import DaskExecutor
from recordmill.executors.local import InlineExecutor, ProcessExecutor
from recordmill.executors.ray_executor import RayExecutor

__all__ = [
    "DaskExecutor",
    "Executor",
    "InlineExecutor",
    "Limits",
    "ProcessExecutor",
    "RayExecutor",
    "create",
    "find",
    "names",
]

ENTRY_POINT_GROUP = "recordmill.executors"


BUILTIN: dict[str, type[Executor]] = {
    "process": ProcessExecutor,
    "dask": DaskExecutor,
    "ray": RayExecutor,
}


def names() -> list[str]:
    found = {ep.name for ep in _entry_points()}
    return sorted(set(BUILTIN) | found)


def find(name: str) -> type[Executor]:
    """The executor class called ``name``: a built-in, or from the entry-point group."""
    if name in BUILTIN:
        return BUILTIN[name]
    for ep in _entry_points():
        if ep.name == name:
            found = ep.load()
            if not (isinstance(found, type) and issubclass(found, Executor)):
                raise ConfigError(
                    f"executor {name!r} ({ep.value}) is not a subclass of recordmill.executors.Executor"
                )
            return found
    raise ConfigError(f"no executor {name!r}; executors: {', '.join(names())}")


def _entry_points() -> Any:
    return _entry_points_on(tuple(sys.path))


@functools.cache
def _entry_points_on(path: tuple[str, ...]) -> Any:
    """The group's entry points, looked up once for each ``sys.path`` (a look-up reads every
    installed package's metadata: 20 ms in an environment with torch and transformers)."""
    # importlib.metadata imported here, not with this package: a worker's fork server imports
    # the package (for the pool), and a run's start waits for it (8-17 ms)
    import importlib.metadata

    return importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)


def add_all_options(
    parser: argparse.ArgumentParser, selected: str, required: bool = True
) -> dict[str, list[str]]:
    """Every executor's flags on ``parser``: the ``selected`` one's in its own group (required
    ones required only with ``required``), the others' hidden and optional (so that a
    ``--config`` file or a command line that names another executor's option is understood, and
    the option ignored with a note). The dests of each executor's flags."""
    shown = option_group(parser, selected)._group_actions
    for action in shown:
        action.required = action.required and required
    dests = {selected: [a.dest for a in shown]}
    hidden = parser.add_argument_group()
    for name in names():
        if name == selected:
            continue
        before = len(hidden._group_actions)
        try:
            find(name).add_options(hidden)
        except (argparse.ArgumentError, ConfigError, ImportError):
            continue  # a flag another executor has too, or an executor that does not load
        for action in hidden._group_actions[before:]:
            action.help = argparse.SUPPRESS
            action.required = False
        dests[name] = [a.dest for a in hidden._group_actions[before:]]
    return dests


def option_group(parser: argparse.ArgumentParser, name: str) -> argparse._ArgumentGroup:
    """The flags of executor ``name``, added to ``parser`` in a group of their own."""
    group = parser.add_argument_group(f"options of --executor {name}")
    find(name).add_options(group)
    return group


def options_of(name: str, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The options ``given`` to executor ``name``, defaults filled in; an unknown executor, an
    unknown option or a missing required one is an error (checked before a run starts)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    actions = option_group(parser, name)._group_actions
    given = dict(given or {})
    unknown = sorted(set(given) - {a.dest for a in actions})
    if unknown:
        raise ConfigError(
            f"executor {name!r} has no option(s) {unknown}; "
            f"its options: {', '.join(sorted(a.dest for a in actions)) or 'none'}"
        )
    missing = [a.option_strings[0] for a in actions if a.required and given.get(a.dest) is None]
    if missing:
        raise ConfigError(f"--executor {name} needs {', '.join(missing)}")
    return {**{a.dest: a.default for a in actions}, **given}


def create(name: str, workers: int, limits: Limits, options: Mapping[str, Any]) -> Executor:
    """Executor ``name`` for ``workers`` jobs at once, given its options (as :func:`options_of`
    checks them); with 0 workers, none: the jobs run in this process."""
    if workers == 0:
        return InlineExecutor(0, limits, options)
    return find(name)(workers, limits, options)
