"""The fork server that recordmill's worker processes start from (Linux), started as early as the
command line allows.

A worker is forked from a server process that imported pyarrow and recordmill's write path once
(0.2 s and more), plus what the plugin says its workers import (``worker_imports()``, nothing more
by default). ``python writer.py`` starts that server before it imports anything itself
(:func:`start_early`), when its command line asks for worker processes; the server imports
recordmill's modules beside the main process's own imports, then waits for the plugin's list,
which :func:`start` hands it once the plugin is loaded (with the environment as it is then), as
a line through a pipe (a FIFO in a private temporary folder, which the server removes once it
opened it). A main process that ends first closes the pipe: the server reads nothing and goes
on. This module imports only the standard library and recordmill's ``errors`` and ``timeline``
(which import nothing else), so that the start costs nothing before it.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import multiprocessing
import multiprocessing.forkserver
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence

from recordmill.errors import ConfigError
from recordmill.timeline import mark

# Modules the fork server imports once, so every worker starts with pyarrow already loaded, and
# the pool's own module, which a worker would otherwise import to find its main function (18 ms
# each). Nothing more by default: workers convert short lists of plain values without pa.array
# (engine/plain.py), whose first call in a process imports pandas where it is installed
# (0.15 s); a plugin whose rows go through it (pandas objects, lists of strings) can name pandas
# in its worker_imports().
OWN_PRELOAD = [
    "recordmill.engine.tasks",
    "recordmill.engine.partitions",
    "recordmill.executors.pool",
]
DEFAULT_IMPORTS: list[str] = []
# In the environment of a fork server this module starts only (taken out of it at once): that
# it is one, and an early one's pipe.
SERVER_ENV = "RECORDMILL_FORK_SERVER"
PIPE_ENV = "RECORDMILL_WORKER_IMPORTS"
# This module, preloaded last by an early server: importing it there reads the plugin's list.
THIS = __name__

_waiting: int | None = None  # the write end of an early server's pipe, until its list is sent
_chosen = False  # whether this process chose what a fork server it starts imports


def start(imports: list[str] | None = None) -> None:
    """The fork server running, importing recordmill's modules and ``imports`` (None: the
    default, nothing more); an early one is sent ``imports`` instead. (A server
    already running, from an earlier write in this process, is kept as it is.)"""
    global _waiting
    if not sys.platform.startswith("linux"):  # workers are spawned there: nothing to start
        return
    wanted = DEFAULT_IMPORTS if imports is None else imports
    if _waiting is not None:  # one line, the end kept open: see start_early()
        # With the environment as it is now: what the plugin set as it was loaded (thread
        # counts, tokenizer settings) reaches the workers, as with a server started now.
        line = json.dumps({"imports": wanted, "environ": dict(os.environ)})
        os.write(_waiting, (line + "\n").encode())
        _waiting = None
        return
    preload(OWN_PRELOAD + [m for m in wanted if m not in OWN_PRELOAD])
    _spawn({})


def preload(modules: list[str] | None = None) -> None:
    """What a fork server started from now on imports (None: recordmill's modules and the
    default's, unless this process chose already)."""
    global _chosen
    if modules is None and _chosen:
        return
    _chosen = True
    chosen = OWN_PRELOAD + DEFAULT_IMPORTS if modules is None else modules
    # This module last: in the server, it reads an early start's imports and ends it quickly.
    multiprocessing.get_context("forkserver").set_forkserver_preload([*chosen, THIS])


def before_workers() -> None:
    """As workers start: an early server still waiting for its imports is sent the default's
    (it must never wait for a line that does not come), and one not started yet imports the
    default's modules unless this process chose others."""
    if _waiting is not None:
        start(None)
        return
    preload(None)
    _spawn({})  # nothing when it runs already


def start_early(argv: Sequence[str]) -> None:
    """Start the fork server now, before this process imports pyarrow, when ``argv`` (a write's
    flags) asks for worker processes of the default executor; it imports what the plugin
    needs once :func:`start` names it."""
    global _waiting
    if not sys.platform.startswith("linux") or _waiting is not None or not _wants_workers(argv):
        return
    folder, fd = tempfile.mkdtemp(prefix="recordmill-forkserver-"), -1  # private: made 0700
    try:
        path = os.path.join(folder, "imports")
        os.mkfifo(path, 0o600)
        # Opened read-write, which does not wait for a reader; kept open as long as this
        # process lives, so that a line written before the server opens its end still reaches
        # it, and the server reads the end of the pipe once this process is gone. The server
        # removes the folder.
        fd = os.open(path, os.O_RDWR)
        preload(OWN_PRELOAD)
        _spawn({PIPE_ENV: path})
    except (OSError, ConfigError):  # (no FIFOs here, ...) the pool's own start says why, if
        if fd >= 0:  # it fails too
            os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)
        return
    _waiting = fd
    mark("fork-server-started", server=multiprocessing.forkserver._forkserver._forkserver_pid)


def _spawn(env: dict[str, str]) -> None:
    """The server running; one started now is given ``env`` and told it is the server (it
    inherits this process's environment as the next line starts it, and takes them out)."""
    env = {SERVER_ENV: "1", **env}
    os.environ.update(env)
    try:
        multiprocessing.forkserver.ensure_running()
    except OSError as e:
        if "too long" not in str(e):
            raise
        raise ConfigError(
            f"cannot start worker processes: the fork server's socket in {tempfile.gettempdir()} "
            "would have a path longer than the system allows (108 bytes); set TMPDIR to a "
            "shorter folder"
        ) from None
    finally:
        for name in env:
            os.environ.pop(name, None)


def _wants_workers(argv: Sequence[str]) -> bool:
    """A write's flags that run plugin tasks in worker processes of recordmill's own pool (a
    --config may say otherwise: then the server starts when the plugin is loaded, as always)."""
    flags = list(argv)
    if not any(f.split("=")[0] in ("--script", "--mindrecord_script") for f in flags):
        return False
    if any(f in ("-h", "--help") or f.startswith("--config") for f in flags):
        return False
    if "0" in (_value(flags, "--workers"), _value(flags, "--mindrecord_workers")):
        return False
    return _value(flags, "--executor") in (None, "process")


def _value(flags: list[str], name: str) -> str | None:
    """The flag's value as argparse takes it: the last one given."""
    value = None
    for i, flag in enumerate(flags):
        if flag == name and i + 1 < len(flags):
            value = flags[i + 1]
        elif flag.startswith(name + "="):
            value = flag.split("=", 1)[1]
    return value


def _in_server() -> None:
    """In a fork server this module started: it ends without the interpreter's teardown (which
    takes 0.1 s of pyarrow, more with pandas, and holds the pipes of a command's output open),
    and an early one imports what the main process names."""
    if os.environ.pop(SERVER_ENV, None) is None:
        return
    # A Ctrl-C in the terminal reaches the server too: the main process says what it does.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    atexit.register(_end_now)
    _import_declared(os.environ.pop(PIPE_ENV, None))


def _end_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(0)


def _import_declared(path: str | None) -> None:
    """Import what the main process names in the pipe at ``path`` (nothing if it ended first)."""
    if path is None:
        return
    try:
        # Not waiting for a writer: one that is gone already makes the read below end at once.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    os.set_blocking(fd, True)
    with open(fd) as pipe:
        line = pipe.readline()
    try:
        said = json.loads(line) if line else {}
    except ValueError:
        said = {}
    if "environ" in said:
        os.environ.clear()
        os.environ.update(said["environ"])
    for name in said.get("imports", []):
        with contextlib.suppress(ImportError):  # as a preload: a worker that needs it says so
            importlib.import_module(name)


_in_server()
