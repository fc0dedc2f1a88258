"""Epoch orders drawn once a machine: a large order (8 bytes a row: 800 MB at 10^8 rows) is
drawn by the first process that needs it into a file of the user's private cache folder
(``cache_dir/user-UID/orders/``), and every other process of the node (the ranks, their
DataLoader workers, the workers started again each epoch, the jobs after them) maps that file
instead of holding an order of its own. The file's pages are page cache, counted once a node.

An order is a pure function of what its key names (rows, seed, epoch, the parts of a block
order, a mixture's sources and weights), so a file only ever holds what a process would draw
itself. It is drawn under a lock (the others wait for it rather than draw it too), flushed to
disk and renamed into place whole, and opened only if it is a regular file of this user's, of
whole rows, in a folder no other user may write (``cache_folder.py``'s checks). The folder keeps
the most recently used orders up to ``ORDERS_BYTES`` (a file removed while mapped stays readable
to those that mapped it). Orders of fewer than ``SHARE_ROWS`` rows are drawn by each process
(8 MB at most); where the folder cannot be used, each process draws its own, said once in the log.

``RECORDMILL_ORDER_LOG``: a file each order drawn appends its rows to (``pid rows``), for
benchmarks and tests that count the orders drawn across processes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import mmap
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from recordmill.read.machine.cache_folder import (
    Dir,
    UnsafeCache,
    alive,
    default_cache_dir,
    filler,
    log_count,
    log_once,
    user_folder,
)
from recordmill.version import __version__

SHARE_ROWS = 1 << 20  # smaller orders are drawn in each process
ORDERS_BYTES = 4 << 30  # what the orders folder keeps, the order just drawn aside
ORDER_LOG_ENV = "RECORDMILL_ORDER_LOG"
ROW = np.dtype(np.int64).itemsize


class Orders:
    """The orders folder, ``cache_dir/user-UID/orders/``."""

    def __init__(self, cache_dir: str | os.PathLike[str] | None = None):
        """The orders in ``cache_dir`` (default: the user's cache folder), made and checked at
        the first large order."""
        self.root = Path(cache_dir).expanduser().absolute() if cache_dir else default_cache_dir()
        self.folder = self.root / f"user-{os.geteuid()}" / "orders"  # for what is said of it
        self._dir: Dir | None = None

    def get(self, key: str, draw: Callable[[], np.ndarray]) -> np.ndarray:
        """The order ``key`` names, mapped from its file (read-only), which ``draw`` fills the
        first time on this machine (under a lock waited for ``LOCK_WAIT`` at most)."""
        if self._dir is None:
            self._dir = user_folder(self.root).sub("orders")
        name = f"{key}.order"
        rows = draw.rows if isinstance(draw, InPlace) else None
        with self._dir.locked(name):
            found = _mapped(self._dir, name, rows)
            if found is not None:
                with contextlib.suppress(OSError):
                    os.utime(name, dir_fd=self._dir.fd)  # used: the last out of the folder
                return found
            _write(self._dir, name, draw)
        self._evict(keep=name)
        mapped = _mapped(self._dir, name, rows)
        if mapped is None:  # removed at once by another job's eviction: drawn again
            return drawn(draw)
        return mapped

    def _evict(self, keep: str) -> None:
        """Remove the least recently used orders past ``ORDERS_BYTES`` (``keep`` aside), and
        what a process killed while writing an order left."""
        assert self._dir is not None
        found = []
        for name in self._dir.names():
            with contextlib.suppress(FileNotFoundError):
                if name.endswith(".partial") and not alive(filler(name)):
                    self._dir.unlink(name)
                elif name.endswith(".order") and name != keep:
                    info = self._dir.stat(name)
                    found.append((info.st_mtime_ns, info.st_size, name))
        total = sum(size for _, size, _ in found)
        for _, size, name in sorted(found):
            if total <= ORDERS_BYTES:
                break
            # its lock too (one an order: an epoch's): a process that still waits on the
            # removed lock may draw the order beside another, into a file of its own
            self._dir.unlink(name)
            self._dir.unlink(f"{name}.lock")
            total -= size


def shared_order(
    orders: Orders | None, rows: int, key: tuple[object, ...], draw: Callable[[], np.ndarray]
) -> np.ndarray:
    """The order ``draw`` gives (of about ``rows`` rows), from this machine's orders when it
    is large and there are some, else drawn here; ``key`` names everything it depends on."""
    if orders is None or rows < SHARE_ROWS:
        return drawn(draw)
    # numpy may draw other numbers from a seed in another version (its policy for Generator),
    # and another recordmill may draw orders otherwise
    named = repr((np.__version__, __version__, key)).encode()
    digest = hashlib.sha256(named).hexdigest()[:40]
    try:
        return orders.get(digest, draw)
    except (OSError, UnsafeCache) as e:  # a full disk, a folder not safe: this process's own
        log_once(
            f"epoch orders are drawn in each process, {orders.folder} not used: {e}",
            logging.WARNING,
        )
        return drawn(draw)


class InPlace:
    """An order of ``rows`` rows drawn into the array it is given (``fill(out)``): in the
    file's own pages where it is shared, with no copy of its own."""

    def __init__(self, rows: int, fill: Callable[[np.ndarray], None]):
        self.rows, self.fill = rows, fill

    def __call__(self) -> np.ndarray:
        out = np.empty(self.rows, np.int64)
        self.fill(out)
        return out


def drawn(draw: Callable[[], np.ndarray]) -> np.ndarray:
    """``draw()``, counted in ``RECORDMILL_ORDER_LOG`` where it is set, and read-only as a
    shared order is: whatever its size, no caller may change it."""
    order = draw()
    log_count(ORDER_LOG_ENV, len(order))
    order.flags.writeable = False
    return order


def _write(folder: Dir, name: str, draw: Callable[[], np.ndarray]) -> None:
    """The order ``draw`` gives in ``name``, whole or not at all: written aside, flushed,
    renamed into place."""
    partial = f".{name}.{os.getpid()}.partial"
    fd = folder.open(partial, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    try:
        if isinstance(draw, InPlace) and draw.rows:
            # Its blocks taken now: a disk that fills up under a mapping kills the process
            # (SIGBUS) where this raises ENOSPC, and the order is drawn in memory instead.
            os.posix_fallocate(fd, 0, draw.rows * ROW)
            # Left for the collector to close: an error in fill() keeps a view of it alive.
            draw.fill(np.frombuffer(mmap.mmap(fd, draw.rows * ROW), np.int64))
            log_count(ORDER_LOG_ENV, draw.rows)
        else:
            with os.fdopen(fd, "wb", closefd=False) as out:
                out.write(memoryview(np.ascontiguousarray(drawn(draw), np.int64)).cast("B"))
        os.fsync(fd)
        folder.replace(partial, name)
    except BaseException:
        folder.unlink(partial)
        raise
    finally:
        os.close(fd)


def _mapped(folder: Dir, name: str, rows: int | None = None) -> np.ndarray | None:
    """The order in ``name``, mapped read-only; None if there is none, or what is there is not
    an order of this user's (another kind of file, another owner, a part of a row, other than
    ``rows`` rows where that is known)."""
    try:
        fd = folder.open(name, os.O_RDONLY)
    except (OSError, UnsafeCache):
        return None
    try:
        info = os.fstat(fd)
        if info.st_size % ROW or rows not in (None, info.st_size // ROW):
            return None
        if info.st_size == 0:  # (no map of nothing) read-only as a mapped one is
            return np.frombuffer(b"", np.int64)
        return np.frombuffer(mmap.mmap(fd, info.st_size, prot=mmap.PROT_READ), np.int64)
    finally:
        os.close(fd)
