"""``recordmill write`` and ``python writer.py``: flags (or a ``--config`` YAML file) to a call of
:func:`recordmill.write`, in two passes as pytest and tox parse theirs: find the plugin and the
executor first, let them add their own flags, then parse for real. Errors are one line; a
traceback is shown only when plugin code raised."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import sysconfig
import traceback
from collections.abc import Sequence
from typing import Any

from recordmill import executors
from recordmill.cli.parsing import OneLineParser, say_warnings
from recordmill.engine import settings
from recordmill.engine.pipeline import run_write
from recordmill.errors import ConfigError, RecordmillError, TaskError
from recordmill.plugin.manager import PluginRef, load_plugin, resolve
from recordmill.plugin.mr_api import MR_ARGUMENTS, argument_pickle
from recordmill.plugin.options import Options, group_dests, plugin_group, to_tokens


def _write_parser(add_help: bool = True) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="recordmill write",
        description="Run a dataset plugin and write its rows as partitioned record files.",
        add_help=add_help,
    )
    parser.add_argument(
        "--script",
        "--mindrecord_script",
        help="the plugin: a folder or .py path, an installed plugin's name, or a built-in's name",
    )
    parser.add_argument("--output", "--mindrecord_file", help="output folder")
    settings.add_flags(parser)
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar, no Python warnings, nor what C libraries print to stderr while "
        "tasks run; the plugin's own stderr and logging output, the summary line and errors stay",
    )
    parser.add_argument(
        "--config",
        metavar="YAML",
        help="read flags from a YAML file (keys are flag names); flags on the command line win",
    )
    return parser


def _load_config(path: str) -> dict[str, Any]:
    import yaml  # only for --config: a small write imports it for nothing

    try:
        with open(path) as f:
            config = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"cannot read --config {path}: {' '.join(str(e).split())}") from e
    if not isinstance(config, dict):
        raise ConfigError(f"--config {path}: expected a mapping of flag names to values")
    return config


class Terminated(KeyboardInterrupt):
    """SIGTERM (a job scheduler stopping the run) or SIGHUP (a closed terminal, a dropped ssh):
    stopped as Ctrl-C stops it."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(signum)
        self.signum = signum


def _terminated(signum: int, frame: Any) -> None:
    raise Terminated(signum)


_STOPPED_BY = {signal.SIGTERM: "terminated", signal.SIGHUP: "hung up (the terminal was closed)"}


