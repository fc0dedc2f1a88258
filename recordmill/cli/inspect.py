"""The commands that look at a written dataset: ``info``, ``history``, ``head``, ``rejects``,
``verify``."""

from __future__ import annotations

import argparse
import json
import unicodedata
from typing import Any

import numpy as np

from recordmill.dataset import versions
from recordmill.dataset.manifest import read as read_manifest
from recordmill.dataset.manifest import token_counts
from recordmill.dataset.rejects import read as read_rejects
from recordmill.dataset.sizes import human_size
from recordmill.errors import counted
from recordmill.read.dataset import open as open_dataset
from recordmill.read.decode_check import undecodable
from recordmill.read.verify import verify


def _say(text: str) -> None:
    """Print a line holding a manifest's strings, which anyone who made the dataset chose:
    control characters (terminal escapes that set a title, clear the screen or move the
    cursor over a line) shown escaped, never sent to the terminal."""
    print("".join(_escaped(c) if unicodedata.category(c)[0] == "C" else c for c in text))


def _escaped(char: str) -> str:
    return repr(char)[1:-1] if char not in "\t" else char


def _json_line(record: Any) -> str:
    """One JSON line, its non-ASCII text kept readable but no control character unescaped
    (JSON escapes C0 only; C1 ones such as CSI, U+009B, are terminal escapes too)."""
    text = json.dumps(record, ensure_ascii=False)
    return "".join(json.dumps(c)[1:-1] if unicodedata.category(c)[0] == "C" else c for c in text)


def info_main(args: argparse.Namespace) -> int:
    ds = open_dataset(args.path)
    m = ds.manifest
    if args.json:
        print(json.dumps(m, indent=2))  # JSON escapes every control character itself
        return 0
    _say(
        f"{args.path}: {counted(m['total_rows'], 'row')} in {len(m['partitions'])} {m['format']} "
        f"partition{'s' if len(m['partitions']) != 1 else ''}"
    )
    version = versions.current(m)
    if version > 1:
        appends = f"{version - 1} append{'s' if version > 2 else ''}"
        _say(f"version {version}: a write and {appends} (recordmill history {args.path})")
    else:
        _say("version 1")
    _say(
        f"created {m.get('created', '?')} by recordmill {m['versions']['recordmill']}, "
        f"pyarrow {m['versions']['pyarrow']}, python {m['versions'].get('python', '?')}"
    )
    # The plugin and settings of the run that wrote the current version (each version's:
    # recordmill history).
    of = f" of version {version}" if version > 1 else ""
    options = ", ".join(f"{k}={v!r}" for k, v in m["plugin"]["options"].items()) or "no options"
    plugin = f"{m['plugin']['name']} ({m['plugin'].get('source', '?')}): {options}"
    _say(f"plugin of version {version}: {plugin}" if version > 1 else f"plugin {plugin}")
    settings = m.get("settings", {})
    if settings:
        _say(f"settings{of}: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    _say("schema:")
    for f in m["schema"]["fields"]:
        shape = f" {f['shape']} ({f.get('layout', 'list')})" if "shape" in f else ""
        _say(f"  {f['name']}: {f['type']}{shape}{' (nullable)' if f['nullable'] else ''}")
    _say("partitions:")
    for p in m["partitions"]:
        _say(f"  {p['file']}  {counted(p['rows'], 'row')}  {human_size(p['bytes'])}")
    for name, count in token_counts(m["partitions"]).items():
        _say(f"{name}: {count:,} ids in all")
    rejects = (m.get("rejects") or {}).get("count", 0)
    if rejects:
        _say(f"rejects: {rejects:,}, listed in {m['rejects']['file']} (recordmill rejects PATH)")
    return 0


def history_main(args: argparse.Namespace) -> int:
    manifest = read_manifest(args.path)
    if args.json:
        print(json.dumps(versions.history(manifest), indent=2))
        return 0
    for entry in versions.history(manifest):
        _say(_history_line(entry))
    return 0


def _history_line(entry: dict[str, Any]) -> str:
    """One version: number, time, rows and partitions added, rejects, plugin and options."""
    plugin = entry.get("plugin") or {}
    options = ", ".join(f"{k}={v!r}" for k, v in (plugin.get("options") or {}).items())
    rejected = entry["rejects"]["count"]
    return (
        f"version {entry['version']}  {entry.get('created') or '?'}  +{entry['rows']:,} rows  "
        f"{entry['partitions']} partition{'s' if entry['partitions'] != 1 else ''}"
        + (f"  {rejected:,} rejected" if rejected else "")
        + f"  plugin {plugin.get('name', '?')}: {options or 'no options'}"
    )


def rejects_main(args: argparse.Namespace) -> int:
    for record in read_rejects(args.path):
        print(_json_line(record))
    return 0


def head_main(args: argparse.Namespace) -> int:
    ds = open_dataset(args.path)
    if args.columns:
        ds = ds.select([c.strip() for c in args.columns.split(",")])
    for i in range(min(args.n, len(ds))):
        row = ds[i]
        _say(f"[{i}] " + ", ".join(f"{k}={_show(v)}" for k, v in row.items()))
    return 0


def _show(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value):,} bytes: {value[:8].hex(' ')}{' ...' if len(value) > 8 else ''}>"
    if isinstance(value, np.ndarray):
        return f"<{value.dtype} array {list(value.shape)}>"
    if isinstance(value, np.floating):  # float32: its own shortest form, 17.99
        return str(value)
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def verify_main(args: argparse.Namespace) -> int:
    problems = verify(args.path)
    if args.decode and not problems:
        return _decode_check(args)
    # Each file as a path a tool takes back: s3://bucket/key, the URI's query said once.
    location, _, query = str(args.path).partition("?")
    for problem in problems:
        _say(f"{location.rstrip('/')}/{problem}")
    if problems:
        if query:
            print(f"(files read with ?{query})")
        return 1
    m = open_dataset(args.path).manifest
    print(
        f"ok: {counted(m['total_rows'], 'row')} in {counted(len(m['partitions']), 'partition')} "
        "match the manifest"
    )
    return 0


