"""The pipe a DataLoader's workers hand their batches through, widened (recordmill's
``DataLoader``).

A worker hands each batch to the loader's process through one pipe, 64 KB wide by default on
Linux: a batch of images (a few MB) then crosses in many turns, each waking the other side, and
the worker and the loader wait on each other in turn. At 1 MB (``/proc/sys/fs/pipe-max-size``'s
default, the most an unprivileged process may ask for) a batch crosses in a few. Only that one
pipe of a loader is widened, not the queues that carry indices to the workers: a user's pipes
share a budget of pages (``pipe-user-pages-soft``, 64 MB by default), past which the kernel
makes every new pipe of that user narrower still. Where it refuses, the pipe stays as it is.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

__all__ = ["widen", "widen_results"]

WIDEST = 1 << 20  # what a pipe is widened to at most: pipe-max-size's default


def widen_results(iterator: Any) -> int | None:
    """Widen the pipe of a torch DataLoader iterator's result queue (the one its workers hand
    batches through); its width, or None where there is none or it could not be changed."""
    writer = getattr(getattr(iterator, "_worker_result_queue", None), "_writer", None)
    return None if writer is None else widen(writer.fileno())


def widen(fd: int) -> int | None:
    """Make the pipe of ``fd`` as wide as allowed (at most ``WIDEST``); its width, or None
    where it could not be changed (not Linux, or refused)."""
    if sys.platform != "linux":
        return None
    import fcntl

    try:
        return fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), min(WIDEST, _pipe_max()))
    except OSError:
        return None


def _pipe_max() -> int:
    try:
        return int(Path("/proc/sys/fs/pipe-max-size").read_text())
    except (OSError, ValueError):
        return WIDEST
