"""The disk cache's folder on the machine, safe to share a parent with other users.

Users of a cluster or a workstation point ``cache_dir`` at the same folder (under /tmp, on a
shared disk), and what the cache holds becomes training data: another user must not be able to
plant a part, read one, or make a read overwrite or delete a file. So each user has a folder of
their own in it, ``user-UID``, made private (0700), and every folder below is checked before use:
a real folder (not a symbolic link), owned by this user, writable by no one else; a ``cache_dir``
that others may write must have the sticky bit (as /tmp has), so that no one else can rename the
user's folder away. Files are created private (0600) with ``O_EXCL | O_NOFOLLOW``: a name planted
as a link is never written through. A folder that fails a check is not used (``UnsafeCache``).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

from recordmill.errors import ConfigError

CACHE_DIR_ENV = "RECORDMILL_CACHE_DIR"
PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def default_cache_dir() -> Path:
    """The user's cache folder for recordmill: ``RECORDMILL_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/recordmill``, else the platform's (``~/Library/Caches/recordmill`` on
    macOS, ``~/.cache/recordmill`` elsewhere)."""
    given = os.environ.get(CACHE_DIR_ENV)
    if given:
        return Path(given).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser().absolute() / "recordmill"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "recordmill"
    return Path.home() / ".cache" / "recordmill"


class UnsafeCache(ConfigError):
    """A cache folder another user owns or may write: not used."""


class Folder:
    """One dataset version's folder in the cache (``cache_dir/user-UID/VERSION``): ``parts/``
    and the ``locks/`` beside them."""

    def __init__(self, cache_dir: Path, version: str):
        self.cache_dir = cache_dir
        self.root = cache_dir / f"user-{os.geteuid()}" / version
        self._listing: dict[str, str] | None = None  # part name -> its file, as last read
        self._make()

    def evict(self, keep: Path, limit: int) -> None:
        """Remove the least recently used parts until the others fit ``limit``, counting the
        parts being filled; those that a process killed while filling left are removed."""
        with self.locked("evict"):
            found, filling = [], 0
            for entry in os.scandir(self.root / "parts"):
                with contextlib.suppress(FileNotFoundError):
                    if entry.name.endswith(".partial") and not alive(filler(entry.name)):
                        os.unlink(entry.path)
                    elif entry.name.endswith(".partial"):
                        filling += entry.stat(follow_symlinks=False).st_size
                    elif entry.name.endswith(".arrow") and entry.path != str(keep):
                        info = entry.stat(follow_symlinks=False)
                        found.append((self._used(entry.name, info), info.st_size, entry.path))
            total = filling + sum(size for _, size, _ in found)
            # Another thread's eviction may have taken ``keep`` between its write and this
            # lock: its batches are still in memory, so it counts for nothing here.
            with contextlib.suppress(FileNotFoundError):
                total += keep.stat().st_size
            for _, size, path in sorted(found):
                if total <= limit:
                    break
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._marker(os.path.basename(path)))
                total -= size

    def touch(self, name: str) -> None:
        """Part ``name`` was just used (its marker's time, not its own: the part's times are
        part of what read/checked.py knows it by)."""
        with contextlib.suppress(OSError):
            fd = os.open(self._marker(name), os.O_WRONLY | os.O_CREAT | NOFOLLOW, PRIVATE_FILE)
            try:
                os.utime(fd)
            finally:
                os.close(fd)

    def _used(self, name: str, info: os.stat_result) -> int:
        """When a part was last used: its marker's time, else its own (when it was filled)."""
        try:
            return max(info.st_mtime_ns, os.stat(self._marker(name)).st_mtime_ns)
        except FileNotFoundError:
            return info.st_mtime_ns

    def _marker(self, name: str) -> Path:
        return self.root / "locks" / f"{name}.used"

    def find(self, name: str, fresh: bool = False) -> Path | None:
        """The cached file of the part ``name``, if there is one: from the folder's listing as
        this process last read it (one read of the folder for every part, not one a part),
        read again when ``fresh`` or when the part is not in it."""
        listing = self._listing
        if fresh or listing is None or name not in listing:
            listing = self._listing = {}
            for found in self.names():
                if found.endswith(".arrow"):
                    listing[found.split(".", 1)[0]] = found
        found = listing.get(name)
        return None if found is None else self.root / "parts" / found

    def names(self) -> Iterator[str]:
        return (e.name for e in os.scandir(self.root / "parts"))

    def create(self, name: str) -> Path:
        """A new, empty, private file in ``parts/``, never one that exists (or a link planted
        there); in this user's private folder, no one else can put another in its place."""
        path = self.root / "parts" / name
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, PRIVATE_FILE))
        return path

    @contextlib.contextmanager
    def locked(self, name: str) -> Iterator[None]:
        """An exclusive lock shared by every process of this user on the machine; the kernel
        drops it when its holder dies."""
        flags = os.O_RDWR | os.O_CREAT | NOFOLLOW
        fd = os.open(self.root / "locks" / f"{name}.lock", flags, PRIVATE_FILE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _make(self) -> None:
        try:
            make_private(self.cache_dir, self.root, self.root / "parts", self.root / "locks")
            probe = self.root / "locks" / f".probe.{os.getpid()}"
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | NOFOLLOW, PRIVATE_FILE))
            probe.unlink()
        except UnsafeCache:
            raise
        except OSError as e:
            raise ConfigError(
                f"cannot use {self.cache_dir} as a cache folder: {e.strerror or e} (give "
                f"cache_dir= a folder this user can write, or set {CACHE_DIR_ENV})"
            ) from None


