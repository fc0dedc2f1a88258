"""Folders on any filesystem pyarrow knows: a local path or a URI (``s3://``, ``gs://``,
``hdfs://``, ``file://``). Staging, fragments, partitions and the manifest all go through here,
so the same run can write to local disk or straight to object storage from every worker.

A store made with ``fsync=True`` flushes what it writes on a local disk to the device (a file
when it is closed, a folder when asked), so that what a later step trusts survives a power cut;
object stores need no flush (a completed PUT is durable), so there it changes nothing."""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from recordmill.dataset.checksum import crc32c
from recordmill.errors import ConfigError, OutputError


class _FlushedFile(pa.OSFile):
    """A local file to write whose data is on the device once :meth:`close` returns."""

    def __init__(self, path: str, mode: str) -> None:
        self._path, self._flushed = path, False

    def close(self) -> None:
        if self._flushed:
            return
        super().close()
        # Flushed through a descriptor of its own: any one flushes the file's data, and
        # pyarrow 19 and 20 have no working OSFile.fileno().
        _flush_file(self._path)
        self._flushed = True


def _fdatasync(fd: int) -> None:
    # fdatasync skips the timestamps; a new file's size, which its data needs, it does flush.
    getattr(os, "fdatasync", os.fsync)(fd)


def _flush_file(path: str) -> None:
    """Flush a local file's data to the device, through a descriptor of its own."""
    fd = os.open(path, os.O_RDONLY)
    try:
        _fdatasync(fd)
    finally:
        os.close(fd)


def _flush_files(root: str) -> None:
    """Flush the data of every file in the local folder ``root`` and below."""
    for top, _, files in os.walk(root):
        for name in files:
            _flush_file(os.path.join(top, name))


def _write_whole(path: str, data: bytes, flush: bool) -> None:
    """Write a local file whole: into ``path.partial``, flushed if ``flush``, renamed ``path``
    (a reader never sees half of it)."""
    partial = path + ".partial"
    with open(partial, "wb") as f:
        f.write(data)
        if flush:  # before the rename: a name never stands for lost data
            f.flush()
            _fdatasync(f.fileno())
    os.replace(partial, path)


def fsync_dir(path: str) -> None:
    """Flush a local folder's entries (names created, renamed or deleted in it) to the device."""
    if os.name != "posix":  # Windows cannot open a folder to flush it; NTFS journals names
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class HashingSink:
    """A file to write that passes every byte on to ``out`` and computes its SHA-256 on the
    way, so that a written file's checksum never needs the file read back; and, between the
    places :meth:`mark` is called, the CRC-32C of each run of bytes (a row group's), the last
    run ending where the file does (its footer)."""

    def __init__(self, out: Any):
        self._out = out
        self._digest = hashlib.sha256()
        self._size = 0
        self._crc = 0  # of the bytes since the last mark
        self.offsets: list[int] = []
        self.crc32c: list[int] = []
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self._digest.update(view)
        if self.offsets:
            self._crc = crc32c(view, self._crc)
        self._out.write(view)
        self._size += view.nbytes
        return view.nbytes

    def mark(self) -> None:
        """A run of bytes ends (and the next starts) here: its start and CRC-32C are kept."""
        if self.offsets:
            self.crc32c.append(self._crc)
        self.offsets.append(self._size)
        self._crc = 0

    def tell(self) -> int:
        return self._size

    def flush(self) -> None:
        self._out.flush()

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            if self.offsets:  # the last run: the file's footer
                self.crc32c.append(self._crc)
            self._out.close()
            self.closed = True

    @property
    def size(self) -> int:
        return self._size

    @property
    def checksum(self) -> str:
        """``sha256:`` and the hex digest of what was written."""
        return "sha256:" + self._digest.hexdigest()


# Output streams left unclosed on purpose (see Store.abandon).
_ABANDONED: list[Any] = []


