"""Phase 1 of a write: the plugin loaded, its options parsed, its tasks counted and its schema
asked for; what the later phases run, as one :class:`Run`."""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pyarrow as pa

from recordmill.dataset import versions
from recordmill.dataset.schema import to_arrow_schema
from recordmill.engine.settings import OLD_PLUGIN_POLICY_NAMES, WriteSettings, old_policy_keys
from recordmill.errors import PluginError, RecordmillError
from recordmill.plugin.manager import DatasetPlugin, PluginRef, load_plugin
from recordmill.plugin.options import Options, option_dests, plugin_options


@dataclass(frozen=True)
class Run:
    """What a write does: the plugin and its options, the settings, the number of tasks and the
    declared schema (None: inferred from the rows); with ``--append``, the manifest of the
    dataset it appends to (see engine/append.py)."""

    plugin: DatasetPlugin
    options: Options
    settings: WriteSettings
    tasks: int
    declared: pa.Schema | None
    base: dict[str, Any] | None = None

    @property
    def version(self) -> int:
        """The dataset version this run writes."""
        return 1 if self.base is None else versions.current(self.base) + 1

    @property
    def row_group_size(self) -> int | None:
        """The rows per row group asked for: the settings', or an appended dataset's own."""
        if self.base is not None:
            return (self.base.get("settings") or {}).get("row_group_size")
        return self.settings.row_group_size


def plan(
    plugin: str | os.PathLike[str] | PluginRef | ModuleType | DatasetPlugin,
    options: Options | Mapping[str, Any] | None,
    settings: WriteSettings,
) -> Run:
    """Phase 1: load the plugin, parse its options, ask it for its tasks and schema."""
    if not isinstance(plugin, DatasetPlugin):
        plugin = load_plugin(plugin)
    if not isinstance(options, Options):
        options, settings = _old_policy_options(plugin, options or {}, settings)
        options = plugin_options(plugin, options)
    return Run(
        plugin, options, settings, plugin.task_number(options), _declared_schema(plugin, options)
    )


def _old_policy_options(
    plugin: DatasetPlugin, options: Mapping[str, Any], settings: WriteSettings
) -> tuple[Mapping[str, Any], WriteSettings]:
    """The plugins' old policy options (``on_bad_file``, ``on_bad_record``) given from Python,
    moved to the settings' ``on_bad_input`` (unless the plugin has such an option itself)."""
    defined = set(option_dests(plugin))
    names = tuple(n for n in OLD_PLUGIN_POLICY_NAMES if n not in defined)
    moved, notes = old_policy_keys(options, names)
    for note in notes:
        warnings.warn(note, DeprecationWarning, stacklevel=4)
    if "on_bad_input" in moved and "on_bad_input" not in defined:
        policy = moved.pop("on_bad_input")
        if settings.on_bad_input == "fail":
            settings = dataclasses.replace(settings, on_bad_input=policy)
    return moved, settings


def _declared_schema(plugin: DatasetPlugin, options: Options) -> pa.Schema | None:
    try:
        declared = plugin.schema(options)
    except RecordmillError:
        raise
    except Exception as e:
        raise PluginError(f"plugin {plugin.name}: schema() raised {type(e).__name__}: {e}") from e
    return None if declared is None else to_arrow_schema(declared)
