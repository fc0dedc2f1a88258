"""The commands that make things: ``plugins`` (what can be found), ``new`` (a plugin from the
template), ``make-list`` (an im2rec image list) and ``demo-data`` (inputs for every built-in)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from recordmill.cli.package import make_package
from recordmill.inputs.demo import make_demo_data
from recordmill.inputs.filelists import make_list
from recordmill.inputs.images import EXTENSIONS
from recordmill.plugin.manager import BUILTIN_DIR, TEMPLATE_DIR, available_plugins, summary


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
    if args.package:
        target = make_package(args.name, Path.cwd())
        print(f"created the package {target}; install it, list it and test it:")
        print(f'  cd {target} && pip install -e ".[test]" && recordmill plugins && pytest')
        print(f"then: recordmill write --script {args.name} --output out/{args.name}")
        return 0
    target = Path(args.name)
    if os.path.lexists(target):  # a link to nothing too: never written through
        link = " (a symbolic link)" * target.is_symlink()
        print(f"recordmill: error: {target} already exists{link}", file=sys.stderr)
        return 1
    if not TEMPLATE_DIR.is_dir():
        print(f"recordmill: error: the template folder {TEMPLATE_DIR} is missing", file=sys.stderr)
        return 1
    shutil.copytree(TEMPLATE_DIR, target, ignore=shutil.ignore_patterns("__pycache__"))
    print(f"created {target}/plugin.py; edit task_number() and dict_data(), then run:")
    print(f"  recordmill write --script {target} --output out/{target.name} --partitions 4")
    print(f"(the built-in plugins, in {BUILTIN_DIR}, are examples to copy too)")
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


def add_parsers(commands: Any) -> None:
    """``plugins``, ``new``, ``make-list`` and ``demo-data``."""
    commands.add_parser("plugins", help="list the plugins recordmill can find").set_defaults(
        func=plugins_main
    )
    new = commands.add_parser("new", help="copy the plugin template to a new folder")
    new.add_argument("name", help="folder to create (with --package, the plugin's name)")
    new.add_argument(
        "--package",
        action="store_true",
        help="a pip-installable package registering the plugin under NAME, with a test",
    )
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