def _decode_check(args: argparse.Namespace) -> int:
    """``verify --decode COLUMN[=DECODER]``: the rows whose value does not decode, one a line."""
    column, _, name = args.decode.partition("=")
    found = undecodable(args.path, column, name or "image", args.workers, progress=True)
    for reject in found:
        print(f"row {reject.row}: {reject.error}")
    rows = len(open_dataset(args.path))
    if found:
        _say(
            f"{counted(len(found), 'row')} of {rows:,} do not decode ({column}); a DataLoader "
            'with on_error="skip" leaves them out and lists them'
        )
        return 1
    print(f"ok: the checksums match and all {counted(rows, 'value')} of {column} decode")
    return 0


def _at_least_one(text: str) -> int:
    """A row count: a whole number from 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1, got {text!r}")
    return value


def add_parsers(commands: Any) -> None:
    """``info``, ``history``, ``rejects``, ``head`` and ``verify``."""
    info = commands.add_parser(
        "info", help="what a dataset holds: schema, rows, partitions, plugin"
    )
    info.add_argument("path")
    info.add_argument("--json", action="store_true", help="print the whole manifest as JSON")
    info.set_defaults(func=info_main)
    history = commands.add_parser(
        "history", help="a dataset's versions, one line each: time, rows added, plugin, options"
    )
    history.add_argument("path")
    history.add_argument("--json", action="store_true", help="print the history as JSON")
    history.set_defaults(func=history_main)
    listed = commands.add_parser(
        "rejects", help="print a dataset's rejected inputs, one JSON object a line"
    )
    listed.add_argument("path")
    listed.set_defaults(func=rejects_main)
    head = commands.add_parser("head", help="print the first rows of a dataset")
    head.add_argument("path")
    head.add_argument("-n", type=_at_least_one, default=5, help="rows (default: 5)")
    head.add_argument("--columns", help="comma-separated columns (default: all)")
    head.set_defaults(func=head_main)
    check = commands.add_parser(
        "verify", help="re-read every partition and check rows, schema and checksums"
    )
    check.add_argument("path")
    check.add_argument(
        "--decode",
        metavar="COLUMN[=DECODER]",
        help="also decode every value of COLUMN (with image, pil, or module:function; default: "
        "image) and list the rows that do not decode",
    )
    check.add_argument(
        "--workers", type=_at_least_one, help="processes decoding (default: one a core)"
    )
    check.set_defaults(func=verify_main)