def make_private(cache_dir: Path, *folders: Path) -> None:
    """``cache_dir`` made (and checked as shared: ``check_shared``), and this user's folders in
    it, from ``user-UID`` down to ``folders``, made private and checked (``check_private``)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    check_shared(cache_dir)
    user = cache_dir / f"user-{os.geteuid()}"
    for folder in (user, *(f for f in folders if f != user)):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=PRIVATE_FOLDER)
        check_private(folder)


def check_shared(folder: Path) -> None:
    """``cache_dir`` itself: this user's or root's, and others may write it only with the sticky
    bit (as /tmp has): else someone could rename this user's folder in it away."""
    info = os.stat(folder)
    if info.st_uid not in (os.geteuid(), 0):
        problem = f"belongs to another user (uid {info.st_uid}), who may rename what is in it"
    elif info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        problem = "may be written by other users, without the sticky bit"
    else:
        return
    raise UnsafeCache(
        f"{folder} {problem} (another user could replace this user's cache in it): give "
        "cache_dir= a folder of your own"
    )


def check_private(folder: Path) -> None:
    """A folder of this user's cache: a real folder, this user's, writable by no one else."""
    info = os.lstat(folder)
    problem = None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder (a symbolic link?)"
    elif info.st_uid != os.geteuid():
        problem = f"belongs to another user (uid {info.st_uid})"
    elif info.st_mode & 0o077:
        problem = f"may be read or written by other users (mode {stat.filemode(info.st_mode)})"
    if problem is not None:
        raise UnsafeCache(f"{folder} {problem}: it is not used as this user's disk cache")


def log_count(env: str, count: int) -> None:
    """Append ``PID COUNT`` to the file the environment variable ``env`` names, where it is set:
    what benchmarks and tests count across processes (bytes checked, orders drawn)."""
    path = os.environ.get(env)
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
        try:
            os.write(fd, f"{os.getpid()} {count}\n".encode())  # one write: lines never mix
        finally:
            os.close(fd)


def log_once(message: str, level: int = logging.INFO) -> None:
    """``message`` in recordmill's log, the first time this process says it."""
    if message not in _SAID:
        _SAID.add(message)
        logging.getLogger("recordmill").log(level, message)


_SAID: set[str] = set()


def filler(partial: str) -> int:
    """The process filling a part, from its temporary name ``.PART.PID.partial``."""
    try:
        return int(partial.rsplit(".", 2)[1])
    except (IndexError, ValueError):
        return 0  # not one of ours: no process


def alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
