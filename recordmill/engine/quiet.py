"""``--quiet`` while tasks run: no Python warnings of the plugin or its libraries, and nothing that C
libraries print to standard error themselves; the plugin's own messages (``sys.stderr``,
``logging``) still show."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import Any

from recordmill.engine.settings import WriteSettings


@contextlib.contextmanager
def quieted(settings: WriteSettings) -> Iterator[None]:
    """With ``--quiet``, while tasks run: no Python warnings of the plugin or its libraries, and
    nothing that C libraries print to standard error themselves (libtiff's warnings). What the
    plugin writes to ``sys.stderr`` and its ``logging`` output still show."""
    with warnings.catch_warnings(), contextlib.ExitStack() as quiet:
        if not settings.progress:
            warnings.simplefilter("ignore")
            quiet.enter_context(_silent_stderr())
        yield


_silenced: dict[str, Any] = {"count": 0, "saved": -1, "stream": None, "handlers": []}


_silenced_lock = threading.Lock()


@contextlib.contextmanager
def _silent_stderr() -> Iterator[None]:
    """File descriptor 2 sent to the null device: what C libraries print there themselves, which
    Python's warnings filter never sees. Python's own ``sys.stderr`` (``print(...,
    file=sys.stderr)``, ``logging``'s handlers) is moved to a copy of the real standard error
    meanwhile, so the plugin's own messages still show. Errors reach the user too: the worker
    sends them to the main process, which prints them. The first task in redirects, the last out
    restores, for tasks that run in threads of one process."""
    with _silenced_lock:
        if not _silenced["count"]:
            _redirect()
        _silenced["count"] += 1
    try:
        yield
    finally:
        with _silenced_lock:
            _silenced["count"] -= 1
            if not _silenced["count"]:
                _restore()


def _redirect() -> None:
    sys.stderr.flush()
    _silenced["saved"] = os.dup(2)
    stream = open(os.dup(_silenced["saved"]), "w", buffering=1, errors="backslashreplace")  # noqa: SIM115
    _silenced["stream"], _silenced["original"] = stream, sys.stderr
    # Handlers made before (logging.basicConfig at import) hold the original object: moved too.
    _silenced["handlers"] = [h for h in _stream_handlers() if h.stream is sys.stderr]
    for handler in _silenced["handlers"]:
        handler.setStream(stream)
    sys.stderr = stream
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 2)


def _restore() -> None:
    sys.stderr.flush()
    original = _silenced["original"]
    for handler in _silenced["handlers"]:
        if handler.stream is _silenced["stream"]:
            handler.setStream(original)
    sys.stderr = original
    _silenced["stream"].close()
    os.dup2(_silenced["saved"], 2)
    os.close(_silenced["saved"])


def _stream_handlers() -> list[logging.StreamHandler]:
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    return [
        h
        for logger in loggers
        for h in getattr(logger, "handlers", ())
        # logging's last-resort handler finds sys.stderr itself: nothing to move.
        if isinstance(h, logging.StreamHandler)
        and not isinstance(getattr(type(h), "stream", None), property)
    ]
