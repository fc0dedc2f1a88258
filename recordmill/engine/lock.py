"""One run per output: an ``flock`` on a file beside it on a local disk (``.NAME.recordmill-lock``,
deleted when the run ends), a lease object on S3 (see lease.py). A second run is refused at once,
before it touches anything."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
from typing import Any

from recordmill.dataset import layout
from recordmill.dataset.storage import Store
from recordmill.engine.lease import Lease
from recordmill.errors import OutputError


class OutputLock:
    """The lock (or lease) on an output, held from :meth:`take` to :meth:`release`."""

    def __init__(self, final: Store):
        self.final = final
        self.path = final.sibling(layout.lock_file(final.name)).root
        self._file: Any = None
        self.lease: Lease | None = None

    def take(self) -> None:
        """Hold the output's lock for this process's life: a second run on it is refused."""
        if not self.final.local:
            self.lease = Lease.take(self.final)
            return
        self.final.parent.makedirs()  # flushed where it was made: the output is renamed into it
        while self._file is None:
            lock = open(self.path, "a")  # noqa: SIM115 - held until release()
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.close()
                raise OutputError(
                    f"another recordmill run is writing {self.final} (it holds "
                    f"{self.path}); wait for it to finish"
                ) from None
            # The run before may have deleted the file after we opened it: lock the one there.
            if _same_file(lock, self.path):
                self._file = lock
            else:
                lock.close()
        if self.final.flushes:
            # Flushed, as every file made beside the output is. The lock needs no more: a flock
            # does not outlive a power cut, and the next run takes a lock file left by one.
            os.fsync(self._file.fileno())
            self.final.parent.flush_dir()

    def guarded(self, *stores: Store) -> tuple[Store, ...]:
        """The stores, each write to them checking the lease first (on S3; elsewhere as they
        are): a run that lost its lease must not write."""
        if self.lease is None:
            return stores
        return tuple(dataclasses.replace(store, guard=self.lease.guard) for store in stores)

    def check(self) -> None:
        """Refuse to go on without the lease (object storage; a local lock cannot be lost)."""
        if self.lease is not None:
            self.lease.check()

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)  # while still locked: no run can be holding it
            self._file.close()
            self._file = None
        if self.lease is not None:
            self.lease.release()
            self.lease = None


def _same_file(handle: Any, path: str) -> bool:
    try:
        return os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False
