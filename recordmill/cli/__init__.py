"""The command line: ``recordmill COMMAND``, one module per group of commands, each adding its
own sub-parsers (``write``, ``inspect``: info/head/rejects/verify, ``scaffold``: plugins/new/
make-list/demo-data, ``show``: a dataset's page). A command module parses arguments and calls the library; nothing more.
``python writer.py`` is ``recordmill write``."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from recordmill.cli.parsing import say_warnings
from recordmill.errors import RecordmillError
from recordmill.forkserver import start_early

__all__ = ["console", "finish", "main", "write_main"]


def console() -> NoReturn:
    """The ``recordmill`` command and ``python -m recordmill``: :func:`main`, its process
    ended as soon as it returns; a write's fork server started first (``recordmill.forkserver``)."""
    argv = sys.argv[1:]
    if argv[:1] == ["write"]:
        start_early(argv[1:])
    finish(main(argv))


def finish(code: int) -> NoReturn:
    """End the process with ``code`` now: the exit handlers run and the output is flushed, but
    the interpreter's teardown of pyarrow and numpy (0.1 s, once the work is on disk) is skipped,
    as a worker process skips it. Where something still runs (a thread a plugin started, a
    profiler or tracer that writes at exit), the process ends the usual way instead."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if sys.getprofile() or sys.gettrace() or any(t.is_alive() and not t.daemon for t in others):
        sys.exit(code)
    atexit._run_exitfuncs()  # logging's flush among them, and any a plugin registered
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError):  # the reader went away: as main() says
            stream.flush()
    os._exit(code)


def write_main(argv: Sequence[str] | None = None) -> int:
    """``python writer.py ...`` and ``recordmill write ...`` (see recordmill.cli.write)."""
    from recordmill.cli.write import write_main as run

    return run(argv)


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
