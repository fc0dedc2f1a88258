"""A recorder of what a power cut would leave, loaded into every process of a write (this folder
on PYTHONPATH and RECORDMILL_POWERCUT_LOG set; see tests/engine/test_commit.py).

No real power is cut. Each process wraps ``os.fsync`` and ``os.fdatasync``: after a flush of a
file under RECORDMILL_POWERCUT_ROOT it saves the file's bytes then (what the device holds), after
a flush of a folder its entries (name -> inode). The main process also records a crash point
before and after each rename, unlink, rmdir and flush it makes: the tree under the root as it is
at that moment. All go to one log, in the order they happened (O_APPEND). From the log the test
builds, for each crash point, the filesystem a power cut there could leave, and reads the
dataset in it.
"""

from __future__ import annotations

import itertools
import json
import os
import stat

LOG = os.environ.get("RECORDMILL_POWERCUT_LOG")
ROOT = os.environ.get("RECORDMILL_POWERCUT_ROOT", "")
MAIN = "RECORDMILL_POWERCUT_MAIN"
_count = itertools.count()
_real = {name: getattr(os, name) for name in ("fsync", "fdatasync", "rename", "replace")}
_real |= {"unlink": os.unlink, "rmdir": os.rmdir}


def _append(event: dict) -> None:
    line = (json.dumps(event) + "\n").encode()
    fd = os.open(os.path.join(LOG, "log.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)  # one write to an O_APPEND file: lines of processes never mix
    finally:
        os.close(fd)


def _inside(path: str) -> bool:
    return path == ROOT or path.startswith(ROOT + "/")


def tree(root: str) -> dict[str, list]:
    """Every entry below ``root``: relative path -> [inode, "d" or "f"]."""
    found = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:  # deleted by another process meanwhile
                continue
            kind = "d" if stat.S_ISDIR(st.st_mode) else "f"
            found[os.path.relpath(path, root)] = [st.st_ino, kind]
    return found


def _flushed(fd: int) -> None:
    path = os.readlink(f"/proc/self/fd/{fd}")
    if not _inside(path):
        return
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        entries = {}
        for entry in os.scandir(path):
            kind = "d" if entry.is_dir(follow_symlinks=False) else "f"
            entries[entry.name] = [entry.inode(), kind]
        _append({"op": "dir", "ino": st.st_ino, "path": path, "entries": entries})
        return
    with open(f"/proc/self/fd/{fd}", "rb") as f:
        data = f.read()
    blob = os.path.join(LOG, f"blob-{os.getpid()}-{next(_count)}")
    with open(blob, "wb") as f:
        f.write(data)
    _append({"op": "file", "ino": st.st_ino, "path": path, "blob": blob})


def _point(what: str) -> None:
    if os.path.isdir(ROOT):
        _append({"op": "point", "what": what, "tree": tree(ROOT)})


def _flush_wrapper(name: str):
    def flush(fd: int) -> None:
        main = os.environ.get(MAIN) == str(os.getpid())
        if main:
            _point(f"before {name}")
        _real[name](fd)
        _flushed(fd)
        if main:
            _point(f"after {name}")

    return flush


def _change_wrapper(name: str):
    def change(*args, **kwargs):
        _point(f"before {name} {args}")
        try:
            return _real[name](*args, **kwargs)
        finally:
            _point(f"after {name} {args}")

    return change


if LOG:
    os.environ.setdefault(MAIN, str(os.getpid()))  # the first process; workers inherit it
    os.fsync = _flush_wrapper("fsync")
    os.fdatasync = _flush_wrapper("fdatasync")
    if os.environ[MAIN] == str(os.getpid()):
        for _name in ("rename", "replace", "unlink", "rmdir"):
            setattr(os, _name, _change_wrapper(_name))
