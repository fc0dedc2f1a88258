"""The command line: ``recordmill write|plugins|new``, and ``python writer.py`` (= ``recordmill write``).

This module parses arguments and calls the library; nothing more.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import sysconfig
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import recordmill
from recordmill import executors
from recordmill.dataset.rejects import read as read_rejects
from recordmill.engine import settings
from recordmill.engine.pipeline import run_write
from recordmill.errors import ConfigError, RecordmillError, TaskError
from recordmill.executors.progress import human_size
from recordmill.inputs.demo import make_demo_data
from recordmill.inputs.filelists import make_list
from recordmill.inputs.images import EXTENSIONS
from recordmill.plugin.manager import (
    TEMPLATE_DIR,
    PluginRef,
    available_plugins,
    load_plugin,
    resolve,
    summary,
)
from recordmill.plugin.mr_api import MR_ARGUMENTS, argument_pickle
from recordmill.plugin.options import Options, group_dests, plugin_group, to_tokens
from recordmill.read.dataset import open as open_dataset
from recordmill.read.verify import verify


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
        "--quiet", action="store_true", help="no progress bar, nor the plugin's warnings"
    )
    parser.add_argument(
        "--config",
        metavar="YAML",
        help="read flags from a YAML file (keys are flag names); flags on the command line win",
    )
    return parser


def _load_config(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            config = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"cannot read --config {path}: {' '.join(str(e).split())}") from e
    if not isinstance(config, dict):
        raise ConfigError(f"--config {path}: expected a mapping of flag names to values")
    return config


class OneLineParser(argparse.ArgumentParser):
    """A usage mistake is one ``recordmill: error:`` line that says where the usage is."""

    def error(self, message: str) -> Any:
        self.exit(2, f"recordmill: error: {message} (see: {self.prog} --help)\n")


class Terminated(KeyboardInterrupt):
    """SIGTERM (a job scheduler stopping the run): stopped as Ctrl-C stops it."""


def _terminated(signum: int, frame: Any) -> None:
    raise Terminated


def write_main(argv: Sequence[str] | None = None) -> int:
    """``python writer.py ...`` and ``recordmill write ...``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        return _write(argv)
    except RecordmillError as e:
        print(f"recordmill: error: {e}", file=sys.stderr)
        # The plugin's own traceback, when plugin code raised: in a worker, or here.
        if isinstance(e, TaskError) and e.traceback_text:
            print(e.traceback_text.rstrip(), file=sys.stderr)
        elif e.__cause__ is not None and _raised_in_plugin(e.__cause__):
            traceback.print_exception(e.__cause__, file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        print(
            f"recordmill: {'terminated' if isinstance(e, Terminated) else 'interrupted'}; the "
            "finished work is kept: run the same command with --resume to do only the rest",
            file=sys.stderr,
        )
        return 143 if isinstance(e, Terminated) else 130
    finally:
        signal.signal(signal.SIGTERM, previous)


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
    plugin = None
    plugin_dests: list[str] = []
    if ref is not None:
        plugin = load_plugin(ref)
        try:
            plugin_dests = group_dests(plugin_group(parser, plugin))
        except argparse.ArgumentError as e:
            raise ConfigError(
                f"plugin {plugin.name}: its option clashes with recordmill's: {e}"
            ) from e
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

    for name, dests in all_executor_dests.items():
        for dest in dests:
            if name != executor and getattr(args, dest) != parser.get_default(dest):
                print(
                    f"recordmill: note: {dest} is an option of --executor {name}, not of "
                    f"{executor}; ignored",
                    file=sys.stderr,
                )
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


def plugins_main(args: argparse.Namespace) -> int:
    refs = available_plugins(Path.cwd())
    if not refs:
        print("no plugins found")
        return 0
    width = max(len(r.name) for r in refs)
    for ref in refs:
        print(f"{ref.name:<{width}}  {ref.source:<10}  {ref.target}")
        if text := summary(ref):
            print(f"{'':<{width}}  {text}")
    return 0


def new_main(args: argparse.Namespace) -> int:
    target = Path(args.name)
    if target.exists():
        print(f"recordmill: error: {target} already exists", file=sys.stderr)
        return 1
    if not TEMPLATE_DIR.is_dir():
        print(f"recordmill: error: the template folder {TEMPLATE_DIR} is missing", file=sys.stderr)
        return 1
    shutil.copytree(TEMPLATE_DIR, target, ignore=shutil.ignore_patterns("__pycache__"))
    print(f"created {target}/plugin.py; edit task_number() and dict_data(), then run:")
    print(f"  recordmill write --script {target} --output out/{target.name} --partitions 4")
    return 0


def make_list_main(args: argparse.Namespace) -> int:
    if args.train_ratio + args.test_ratio > 1:
        print("recordmill: error: --train-ratio + --test-ratio must not exceed 1", file=sys.stderr)
        return 1
    written = make_list(
        args.root,
        args.prefix,
        train_ratio=args.train_ratio,
        test_ratio=args.test_ratio,
        recursive=not args.no_recursive,
        shuffle=not args.no_shuffle,
        seed=args.seed,
        extensions=tuple(e.strip().lstrip(".") for e in args.exts.split(",")),
    )
    for path in written:
        lines = len(path.read_text().splitlines())
        print(f"wrote {path} ({lines:,} images)")
    return 0


def demo_data_main(args: argparse.Namespace) -> int:
    root = make_demo_data(args.folder)
    if not (root / "torchrecord").exists():
        print(
            'skipped torchrecord/: it needs the lmdb package, pip install "recordmill[torchrecord]"'
        )
    print(
        f"wrote demo inputs to {root}: {', '.join(sorted(p.name + ('/' if p.is_dir() else '') for p in root.iterdir()))}"
    )
    return 0


def info_main(args: argparse.Namespace) -> int:
    ds = open_dataset(args.path)
    m = ds.manifest
    if args.json:
        print(json.dumps(m, indent=2))
        return 0
    print(
        f"{args.path}: {m['total_rows']:,} rows in {len(m['partitions'])} {m['format']} "
        f"partition{'s' if len(m['partitions']) != 1 else ''}"
    )
    print(
        f"created {m.get('created', '?')} by recordmill {m['versions']['recordmill']}, "
        f"pyarrow {m['versions']['pyarrow']}, python {m['versions'].get('python', '?')}"
    )
    options = ", ".join(f"{k}={v!r}" for k, v in m["plugin"]["options"].items()) or "no options"
    print(f"plugin {m['plugin']['name']} ({m['plugin'].get('source', '?')}): {options}")
    settings = m.get("settings", {})
    if settings:
        print("settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    print("schema:")
    for f in m["schema"]["fields"]:
        shape = f" {f['shape']} ({f.get('layout', 'list')})" if "shape" in f else ""
        print(f"  {f['name']}: {f['type']}{shape}{' (nullable)' if f['nullable'] else ''}")
    print("partitions:")
    for p in m["partitions"]:
        print(f"  {p['file']}  {p['rows']:,} rows  {human_size(p['bytes'])}")
    rejects = (m.get("rejects") or {}).get("count", 0)
    if rejects:
        print(f"rejects: {rejects:,}, listed in {m['rejects']['file']} (recordmill rejects PATH)")
    return 0


def rejects_main(args: argparse.Namespace) -> int:
    for record in read_rejects(args.path):
        print(json.dumps(record, ensure_ascii=False))
    return 0


def head_main(args: argparse.Namespace) -> int:
    ds = open_dataset(args.path)
    if args.columns:
        ds = ds.select([c.strip() for c in args.columns.split(",")])
    for i in range(min(args.n, len(ds))):
        row = ds[i]
        print(f"[{i}] " + ", ".join(f"{k}={_show(v)}" for k, v in row.items()))
    return 0


def _show(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value):,} bytes: {value[:8].hex(' ')}{' ...' if len(value) > 8 else ''}>"
    if isinstance(value, np.ndarray):
        return f"<{value.dtype} array {list(value.shape)}>"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def verify_main(args: argparse.Namespace) -> int:
    problems = verify(args.path)
    for problem in problems:
        print(f"{args.path}/{problem}")
    if problems:
        return 1
    m = open_dataset(args.path).manifest
    print(f"ok: {m['total_rows']:,} rows in {len(m['partitions'])} partitions match the manifest")
    return 0


def _raised_in_plugin(error: BaseException) -> bool:
    """Whether plugin code (not recordmill, an installed library or Python's own) is among the
    frames an error passed through: only then is its traceback worth showing."""
    if isinstance(error, RecordmillError):
        return False
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package
    libraries = {
        sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")
    }
    for frame, _ in traceback.walk_tb(error.__traceback__):
        name = frame.f_code.co_filename
        if not name.startswith("<") and not os.path.abspath(name).startswith((ours, *libraries)):
            return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "write":
        return write_main(argv[1:])
    parser = OneLineParser(
        prog="recordmill",
        description="Turn any raw training dataset into partitioned columnar record files.",
    )
    parser.add_argument(
        "--version", action="version", version=f"recordmill {recordmill.__version__}"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    commands.add_parser(
        "write", help="run a plugin and write a dataset (see: recordmill write --help)"
    )
    commands.add_parser("plugins", help="list the plugins recordmill can find").set_defaults(
        func=plugins_main
    )
    new = commands.add_parser("new", help="copy the plugin template to a new folder")
    new.add_argument("name", help="folder to create")
    new.set_defaults(func=new_main)
    make = commands.add_parser(
        "make-list",
        help="write an im2rec-style image list (.lst) for a folder, as im2rec.py --list does",
    )
    make.add_argument("root", help="the image folder (one sub-folder per class)")
    make.add_argument("prefix", help="output prefix: PREFIX.lst, or PREFIX_train.lst ...")
    make.add_argument("--train-ratio", type=float, default=1.0, help="(default: 1.0)")
    make.add_argument("--test-ratio", type=float, default=0.0, help="(default: 0.0)")
    make.add_argument("--seed", type=int, default=0, help="shuffle seed (default: 0)")
    make.add_argument("--no-shuffle", action="store_true", help="keep the sorted order")
    make.add_argument(
        "--no-recursive",
        action="store_true",
        help="only the files directly in ROOT, all with label 0 (default: one label per sub-folder)",
    )
    make.add_argument("--exts", default=",".join(EXTENSIONS), help="(default: %(default)s)")
    make.set_defaults(func=make_list_main)
    demo = commands.add_parser(
        "demo-data", help="write small demo inputs for every built-in plugin"
    )
    demo.add_argument("folder", help="where to write them")
    demo.set_defaults(func=demo_data_main)
    info = commands.add_parser(
        "info", help="what a dataset holds: schema, rows, partitions, plugin"
    )
    info.add_argument("path")
    info.add_argument("--json", action="store_true", help="print the whole manifest as JSON")
    info.set_defaults(func=info_main)
    listed = commands.add_parser(
        "rejects", help="print a dataset's rejected inputs, one JSON object a line"
    )
    listed.add_argument("path")
    listed.set_defaults(func=rejects_main)
    head = commands.add_parser("head", help="print the first rows of a dataset")
    head.add_argument("path")
    head.add_argument("-n", type=int, default=5, help="rows (default: 5)")
    head.add_argument("--columns", help="comma-separated columns (default: all)")
    head.set_defaults(func=head_main)
    check = commands.add_parser(
        "verify", help="re-read every partition and check rows, schema and checksums"
    )
    check.add_argument("path")
    check.set_defaults(func=verify_main)
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except RecordmillError as e:
        print(f"recordmill: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (recordmill rejects PATH | head): stop quietly, as cat does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
