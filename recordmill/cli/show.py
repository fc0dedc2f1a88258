"""``recordmill show``: a dataset's page, one self-contained HTML file (see recordmill.report)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from recordmill.dataset.sizes import human_size
from recordmill.read.decode import MAX_PIXELS
from recordmill.report import show
from recordmill.report.build import ROWS


def show_main(args: argparse.Namespace) -> int:
    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    report = show(
        args.path,
        args.output,
        rows=args.rows,
        columns=columns,
        seed=args.seed,
        label=args.label,
        progress=args.progress,
        max_pixels=args.max_pixels or None,
    )
    size = human_size(len(report.html.encode()))
    where = report.path if "://" in report.path else os.path.relpath(report.path)
    print(f"wrote {where} ({size}); open it in a browser")
    return 0


def _rows(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def add_parsers(commands: Any) -> None:
    """``show``."""
    page = commands.add_parser(
        "show",
        help="write one HTML page about a dataset: schema, statistics, labels, sample images",
    )
    page.add_argument("path")
    page.add_argument(
        "--output",
        "-o",
        help="the HTML file to write (default: NAME.html here, NAME the dataset's)",
    )
    page.add_argument(
        "--rows", type=_rows, default=ROWS, help=f"sample rows shown (default: {ROWS})"
    )
    page.add_argument(
        "--columns", help="comma-separated columns to summarize and show (default: all)"
    )
    page.add_argument("--seed", type=int, default=0, help="which sample rows (default: 0)")
    page.add_argument(
        "--label",
        help="the integer or string column to chart and to show a few rows of each class of "
        "(default: a column named label)",
    )
    page.add_argument(
        "--max-pixels",
        type=_rows,
        default=MAX_PIXELS,
        help=f"an image of more pixels is not decoded, its cell says so (default: {MAX_PIXELS:,}; "
        "0: no bound)",
    )
    page.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar (default: when reading more than a few MB)",
    )
    page.set_defaults(func=show_main)