def _filesystem(text: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and the base path on it of a local path or a URI; a URI that pyarrow
    cannot use is a ConfigError."""
    if "://" not in text:
        return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(text))
    try:
        fs, root = pafs.FileSystem.from_uri(_small_puts(text))
    except (pa.ArrowInvalid, OSError) as e:
        raise ConfigError(f"cannot use the location {text}: {e}") from e
    return fs, root.rstrip("/")


def _small_puts(uri: str) -> str:
    """An S3 URI asking pyarrow to send a small file in one ``PutObject`` when it is closed
    (otherwise each file is a multipart upload: three requests, from the file's opening), unless
    the URI says otherwise."""
    if not uri.startswith("s3://") or "allow_delayed_open=" in uri or not _delays_opens():
        return uri
    return uri + ("&" if "?" in uri else "?") + "allow_delayed_open=true"


@functools.cache
def _delays_opens() -> bool:
    """Whether this pyarrow's S3 URIs take ``allow_delayed_open`` (pyarrow 19 and 20 do not)."""
    try:
        pafs.FileSystem.from_uri("s3://bucket?region=us-east-1&allow_delayed_open=true")
    except pa.ArrowInvalid:
        return False
    return True


NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO's open must not wait for a writer
CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _makedirs_flushed(path: str) -> None:
    """``path`` and any missing folder above it, each one made flushed into its parent."""
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for made in reversed(missing):
        os.makedirs(made, exist_ok=True)  # exist_ok: workers make _tasks/ at once
        fsync_dir(os.path.dirname(made))


def open_regular(path: str, real: str) -> int:
    """The file ``path``, opened to read, refused (an ``OutputError``) unless what was opened is
    a regular file at ``real``, its own path with no link in it: a dataset's files are data made
    by others, and a symbolic link or a FIFO in it must not make a read of something else (a
    file outside it, a device, a pipe that never ends). What is checked is the file opened (its
    descriptor), never its path before the open: a file swapped for a link meanwhile is not
    read. A missing file is the open's ``FileNotFoundError``."""
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | NONBLOCK | CLOEXEC)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        fd, what = -1, "a symbolic link"
    else:
        what = None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            what = "not a regular file (a FIFO, a device or a folder)"
        elif _opened_path(fd, path) != real:
            what = "outside the folder (a link in its path)"
    if what is not None:
        if fd >= 0:
            os.close(fd)
        raise OutputError(f"{path} is {what}: a dataset's files are regular files in its folder")
    return fd


def open_in(store: Store, *names: str) -> int:
    """A local file of ``store``'s folder, opened to read: refused unless it is a regular file
    of this very folder (see :func:`open_regular`)."""
    path = store.path(*names)
    return open_regular(path, os.path.join(os.path.realpath(store.root), *names))


def _opened_path(fd: int, path: str) -> str:
    """Where the file open on ``fd`` lies (Linux: its link in /proc), else ``path`` resolved."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)


def fd_path(fd: int) -> str:
    """A name that opens the file ``fd`` is open on, whatever its path is now (Linux's
    ``/proc/self/fd``, the BSDs' and macOS's ``/dev/fd``): for what opens files by name."""
    return f"/proc/self/fd/{fd}" if os.path.isdir("/proc/self/fd") else f"/dev/fd/{fd}"


def _open_by_fd(opener: Callable[[str], Any], fd: int) -> Any:
    """``opener`` (a function that opens a file by name) of the file open on ``fd``, through
    its descriptor's name; ``fd`` is closed after (what ``opener`` opened stays open)."""
    try:
        return opener(fd_path(fd))
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Store:
    """A filesystem and a base path on it; small and picklable, so workers can use it.

    ``guard``, when set (a picklable callable), is called before each write that changes the
    folder (a file opened for writing, written whole or deleted; see :meth:`check`), and raises
    when this process may no longer write there: a run on object storage that lost its lease."""

    fs: pafs.FileSystem
    root: str
    fsync: bool = False  # flush what is written here to the device (local disks only)
    guard: Callable[[], None] | None = field(default=None, compare=False, repr=False)

    @staticmethod
    def at(location: str | os.PathLike[str], fsync: bool = False) -> Store:
        """The folder at a local path or a URI (``s3://bucket/prefix``...)."""
        return Store(*_filesystem(os.fspath(location)), fsync)

    @property
    def local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def flushes(self) -> bool:
        """Whether writes here are flushed: asked for, and on a local disk."""
        return self.fsync and self.local

    def child(self, name: str) -> Store:
        return Store(self.fs, f"{self.root}/{name}", self.fsync, self.guard)

    def sibling(self, name: str) -> Store:
        parent = self.root.rsplit("/", 1)[0]
        return Store(self.fs, f"{parent}/{name}", self.fsync, self.guard)

    @property
    def parent(self) -> Store:
        return Store(self.fs, self.root.rsplit("/", 1)[0] or "/", self.fsync, self.guard)

    def check(self) -> None:
        """Raise when this process may no longer write here (see ``guard``)."""
        if self.guard is not None:
            self.guard()

    @staticmethod
    def abandon(*streams: Any) -> None:
        """Leave output streams unclosed, for good: on object storage an object appears when
        its stream is closed (a destructor would close it too), and a writer that may no longer
        write must not make one appear. Worker processes end without destructors."""
        _ABANDONED.extend(streams)

    @property
    def name(self) -> str:
        return self.root.rsplit("/", 1)[-1]

    def path(self, *names: str) -> str:
        return "/".join([self.root, *names])

    def __str__(self) -> str:
        return self.root if self.local else f"{self.fs.type_name}://{self.root}"

    def info(self, *names: str) -> pafs.FileInfo:
        return self.fs.get_file_info(self.path(*names))

    def exists(self, *names: str) -> bool:
        return self.info(*names).type != pafs.FileType.NotFound

    def is_file(self, *names: str) -> bool:
        return self.info(*names).type == pafs.FileType.File

    def listdir(self, *names: str) -> list[str]:
        base = self.path(*names)
        if self.fs.get_file_info(base).type != pafs.FileType.Directory:
            return []
        found = self.fs.get_file_info(pafs.FileSelector(base, recursive=False))
        return sorted(i.base_name for i in found)

    def makedirs(self, *names: str) -> None:
        """The folder and any missing folder above it; each one made is flushed into its parent
        (a folder that the output is renamed into must itself survive a power cut)."""
        path = self.path(*names)
        if self.fs.type_name == "s3":
            return  # no folders on S3: a key's prefix exists once an object is written under it
        if not self.flushes:
            self.fs.create_dir(path, recursive=True)
            return
        _makedirs_flushed(path)

    def output(self, *names: str) -> Any:
        """A file to write, flushed when it is closed if this store flushes."""
        self.check()
        if self.flushes:
            return _FlushedFile(self.path(*names), "wb")
        return self.fs.open_output_stream(self.path(*names))

    def flush_dir(self, *names: str) -> None:
        """Flush a folder's entries, if this store flushes."""
        if self.flushes:
            fsync_dir(self.path(*names))

    def flush_dirs(self) -> None:
        """Flush this folder's entries and those of every folder in it, deepest first."""
        if self.flushes:
            for top, _, _ in sorted(os.walk(self.root), reverse=True):
                fsync_dir(top)

    def flush_tree(self) -> None:
        """Flush every file in this folder and below, then the folders: what an earlier run
        left, which may not have been flushed (it may have run with ``--no-fsync``)."""
        if self.flushes:
            _flush_files(self.root)
            self.flush_dirs()

    def opened(self, opener: Callable[[str], Any], *names: str) -> Any:
        """``opener`` (a function that opens a file by name) of a file of this folder to read:
        on a local disk, of the file :meth:`open_regular` opened and checked (its descriptor's
        name), so that nothing swapped in its place since is read."""
        if not self.local:
            return opener(self.path(*names))
        return _open_by_fd(opener, open_in(self, *names))

    def input_file(self, *names: str) -> Any:
        """Random access: memory-mapped on local disk, a range-reading file elsewhere."""
        if self.local:
            return self.opened(pa.memory_map, *names)
        return self.fs.open_input_file(self.path(*names))

    def input_stream(self, *names: str) -> Any:
        """A file read from start to end (a regular file of this folder, on a local disk)."""
        return self.opened(self.fs.open_input_stream, *names)

    def size(self, *names: str) -> int:
        return self.info(*names).size

    def write_text(self, name: str, text: str, flush: bool = True) -> None:
        self.write_bytes(name, text.encode(), flush)

    def write_bytes(self, name: str, data: bytes, flush: bool = True) -> None:
        """Whole or not at all: a reader never sees half a file (on local disk a rename; object
        stores make a written object appear whole anyway). ``flush=False``: not flushed even
        when this store flushes (a file that, lost or damaged by a power cut, only costs work
        done again)."""
        self.check()
        if self.local:
            _write_whole(self.path(name), data, self.fsync and flush)
            return
        with self.fs.open_output_stream(self.path(name)) as f:
            f.write(data)

    def sha256(self, *names: str) -> str:
        """``sha256:`` and the hex digest of a file."""
        digest = hashlib.sha256()
        with self.input_stream(*names) as f:
            while block := f.read(8 << 20):
                digest.update(block)
        return "sha256:" + digest.hexdigest()

    def read_bytes(self, *names: str) -> bytes:
        with self.input_stream(*names) as f:
            return f.read()

    def read_text(self, *names: str) -> str:
        return self.read_bytes(*names).decode()

    def delete(self, *names: str) -> None:
        self.check()
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(self.path(*names))

    def delete_tree(self, *names: str) -> None:
        self.check()
        if self.exists(*names):
            self.fs.delete_dir(self.path(*names))
