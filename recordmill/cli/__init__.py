"""The command line: ``recordmill COMMAND``, one module per group of commands, each adding its
own sub-parsers (``write``, ``inspect``: info/head/rejects/verify, ``scaffold``: plugins/new/
make-list/demo-data, ``show``: a dataset's page). A command module parses arguments and calls the library; nothing more.
``python writer.py`` is ``recordmill write``."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from recordmill.cli.parsing import say_warnings
from recordmill.cli.write import write_main
from recordmill.errors import RecordmillError

__all__ = ["main", "write_main"]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    say_warnings()
    if argv and argv[0] == "write":  # its flags depend on the plugin: parsed in two passes
        return write_main(argv[1:])
    # The other commands' modules are imported only here: a write (most runs) spends no time
    # on what reading, inspecting and showing need.
    import recordmill
    from recordmill.cli import inspect, scaffold, show
    from recordmill.cli.parsing import OneLineParser

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
    scaffold.add_parsers(commands)
    inspect.add_parsers(commands)
    show.add_parsers(commands)
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
