"""A multiprocessing context whose queues' pipes are as wide as the system lets a user make
them, for recordmill's ``DataLoader``.

A DataLoader worker hands each batch to the loader's process through a pipe, 64 KB wide by
default on Linux: a batch of images (a few MB) then crosses it in many turns, each waking the
other side, and the worker and the loader wait on each other in turn. A pipe of 1 MB (the most
an unprivileged process may ask for, ``/proc/sys/fs/pipe-max-size``) lets a batch cross in a
few. Where the system refuses (a user over ``pipe-user-pages-soft``, another platform), the pipe
stays as it is.
"""

from __future__ import annotations

import multiprocessing
import sys
from multiprocessing import context as contexts
from pathlib import Path
from typing import Any

__all__ = ["wide_pipes"]

F_SETPIPE_SZ = 1031  # Linux's fcntl command (Python's fcntl module names it from 3.10 on Linux)
WIDEST = 1 << 20  # what a pipe may be widened to: pipe-max-size's default


class _Wide(contexts.BaseContext):
    def Queue(self, maxsize: int = 0) -> Any:  # multiprocessing's name
        queue = super().Queue(maxsize)
        writer = getattr(queue, "_writer", None)
        if writer is not None:
            widen(writer.fileno())
        return queue


class WideSpawn(_Wide, contexts.SpawnContext):
    pass


WIDE: dict[str, type[contexts.BaseContext]] = {"spawn": WideSpawn}
if sys.platform != "win32":

    class WideFork(_Wide, contexts.ForkContext):
        pass

    class WideForkServer(_Wide, contexts.ForkServerContext):
        pass

    WIDE |= {"fork": WideFork, "forkserver": WideForkServer}


def wide_pipes(context: contexts.BaseContext | str | None = None) -> contexts.BaseContext:
    """``context`` (a start method's name, or None for the default one; or a context, given
    back as it is), its queues made with wide pipes."""
    if isinstance(context, contexts.BaseContext):
        return context
    return WIDE[multiprocessing.get_context(context).get_start_method()]()


def widen(fd: int) -> int | None:
    """Make the pipe of ``fd`` as wide as allowed (at most ``WIDEST``); its width, or None
    where it could not be changed."""
    try:
        import fcntl

        return fcntl.fcntl(fd, F_SETPIPE_SZ, min(WIDEST, _pipe_max()))
    except (ImportError, OSError):
        return None


def _pipe_max() -> int:
    try:
        return int(Path("/proc/sys/fs/pipe-max-size").read_text())
    except (OSError, ValueError):
        return WIDEST
