"""``--quiet`` while tasks run: no Python warnings of the plugin or its libraries, and nothing that C
libraries print to standard error themselves."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from collections.abc import Iterator

from recordmill.engine.settings import WriteSettings


@contextlib.contextmanager
def quieted(settings: WriteSettings) -> Iterator[None]:
    """With ``--quiet``, nor the warnings of the plugin or its libraries, nor what C libraries
    print themselves, while tasks run."""
    with warnings.catch_warnings(), contextlib.ExitStack() as quiet:
        if not settings.progress:
            warnings.simplefilter("ignore")
            quiet.enter_context(_silent_stderr())
        yield


_silenced = {"count": 0, "saved": -1}  # tasks running silenced (threads of a Dask worker)


_silenced_lock = threading.Lock()


@contextlib.contextmanager
def _silent_stderr() -> Iterator[None]:
    """Standard error (file descriptor 2) sent to the null device: what C libraries print there
    themselves (libtiff's warnings), which Python's warnings filter never sees. Errors still
    reach the user: the worker sends them to the main process, which prints them. The first
    task in redirects, the last out restores, for tasks that run in threads of one process."""
    with _silenced_lock:
        if not _silenced["count"]:
            sys.stderr.flush()
            _silenced["saved"] = os.dup(2)
            with open(os.devnull, "wb") as null:
                os.dup2(null.fileno(), 2)
        _silenced["count"] += 1
    try:
        yield
    finally:
        with _silenced_lock:
            _silenced["count"] -= 1
            if not _silenced["count"]:
                sys.stderr.flush()
                os.dup2(_silenced["saved"], 2)
                os.close(_silenced["saved"])
