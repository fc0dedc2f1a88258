"""The disk cache's folder on the machine, safe to share a parent with other users.

Users of a cluster or a workstation point ``cache_dir`` at the same folder (under /tmp, on a
shared disk), and what the cache holds becomes training data: another user must not be able to
plant a part, read one, or make a read overwrite or delete a file. So each user has a folder of
their own in it, ``user-UID``, made private (0700), and every folder below is checked before use:
a real folder (not a symbolic link), owned by this user, writable by no one else; a ``cache_dir``
that others may write must have the sticky bit (as /tmp has), so that no one else can rename the
user's folder away. Each folder is opened once a process and checked as opened (``fstat``), and
everything in it is reached through that descriptor (:class:`Dir`): a link flipped or a folder
renamed above it later changes nothing a process reads. Files are opened without following a
link and checked as opened (a regular file of this user's), created private (0600) with
``O_EXCL``: a name planted as a link is never written through. A folder that fails a check is
not used (``UnsafeCache``), nor one whose lock is held past ``LOCK_WAIT`` (``LockWait``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from recordmill.errors import ConfigError

CACHE_DIR_ENV = "RECORDMILL_CACHE_DIR"
PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)


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
    """A cache folder another user owns or may write, or what is at its name is no folder of
    ours: not used."""


class LockWait(OSError):
    """A lock of the cache held past ``LOCK_WAIT`` seconds: the part is read without it."""


# How long a lock of the cache is waited for before the part (or order) is read without it.
LOCK_WAIT = 60.0
_OPENED: dict[str, Dir] = {}  # each cache_dir's user folder, as this process opened it


class Dir:
    """A folder of this user's cache, opened once: every file in it is reached relative to its
    descriptor, never by its path again, so that no link or rename above it, made after it was
    checked, changes what is read or written. Files are opened without following a link
    (``O_NOFOLLOW``) and checked as opened (``fstat``): a regular file of this user's."""

    def __init__(self, fd: int, path: Path):
        self.fd, self.path = fd, path

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            self.close()

    def sub(self, name: str) -> Dir:
        """Folder ``name`` in this one, made private if it is not there, and checked."""
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, PRIVATE_FOLDER, dir_fd=self.fd)
        try:
            fd = os.open(name, os.O_RDONLY | DIRECTORY | NOFOLLOW | CLOEXEC, dir_fd=self.fd)
        except OSError as e:  # a link (ELOOP), a file (ENOTDIR)
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafeCache(
                    f"{self.path / name} is not a folder (a symbolic link?): it is not used as "
                    "this user's disk cache"
                ) from None
            raise
        check_private(fd, self.path / name)
        return Dir(fd, self.path / name)

    def open(self, name: str, flags: int, mode: int = PRIVATE_FILE) -> int:
        """File ``name``, opened with ``flags``: refused (``UnsafeCache``) unless it is a regular
        file of this user's."""
        fd = os.open(name, flags | NOFOLLOW | CLOEXEC, mode, dir_fd=self.fd)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            os.close(fd)
            raise UnsafeCache(f"{self.path / name} is not a file of this user's: not used")
        return fd

    def names(self) -> list[str]:
        """The folder's entries: read through a descriptor of their own (two threads reading
        one descriptor's entries at once would share its position, and each miss some)."""
        fd = os.open(".", os.O_RDONLY | DIRECTORY | CLOEXEC, dir_fd=self.fd)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    def stat(self, name: str) -> os.stat_result:
        return os.stat(name, dir_fd=self.fd, follow_symlinks=False)

    def unlink(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def replace(self, name: str, new: str) -> None:
        os.replace(name, new, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def changed(self) -> int:
        """When the folder's entries last changed (a file added or removed)."""
        return os.fstat(self.fd).st_mtime_ns

    def free(self) -> int:
        info = os.fstatvfs(self.fd)
        return info.f_bavail * info.f_frsize

    @contextlib.contextmanager
    def locked(self, name: str) -> Iterator[None]:
        """An exclusive lock (``name.lock``) shared by every process of this user on the
        machine, which the kernel drops when its holder dies; waited for ``LOCK_WAIT`` seconds
        at most (``LockWait``)."""
        fd = self.open(f"{name}.lock", os.O_RDWR | os.O_CREAT)
        try:
            _flock(fd, self.path / f"{name}.lock")
            yield
        finally:
            os.close(fd)


def _flock(fd: int, path: Path) -> None:
    deadline = time.monotonic() + LOCK_WAIT
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockWait(
                    errno.EWOULDBLOCK, f"{path} was held for more than {LOCK_WAIT:g} s"
                ) from None
            time.sleep(pause)
            pause = min(0.05, pause * 2)


def user_folder(cache_dir: Path) -> Dir:
    """``cache_dir/user-UID``, made private, opened once a process (forked ones keep it):
    ``cache_dir`` as opened (a link at its name followed, that once) checked as shared
    (``check_shared``), the user's folder in it as private."""
    key = os.fspath(cache_dir)
    if key in _OPENED and not os.fstat(_OPENED[key].fd).st_nlink:  # removed since: anew
        del _OPENED[key]
    if key not in _OPENED:
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(cache_dir, os.O_RDONLY | DIRECTORY | CLOEXEC)
        except OSError as e:
            if not os.path.lexists(cache_dir):
                raise  # a folder that cannot be made: the caller says so
            raise UnsafeCache(  # a file, or a link to nothing of use, at its name
                f"{cache_dir} is not a folder this user can use ({e.strerror or e}): it is not "
                "used as this user's disk cache"
            ) from None
        top = Dir(fd, cache_dir)
        try:
            check_shared(fd, cache_dir)
            _OPENED[key] = top.sub(f"user-{os.geteuid()}")
        finally:
            top.close()
    return _OPENED[key]


def check_shared(fd: int, folder: Path) -> None:
    """``cache_dir`` itself (``fd``, as opened): this user's or root's, and others may write it
    only with the sticky bit (as /tmp has): else someone could rename this user's folder in it
    away."""
    info = os.fstat(fd)
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


def check_private(fd: int, folder: Path) -> None:
    """A folder of this user's cache (``fd``, as opened): this user's, writable by no one else."""
    info = os.fstat(fd)
    problem = None
    if info.st_uid != os.geteuid():
        problem = f"belongs to another user (uid {info.st_uid})"
    elif info.st_mode & 0o077:
        problem = f"may be read or written by other users (mode {stat.filemode(info.st_mode)})"
    if problem is not None:
        os.close(fd)
        raise UnsafeCache(f"{folder} {problem}: it is not used as this user's disk cache")


class Folder:
    """One dataset version's folder in the cache (``cache_dir/user-UID/VERSION``): ``parts/``
    and the ``locks/`` beside them, each opened once (:class:`Dir`)."""

    def __init__(self, cache_dir: Path, version: str):
        self.cache_dir = cache_dir
        self.root = cache_dir / f"user-{os.geteuid()}" / version  # for what is said of it
        self._listing: dict[str, str] | None = None  # part name -> its file, as last read
        try:
            top = user_folder(cache_dir).sub(version)
            self.parts, self.locks = top.sub("parts"), top.sub("locks")
            top.close()
            probe = f".probe.{os.getpid()}"
            os.close(self.locks.open(probe, os.O_WRONLY | os.O_CREAT))
            self.locks.unlink(probe)
        except UnsafeCache:
            raise
        except OSError as e:
            raise ConfigError(
                f"cannot use {self.cache_dir} as a cache folder: {e.strerror or e} (give "
                f"cache_dir= a folder this user can write, or set {CACHE_DIR_ENV})"
            ) from None

    def evict(self, keep: str | os.PathLike[str], limit: int) -> None:
        """Remove the least recently used parts until the others fit ``limit``, counting the
        parts being filled (``keep``, the new one, aside); those that a process killed while
        filling left are removed."""
        keep = os.path.basename(keep)
        with self.locks.locked("evict"):
            found, filling = [], 0
            for name in self.parts.names():
                with contextlib.suppress(FileNotFoundError):
                    if name.endswith(".partial") and not alive(filler(name)):
                        self.parts.unlink(name)
                    elif name.endswith(".partial"):
                        filling += self.parts.stat(name).st_size
                    elif name.endswith(".arrow") and name != keep:
                        info = self.parts.stat(name)
                        found.append((self._used(name, info), info.st_size, name))
            total = filling + sum(size for _, size, _ in found)
            # Another thread's eviction may have taken ``keep`` between its write and this
            # lock: its batches are still in memory, so it counts for nothing here.
            with contextlib.suppress(FileNotFoundError):
                total += self.parts.stat(keep).st_size
            for _, size, name in sorted(found):
                if total <= limit:
                    break
                self.parts.unlink(name)
                self.locks.unlink(f"{name}.used")
                total -= size

    def touch(self, name: str) -> None:
        """Part ``name`` was just used (its marker's time, not its own: the part's times are
        part of what read/machine/checked.py knows it by)."""
        with contextlib.suppress(OSError):
            fd = self.locks.open(f"{name}.used", os.O_WRONLY | os.O_CREAT)
            try:
                # The clock's own nanoseconds: a file system stamps a time it is not given with a
                # coarse clock (a few ms), and parts used in one tick would tie, the eviction
                # then taking them in the order of their names, not of their use.
                now = time.time_ns()
                os.utime(fd, ns=(now, now))
            finally:
                os.close(fd)

    def _used(self, name: str, info: os.stat_result) -> int:
        """When a part was last used: its marker's time, else its own (when it was filled)."""
        try:
            return max(info.st_mtime_ns, self.locks.stat(f"{name}.used").st_mtime_ns)
        except FileNotFoundError:
            return info.st_mtime_ns

    def find(self, name: str, fresh: bool = False) -> str | None:
        """The cached file of the part ``name``, if there is one: from the folder's listing as
        this process last read it (one read of the folder for every part, not one a part),
        read again when ``fresh`` or when the part is not in it."""
        listing = self._listing
        if fresh or listing is None or name not in listing:
            listing = self._listing = {}
            for found in self.parts.names():
                if found.endswith(".arrow"):
                    listing[found.split(".", 1)[0]] = found
        return listing.get(name)

    def has(self, name: str) -> bool:
        """Whether part ``name`` is there."""
        try:
            self.parts.stat(name)
            return True
        except FileNotFoundError:
            return False

    def create(self, name: str) -> int:
        """A new, empty, private file in ``parts/``, opened for writing: never one that exists
        (or a link planted there)."""
        return self.parts.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL)

    def locked(self, name: str) -> contextlib.AbstractContextManager[None]:
        """Part ``name``'s lock (see :meth:`Dir.locked`)."""
        return self.locks.locked(name)

    def kept(self, name: str, most: int) -> bytes | None:
        """A small file kept beside the parts (a Parquet footer), if it is there, of this user's,
        and at most ``most`` bytes; what it holds is for the caller to check."""
        try:
            fd = self.parts.open(name, os.O_RDONLY)
        except (OSError, UnsafeCache):
            return None
        with os.fdopen(fd, "rb") as f:
            data = f.read(most + 1)
        return data if len(data) <= most else None

    def keep(self, name: str, data: bytes) -> None:
        """Keep ``data`` as the small file ``name`` beside the parts: written aside and renamed
        into place whole; not kept when the folder cannot take it (a full disk)."""
        partial = f".{name}.{os.getpid()}.partial"
        try:
            with os.fdopen(self.create(partial), "wb") as f:
                f.write(data)
            self.parts.replace(partial, name)
        except OSError:
            self.parts.unlink(partial)


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
