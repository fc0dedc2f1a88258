"""The ``options`` object that plugin hooks receive, and how a plugin's options are collected."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from recordmill.errors import ConfigError


class Options:
    """A plugin's option values with attribute access (``--image-dir`` -> ``options.image_dir``)."""

    def __init__(self, values: Mapping[str, Any] | None = None, **more: Any):
        self.__dict__.update(values or {})
        self.__dict__.update(more)

    def __getattr__(self, name: str) -> Any:
        # Only called for missing attributes: say which options exist instead of a bare AttributeError.
        if name.startswith("__"):
            raise AttributeError(name)
        known = ", ".join(sorted(self.__dict__)) or "none"
        raise AttributeError(f"no plugin option {name!r} (options: {known})")

    def __getitem__(self, name: str) -> Any:
        return self.__dict__[name]

    def __contains__(self, name: object) -> bool:
        return name in self.__dict__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Options) and vars(self) == vars(other)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in sorted(self.__dict__.items()))
        return f"Options({inner})"

    def get(self, name: str, default: Any = None) -> Any:
        return self.__dict__.get(name, default)

    def to_dict(self) -> dict[str, Any]:
        """The values as JSON-friendly types (paths become strings), for the manifest."""
        return {k: _jsonable(v) for k, v in sorted(self.__dict__.items())}


def _jsonable(value: Any) -> Any:
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def plugin_group(parser: argparse.ArgumentParser, plugin: Any) -> argparse._ArgumentGroup:
    """Add the plugin's options to ``parser`` in a group of their own and return the group."""
    group = parser.add_argument_group(f"options of plugin {plugin.name!r}")
    plugin.add_options(group)
    return group


def group_dests(group: argparse._ArgumentGroup) -> list[str]:
    return [action.dest for action in group._group_actions]


def plugin_options(plugin: Any, values: Mapping[str, Any] | None = None) -> Options:
    """The plugin's options: its declared defaults, updated with ``values`` (Python API use)."""
    parser = argparse.ArgumentParser(add_help=False)
    dests = group_dests(plugin_group(parser, plugin))
    values = dict(values or {})
    unknown = sorted(set(values) - set(dests))
    if unknown:
        raise ConfigError(
            f"plugin {plugin.name!r} has no option {', '.join(unknown)} "
            f"(its options: {', '.join(dests) or 'none'})"
        )
    required = [a for a in parser._actions if a.required and a.dest not in values]
    defaults = {a.dest: a.default for a in parser._actions if a.dest in dests}
    if required:
        raise ConfigError(
            f"plugin {plugin.name!r} needs option {', '.join(a.dest for a in required)}"
        )
    return Options({**defaults, **values})
