"""The ``options`` object that plugin hooks receive, and how a plugin's options are collected."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from recordmill.errors import ConfigError, did_you_mean


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


def option_dests(plugin: Any) -> list[str]:
    """The names under which the plugin's options reach its hooks."""
    return group_dests(
        plugin_group(argparse.ArgumentParser(add_help=False, allow_abbrev=False), plugin)
    )


def group_dests(group: argparse._ArgumentGroup) -> list[str]:
    return [action.dest for action in group._group_actions]


def to_tokens(parser: argparse.ArgumentParser, values: Mapping[str, Any], where: str) -> list[str]:
    """Settings given as a mapping (a YAML file, a Python dict) as command-line tokens.

    Going through the parser gives them the same types, choices and checks as flags. Keys are
    flag names or destinations, with ``-`` or ``_``.
    """
    actions = {}
    for action in parser._actions:
        for name in [action.dest, *action.option_strings]:
            actions[name.lstrip("-").replace("-", "_")] = action
    tokens: list[str] = []
    seen: dict[str, Any] = {}
    _check_known(parser, actions, values, where)
    for key, value in values.items():
        action = actions[str(key).replace("-", "_")]
        if action.dest in seen:
            raise ConfigError(
                f"{where}: {seen[action.dest]!r} and {key!r} are the same setting; keep one"
            )
        seen[action.dest] = key
        if value is None:
            continue
        flag = action.option_strings[0]
        _check_value(action, key, value, where)
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: {key} must be true or false, got {value!r}")
            # ``fsync: false`` (the setting) and ``no-fsync: true`` (the flag) both give --no-fsync.
            named_flag = str(key).replace("-", "_") != action.dest
            if value == (named_flag or isinstance(action, argparse._StoreTrueAction)):
                tokens.append(flag)
        elif isinstance(value, (list, tuple)):
            tokens += [flag, *map(str, value)]
        else:
            tokens += [flag, str(value)]
    return tokens


def _check_value(action: argparse.Action, key: str, value: Any, where: str) -> None:
    """A config value that its flag could not take, said with the key and the file."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return
    takes_many = action.nargs not in (None, "?")
    if isinstance(value, (list, tuple)) and not takes_many:
        raise ConfigError(f"{where}: {key} takes one value, got the list {list(value)!r}")
    for item in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(item, (dict, list)):
            raise ConfigError(f"{where}: {key}: expected a value, got {item!r}")
        if callable(action.type):
            try:
                item = action.type(str(item))
            except (TypeError, ValueError, argparse.ArgumentTypeError):
                kind = getattr(action.type, "__name__", "value")
                raise ConfigError(f"{where}: {key}: expected {kind}, got {item!r}") from None
        if action.choices is not None and item not in action.choices:
            raise ConfigError(
                f"{where}: {key}: expected one of {', '.join(map(str, action.choices))}, got "
                f"{item!r}"
            )


def _check_known(
    parser: argparse.ArgumentParser,
    actions: Mapping[str, argparse.Action],
    values: Mapping[str, Any],
    where: str,
) -> None:
    """Every key of ``values`` a setting of ``parser``: the ones that are not, all named at once."""

    def settable(action: argparse.Action | None) -> bool:
        return bool(action and action.option_strings and action.dest not in ("help", "config"))

    unknown = [k for k in values if not settable(actions.get(str(k).replace("-", "_")))]
    if not unknown:
        return
    known = sorted(a.option_strings[0].lstrip("-") for a in parser._actions if settable(a))
    names = [k.replace("-", "_") for k in known]
    said = [f"{k!r}{did_you_mean(str(k).replace('-', '_'), names)}" for k in unknown]
    raise ConfigError(
        f"{where}: unknown setting{'s' if len(said) > 1 else ''} {', '.join(said)} "
        f"(known: {', '.join(known) or 'none'})"
    )


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise ConfigError(message)


def plugin_options(plugin: Any, values: Mapping[str, Any] | None = None) -> Options:
    """The plugin's options from a mapping (Python API use), parsed as if given as flags.

    Options not given take the defaults the plugin declares.
    """
    parser = _RaisingParser(prog=f"plugin {plugin.name}", add_help=False, allow_abbrev=False)
    dests = group_dests(plugin_group(parser, plugin))
    args = parser.parse_args(to_tokens(parser, values or {}, f"plugin {plugin.name!r}"))
    return Options({dest: getattr(args, dest) for dest in dests})
