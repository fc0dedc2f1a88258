"""The output folder's life: lock, refuse what must not be replaced, stage, then appear whole
(or, on failure, leave nothing), release; one context manager, :class:`OutputDir`.

Everything is written into a hidden sibling folder (``.NAME.recordmill-partial``). The commit
(:meth:`OutputDir.commit`) is a fixed sequence of steps, each a safe place for the run to die:

1. ``staged``: the manifest is written into the staging folder; from here on the staging folder
   is a complete dataset and a later ``--resume`` only publishes it (no task runs again).
2. ``cleaned``: the staging folder's bookkeeping (``run.json``, ``_tasks/``, ``_parts/``) is gone.
3. Local disk: ``marked``: an older dataset at NAME gets a hidden ``.recordmill-replaced``
   file; ``exchanged``: the staging folder and NAME trade places in one atomic rename
   (``renameat2(RENAME_EXCHANGE)``, Linux), so NAME is never missing; the marked older dataset,
   now in the staging folder's place, is then deleted. Where that rename does not exist:
   ``moved-aside``: the older dataset is renamed to ``.NAME.recordmill-old``, ``published``: the
   staging folder to NAME, then the old one is deleted; a run that finds the old folder without
   NAME puts it back first, so an older dataset is never lost.
3. Object storage (no rename there): ``unpublished``: the older dataset's manifest is deleted
   (its folder is no longer a dataset); ``cleared``: its other files are deleted; ``moved``:
   after the first file was moved in; ``published``: the manifest is written last; then the
   staging folder is deleted.

So a folder without a manifest is never a dataset, a failed or killed run never leaves an output
that looks complete, and an interrupted run's staging folder is kept for ``--resume``. A lock
beside it (``.NAME.recordmill-lock`` on a local disk, deleted when the run ends; a lease object on S3; see lease.py) makes a
second run on the same output fail at once instead of mixing its files with the first run's.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import shutil
import signal
from typing import Any

from recordmill.dataset import layout
from recordmill.dataset import manifest as manifest_file
from recordmill.dataset.storage import Store
from recordmill.engine.lease import Lease
from recordmill.engine.settings import WriteSettings
from recordmill.errors import OutputError, writing

# The fault tests name a step here; the run kills itself (SIGKILL) when it reaches it.
KILL_AT = "RECORDMILL_KILL_AT"


def step(name: str) -> None:
    """A named step of a run: where the fault tests stop it, one step at a time."""
    if os.environ.get(KILL_AT) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def run_record(manifest: dict[str, Any]) -> dict[str, Any]:
    """What a run was (plugin, options, task count, settings), as its manifest records it: what
    a ``--resume`` must match."""
    settings = dict(manifest.get("settings") or {})
    settings.pop("row_group_size", None)
    return {
        "plugin": manifest["plugin"]["name"],
        "options": manifest["plugin"].get("options") or {},
        "task_number": manifest_file.task_totals(manifest)[0],
        "settings": settings,
    }


class OutputDir:
    """``with OutputDir(settings, path) as out:`` locks the output and gives ``out.staging`` (an
    empty staging folder, or with ``--resume`` the one an interrupted run left); ``out.commit``
    publishes it. Once :meth:`start_writing` was called, a failure inside the block removes the
    staging folder (an interruption keeps it, for ``--resume``); the lock is released in any case.

    With ``--resume``, ``out.finished`` is the manifest of a run that has nothing left to write:
    its staging folder is complete (``out.staged``: only publishing is left) or its output is.
    """

    def __init__(self, settings: WriteSettings, path: str | os.PathLike[str]):
        self.final = Store.at(path)
        self.overwrite = settings.overwrite
        self.resume = settings.resume
        self._writing = False
        self.staging = self.final.sibling(layout.staging_folder(self.final.name))
        self._old = self.final.sibling(layout.old_folder(self.final.name))
        self._lock_path = self.final.sibling(layout.lock_file(self.final.name)).root
        self._lock: Any = None
        self._lease: Lease | None = None
        self.resumed = False
        self.finished: dict[str, Any] | None = None
        self.staged = False

    # --- the destination ------------------------------------------------------------------

    def _state(self) -> str:
        """What is at the output now: missing, empty, dataset, leftover (a dataset's files
        without a manifest: an object-store commit that was cut short), other or file."""
        info = self.final.info()
        if info.type.name == "NotFound":
            return "missing"
        if info.type.name != "Directory":
            return "file"
        names = self.final.listdir()
        if not names:
            return "empty"
        if manifest_file.find(self.final) is not None or layout.OLD_MANIFEST in names:
            return "dataset"
        ours = layout.PARTITION.match
        if all(ours(n) or n.split(".")[0] == layout.REJECTS_STEM for n in names):
            return "leftover"
        return "other"

    def _check_final(self) -> None:
        """Refuse an output that must not be replaced (a dataset there needs --overwrite)."""
        state = self._state()
        if state == "file":
            raise OutputError(f"output {self.final} exists and is not a folder")
        if state == "other" or (state == "leftover" and not self.staging.exists()):
            raise OutputError(
                f"output {self.final} is a folder that holds other files (it is not a recordmill "
                f"dataset: no {layout.manifest_file('parquet')}); recordmill never replaces it, "
                "even with --overwrite: choose another output, or empty or remove it yourself"
            )
        if state == "dataset" and not self.overwrite:
            if self.resume:
                raise OutputError(
                    f"output {self.final} already holds a dataset; the interrupted run replaces "
                    "it: pass --overwrite as well as --resume"
                )
            raise OutputError(f"output {self.final} already exists; pass --overwrite to replace it")

    def _put_back_old(self) -> None:
        """Local disks: a run killed after its exchange left the older dataset in the staging
        folder's place (delete it); one killed between its two renames left it aside (put it
        back, or, when the new one is already in place, delete it)."""
        if not self.final.local:
            return
        if self.staging.is_file(layout.REPLACED_MARK):
            shutil.rmtree(self.staging.root)
        elif self.final.is_file(layout.REPLACED_MARK):
            self.final.delete(layout.REPLACED_MARK)  # killed before the exchange: still current
        if not os.path.isdir(self._old.root):
            return
        if self._state() in ("missing", "empty"):
            if os.path.isdir(self.final.root):
                os.rmdir(self.final.root)
            os.replace(self._old.root, self.final.root)
        else:
            shutil.rmtree(self._old.root, ignore_errors=True)

    # --- the context manager ----------------------------------------------------------------

    def __enter__(self) -> OutputDir:
        with writing(self.final):
            self.lock()
            try:
                self.prepare()
            except BaseException:
                self.release()
                raise
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: Any) -> None:
        try:
            if kind is not None and self._writing and not issubclass(kind, KeyboardInterrupt):
                self.abort()
        finally:
            self.release()

    def start_writing(self) -> None:
        """From now on a failure removes the staging folder: the run was checked and started."""
        self._writing = True

    def lock(self) -> None:
        """Hold the output's lock for this process's life: a second run on it is refused."""
        if not self.final.local:
            self._lease = Lease.take(self.final)
            return
        os.makedirs(os.path.dirname(self._lock_path), exist_ok=True)
        while self._lock is None:
            lock = open(self._lock_path, "a")  # noqa: SIM115 - held until release()
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.close()
                raise OutputError(
                    f"another recordmill run is writing {self.final} (it holds "
                    f"{self._lock_path}); wait for it to finish"
                ) from None
            # The run before may have deleted the file after we opened it: lock the one there.
            if _same_file(lock, self._lock_path):
                self._lock = lock
            else:
                lock.close()

    def release(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._lock_path)  # while still locked: no run can be holding it
            self._lock.close()
            self._lock = None
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    def prepare(self) -> Store:
        """Check the destination and give the staging folder: an empty one, or with ``resume``
        the one an interrupted run left."""
        self._put_back_old()
        staged = self._staged_manifest()
        if self.staging.exists():
            if self.resume:
                self._check_final()
                self.resumed = True
                if staged is not None:
                    self.finished, self.staged = staged, True
                elif not self.staging.is_file(layout.RUN_FILE):
                    self._restart()  # killed before it recorded itself: nothing was finished
                return self.staging
            if not self.overwrite:
                what = "a complete dataset that was not published yet" if staged else "its work"
                raise OutputError(
                    f"an interrupted run left {self.staging} ({what}); pass --resume to finish "
                    "it (only its unfinished tasks run again) or --overwrite to start over"
                )
            self._check_final()
            if self._state() == "leftover":  # a commit cut short: its half-published files too
                self.final.delete_tree()
            self.staging.delete_tree()
        elif self.resume and self._state() == "dataset":
            self.finished = manifest_file.load(self.final)
            return self.staging
        self._check_final()
        self._restart()
        return self.staging

    def _restart(self) -> None:
        self.staging.delete_tree()
        self.staging.makedirs()

    def _staged_manifest(self) -> dict[str, Any] | None:
        """The manifest in the staging folder: the run was complete when it was stopped."""
        if not self.staging.exists() or manifest_file.find(self.staging) is None:
            return None
        return manifest_file.load(self.staging)

    def check_finished(self, record: dict[str, Any]) -> None:
        """Refuse to take a finished run's output as this run's unless they are the same run
        (``record``: this run's, in its JSON form, as run.json holds it)."""
        assert self.finished is not None
        changed = describe_changes(run_record(self.finished), record)
        if changed:
            where = self.staging if self.staged else self.final
            raise OutputError(
                f"cannot --resume: {where} holds the complete output of another run ({changed}); "
                "run it as before, or pass --overwrite (without --resume) to write it again"
            )

    # --- the commit ---------------------------------------------------------------------------

    def commit(self, manifest_name: str, manifest: bytes) -> None:
        """Make the staged folder the output, the manifest last, replacing an older dataset
        when allowed. Each step is a safe place to die (see the module's docstring)."""
        self.staging.write_bytes(manifest_name, manifest)
        step("staged")
        self.publish()

    def publish(self) -> None:
        """Publish a staging folder that holds its manifest (the steps after ``staged``)."""
        name = manifest_file.find(self.staging)
        assert name is not None
        manifest = self.staging.read_bytes(name)
        if self.final.is_file(name) and self.final.read_bytes(name) == manifest:
            self.staging.delete_tree()  # object storage: killed right after it published
            return
        self._check_final()
        self.staging.delete(layout.RUN_FILE)
        for scratch in layout.SCRATCH_DIRS:
            self.staging.delete_tree(scratch)
        step("cleaned")
        if self._lease is not None:
            self._lease.check()
        if self.final.local:
            final, old = self.final.root, self._old.root
            if os.path.isdir(final) and os.listdir(final):
                self.final.write_bytes(layout.REPLACED_MARK, b"")
                step("marked")
                if _exchange(self.staging.root, final):
                    step("exchanged")
                    shutil.rmtree(self.staging.root)
                    return
                os.replace(final, old)
                step("moved-aside")
            os.replace(self.staging.root, final)  # rename(2) replaces an empty folder atomically
            step("published")
            shutil.rmtree(old, ignore_errors=True)
            return
        if self.final.exists():
            for old_name in (n for n in self.final.listdir() if n.startswith("_manifest")):
                self.final.delete(old_name)
            step("unpublished")
            staged = manifest_file.parse(manifest, name)
            keep = {p["file"] for p in staged["partitions"]} | {staged["rejects"].get("file")}
            for stale in self.final.listdir():
                if stale not in keep:
                    self.final.delete(stale)
            step("cleared")
        self.final.makedirs()
        for n in sorted(self.staging.listdir()):
            if n != name:
                self.final.fs.move(self.staging.path(n), self.final.path(n))
                step("moved")
        self.final.write_bytes(name, manifest)
        step("published")
        self.staging.delete_tree()

    def abort(self) -> None:
        self.staging.delete_tree()


def _same_file(handle: Any, path: str) -> bool:
    try:
        return os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def _exchange(a: str, b: str) -> bool:
    """Swap two folders in one atomic rename (Linux ``renameat2(RENAME_EXCHANGE)``); False where
    the system or the filesystem has no such rename."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _flag(key: str) -> str:
    if key == "mindrecord_arguments":  # an unmodified MindRecord script's own command line
        return "the script's flags"
    return "--" + key.replace("_", "-")


def describe_changes(before: dict[str, Any], now: dict[str, Any]) -> str:
    """What differs between two run records, named as the flags that set it: ``--partitions: 5
    then, 3 now``."""
    changed = []
    for key in sorted(set(before) | set(now)):
        old, new = before.get(key), now.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            changed += [
                f"{_flag(k)}: {old.get(k)!r} then, {new.get(k)!r} now"
                for k in sorted(set(old) | set(new))
                if old.get(k) != new.get(k)
            ]
        elif old != new:
            changed.append(f"{key.replace('_', ' ')}: {old!r} then, {new!r} now")
    return "; ".join(changed)