def write_main(argv: Sequence[str] | None = None) -> int:
    """``python writer.py ...`` and ``recordmill write ...``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    say_warnings()
    previous = {sig: signal.signal(sig, _terminated) for sig in _STOPPED_BY}
    try:
        return _write(argv)
    except RecordmillError as e:
        print(f"recordmill: error: {e}", file=sys.stderr)
        # The plugin's own traceback, when plugin code raised: in a worker, or here.
        if isinstance(e, TaskError) and e.traceback_text:
            print(e.traceback_text.rstrip(), file=sys.stderr)
        elif e.__cause__ is not None and _raised_in_plugin(e.__cause__):
            print(_plugin_traceback(e.__cause__).rstrip(), file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        signum = e.signum if isinstance(e, Terminated) else signal.SIGINT
        with contextlib.suppress(OSError):  # a closed terminal may take nothing more
            print(
                f"recordmill: {_STOPPED_BY.get(signum, 'interrupted')}; the finished work is "
                "kept: run the same command with --resume to do only the rest",
                file=sys.stderr,
            )
        return 128 + signum
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _write(argv: list[str]) -> int:
    # recordmill's own old policy flag; the plugins' old ones once we know the plugin (in _run).
    argv, notes = settings.old_policy_flags(argv, ("on_bad_row",))
    # Two passes, as pytest and tox do: find the plugin first, let it add its options, then parse.
    config_path = _write_parser(add_help=False).parse_known_args(argv)[0].config
    config, config_notes = settings.old_policy_keys(
        _load_config(config_path) if config_path else {}, ("on_bad_row",)
    )
    for note in dict.fromkeys(notes + config_notes):
        print(note, file=sys.stderr)
    executor = _first_pass(argv, config).executor
    first_parser = _write_parser(add_help=False)
    executors.add_all_options(first_parser, executor, required=False)
    first, rest = first_parser.parse_known_args(argv)  # rest: what no executor knows either
    script = first.script or config.get("script") or config.get("mindrecord_script")
    ref = resolve(str(script)) if script is not None else None
    if ref is not None and ref.source == "mindrecord":
        # An unmodified mr_api.py reads the flags recordmill does not know at import time.
        # They are the plugin's options too: recorded in the manifest, compared on --resume.
        with argument_pickle(rest):
            return _run(argv, config, first.config, ref, executor, {MR_ARGUMENTS: rest})
    return _run(argv, config, first.config, ref, executor)


def _first_pass(argv: list[str], config: dict[str, Any]) -> argparse.Namespace:
    """The flags known before any plugin or executor adds its own (the config file's too)."""
    parser = _write_parser(add_help=False)
    tokens = to_tokens(parser, {k: v for k, v in config.items() if k == "executor"}, "--config")
    return parser.parse_known_args(tokens + argv)[0]


def _run(
    argv: list[str],
    config: dict[str, Any],
    config_path: str | None,
    ref: PluginRef | None,
    executor: str,
    extra_options: dict[str, Any] | None = None,
) -> int:
    parser = _write_parser()
    # The executor's own flags, like the plugin's: known once the first pass found its name.
    all_executor_dests = executors.add_all_options(parser, executor)
    plugin, plugin_dests = _plugin_flags(parser, ref)
    # The plugins' old policy flags, unless this plugin has such a flag of its own.
    old_names = tuple(n for n in settings.OLD_PLUGIN_POLICY_NAMES if n not in plugin_dests)
    argv, notes = settings.old_policy_flags(argv, old_names)
    config, config_notes = settings.old_policy_keys(config, old_names)
    for note in dict.fromkeys(notes + config_notes):
        print(note, file=sys.stderr)
    config_tokens = to_tokens(parser, config, f"--config {config_path}")
    if ref is not None and ref.source == "mindrecord":
        args, _ = parser.parse_known_args(config_tokens + argv)  # the rest went to the pickle
    else:
        args = parser.parse_args(config_tokens + argv)
    if plugin is None:
        parser.error("--script is required (a plugin folder, .py file, or plugin name)")
    if args.output is None:
        parser.error("--output is required")

    _note_other_executors(parser, args, all_executor_dests, executor)
    executor_dests = all_executor_dests[executor]
    summary = run_write(
        plugin,
        args.output,
        options=Options(
            {**(extra_options or {}), **{dest: getattr(args, dest) for dest in plugin_dests}}
        ),
        settings=settings.from_args(
            args,
            executor_options={dest: getattr(args, dest) for dest in executor_dests},
            progress=not args.quiet,
        ),
    )
    print(summary.line())
    return 0


def _plugin_flags(parser: argparse.ArgumentParser, ref: PluginRef | None) -> tuple[Any, list[str]]:
    """The plugin ``ref`` names, loaded, and the dests of its flags, added to ``parser``
    (None and none without ``--script``)."""
    if ref is None:
        return None, []
    plugin = load_plugin(ref)
    try:
        return plugin, group_dests(plugin_group(parser, plugin))
    except argparse.ArgumentError as e:
        raise ConfigError(f"plugin {plugin.name}: its option clashes with recordmill's: {e}") from e


def _note_other_executors(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    dests: dict[str, list[str]],
    executor: str,
) -> None:
    """A note for each flag given of an executor other than ``executor`` (it is ignored)."""
    for name, names in dests.items():
        for dest in names:
            if name != executor and getattr(args, dest) != parser.get_default(dest):
                print(
                    f"recordmill: note: {dest} is an option of --executor {name}, not of "
                    f"{executor}; ignored",
                    file=sys.stderr,
                )


def _raised_in_plugin(error: BaseException) -> bool:
    """Whether plugin code (not recordmill, an installed library or Python's own) is among the
    frames an error passed through: only then is its traceback worth showing."""
    if isinstance(error, RecordmillError):
        return False
    return any(
        _plugin_file(f.f_code.co_filename) for f, _ in traceback.walk_tb(error.__traceback__)
    )


def _plugin_file(name: str) -> bool:
    """Whether a frame's file is plugin code: not recordmill's, an installed library's (pluggy's
    hook calls among them) or Python's own."""
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package
    libraries = {
        sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")
    }
    return not name.startswith("<") and not os.path.abspath(name).startswith((ours, *libraries))


def _plugin_traceback(error: BaseException) -> str:
    """The error's traceback with the plugin's own frames only, as a task's is shown."""
    shown = traceback.TracebackException.from_exception(error)
    shown.stack = traceback.StackSummary.from_list(
        [frame for frame in shown.stack if _plugin_file(frame.filename)]
    )
    shown.__cause__ = shown.__context__ = None
    return "".join(shown.format())
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package
    libraries = {
        sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")
    }
    for frame, _ in traceback.walk_tb(error.__traceback__):
        name = frame.f_code.co_filename
        if not name.startswith("<") and not os.path.abspath(name).startswith((ours, *libraries)):
            return True
    return False
