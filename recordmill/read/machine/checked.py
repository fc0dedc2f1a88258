"""What this machine has already checked: a record, shared by every process of one user, of the
row groups of local Arrow IPC files (and the disk cache's parts) whose bytes matched their
checksums, so that each is checked once a machine, not once a process: a DataLoader's workers,
the workers it starts again each epoch, the ranks of a node and the jobs after them.

A file's record is keyed by its identity as the filesystem gives it (device, inode, size, and the
times of its last change, ``mtime`` and ``ctime``) and by the checksum the manifest gives it, so
a file written to, replaced, renamed over or even touched since (any of which sets ``ctime``,
which no one can set back) is checked again; a file changed in the last two seconds is not
recorded at all. It is one byte a row group, set when the group's
bytes matched, in the user's private cache folder (``cache_folder.py``'s checks: no other user
can plant a record, and a link planted in its place is never followed). Where the folder cannot
be used, each process checks for itself, as before.

``RECORDMILL_CHECK_LOG``: a file each check appends its bytes to (``pid bytes``), for benchmarks
and tests that count the bytes checked across processes.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from recordmill.read.machine.cache_folder import (
    Dir,
    UnsafeCache,
    default_cache_dir,
    log_count,
    user_folder,
)

CHECK_LOG_ENV = "RECORDMILL_CHECK_LOG"
SET = b"\x01"
# A file changed less than this long ago is not recorded: filesystems stamp changes with a
# coarse clock (a few milliseconds), so a change in the same tick as the one recorded could
# keep its times; one made after this long always gets later ones.
SETTLED_NS = 2_000_000_000


class Checked:
    """The record of what was checked, in ``cache_dir/user-UID/checked/``."""

    def __init__(self, folder: Dir):
        self.folder = folder
        # Per file key: its record as this process first read it. A byte once set is never
        # cleared (a changed file has another key), so a set one needs no lock or look again.
        self._seen: dict[str, bytes] = {}

    @classmethod
    def at(cls, cache_dir: str | os.PathLike[str] | None = None) -> Checked | None:
        """The record in ``cache_dir`` (default: the user's cache folder); None where it cannot
        be used safely (then every process checks for itself)."""
        root = Path(cache_dir).expanduser().absolute() if cache_dir else default_cache_dir()
        try:
            return cls(user_folder(root).sub("checked"))
        except (OSError, UnsafeCache):
            return None

    def once(self, key: str, index: int, check: Callable[[], None]) -> bool:
        """Run ``check`` (which raises when the bytes do not match) unless item ``index`` (a row
        group) of the file ``key`` was checked on this machine; record it when it passes. A
        lock on the item's byte makes the processes that want it at once wait for the one
        checking it, instead of each checking it too. Returns whether it checked."""
        if self._seen_set(key, index):
            return False
        fd = self._open(key)
        if fd is None:
            check()
            return True
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX, 1, index)
            if os.pread(fd, 1, index) == SET:
                return False
            check()
            os.pwrite(fd, SET, index)
            return True
        finally:
            os.close(fd)  # and the lock with it

    def seen(self, key: str, index: int) -> bool:
        """Whether item ``index`` of the file ``key`` was checked on this machine (as this
        process first read its record)."""
        return self._seen_set(key, index)

    def _seen_set(self, key: str, index: int) -> bool:
        """Whether the record, read whole once a process, had item ``index`` set: one look at
        a file's record, not one a row group."""
        seen = self._seen.get(key)
        if seen is None:  # (two read-ahead threads may both read it: no lock a fork could copy)
            fd = self._open(key)
            if fd is None:
                return False
            try:
                seen = self._seen[key] = os.pread(fd, os.fstat(fd).st_size, 0)
            finally:
                os.close(fd)
        return seen[index : index + 1] == SET

    def _open(self, key: str) -> int | None:
        try:  # a regular file of this user's, as opened: else trust nothing in it
            return self.folder.open(key, os.O_RDWR | os.O_CREAT)
        except (OSError, UnsafeCache):
            return None


def check_once(
    record: Checked | None, key: str | None, index: int, check: Callable[[], None]
) -> None:
    """``check`` item ``index`` of the file ``key`` once a machine (``Checked.once``), or now
    where there is no record or the file has no key (it changed moments ago)."""
    if record is None or key is None:
        check()
    else:
        record.once(key, index, check)


def file_key(
    path: str | os.PathLike[str], checksum: str, info: os.stat_result | None = None
) -> str | None:
    """The record's key for a file as it is now (``info``: as opened, where it was): None if it
    cannot be looked at, or changed too recently to be told apart from a change to come
    (``SETTLED_NS``)."""
    try:
        info = os.stat(path) if info is None else info
    except OSError:
        return None
    if time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) < SETTLED_NS:
        return None
    identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    text = f"{':'.join(map(str, identity))}:{checksum}:{os.path.abspath(path)}"
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def log_checked(size: int) -> None:
    """Append a check's bytes to ``RECORDMILL_CHECK_LOG``, where it is set."""
    log_count(CHECK_LOG_ENV, size)
