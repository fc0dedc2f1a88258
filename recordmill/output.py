"""The output folder's life: lock, refuse what must not be replaced, stage, then appear whole
(or, on failure, leave nothing), release; one context manager, :class:`OutputDir`.

Everything is written into a hidden sibling folder (``.NAME.recordmill-partial``). On a local disk
it is renamed to ``NAME`` only when the run succeeded; on object storage, where there is no rename,
its files are moved into ``NAME`` and the manifest is written last, so a folder without a
manifest is never a dataset. A failed or killed run thus never leaves an output that looks
complete. An interrupted run's staging folder is kept for ``--resume``. A lock file beside it
(``.NAME.recordmill-lock``, local disks only) makes a second run on the same output fail at once
instead of mixing its files with the first run's.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from typing import Any

from recordmill import layout
from recordmill import manifest as manifest_file
from recordmill.errors import OutputError
from recordmill.settings import WriteSettings
from recordmill.storage import Store


class OutputDir:
    """``with OutputDir(settings, path) as out:`` locks the output and gives ``out.staging`` (an
    empty staging folder, or with ``--resume`` the one an interrupted run left); ``out.commit``
    publishes it. Once :meth:`start_writing` was called, a failure inside the block removes the
    staging folder (an interruption keeps it, for ``--resume``); the lock is released in any case.
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
        self.resumed = False

    def _check_final(self) -> None:
        info = self.final.info()
        if info.type.name == "NotFound":
            return
        if info.type.name != "Directory":
            raise OutputError(f"output {self.final} exists and is not a folder")
        names = self.final.listdir()
        if not names:
            return  # an empty folder, made ahead of the run, is simply replaced
        if not self.overwrite:
            raise OutputError(f"output {self.final} already exists; pass --overwrite to replace it")
        if manifest_file.find(self.final) is None and layout.OLD_MANIFEST not in names:
            raise OutputError(
                f"output {self.final} is not empty and is not a recordmill dataset (no "
                f"{layout.manifest_file('parquet')}); refusing to replace it, even with --overwrite"
            )

    def __enter__(self) -> OutputDir:
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
            return  # object stores have no locks; one run per output is up to the user there
        os.makedirs(os.path.dirname(self._lock_path), exist_ok=True)
        self._lock = open(self._lock_path, "a")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            self._lock = None
            raise OutputError(
                f"another recordmill run is writing {self.final} (it holds {self._lock_path}); "
                "wait for it to finish"
            ) from None

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def prepare(self) -> Store:
        """Check the destination and give the staging folder: an empty one, or with ``resume``
        the one an interrupted run left."""
        self._check_final()
        if self.staging.exists():
            if self.resume:
                self.resumed = True
                return self.staging
            if not self.overwrite:
                raise OutputError(
                    f"an interrupted run left {self.staging}; pass --resume to finish it "
                    "(only its unfinished tasks run again) or --overwrite to start over"
                )
            self.staging.delete_tree()
        self.staging.makedirs()
        return self.staging

    def commit(self, manifest_name: str, manifest: bytes) -> None:
        """Make the staged folder the output, the manifest last, replacing an older dataset
        when allowed."""
        self._check_final()
        if self.final.local:
            self.staging.write_bytes(manifest_name, manifest)
            final, old = self.final.root, self._old.root
            if os.path.isdir(final) and os.listdir(final):
                shutil.rmtree(old, ignore_errors=True)  # left by a run killed right here
                os.replace(final, old)
            os.replace(self.staging.root, final)  # rename(2) replaces an empty folder atomically
            shutil.rmtree(old, ignore_errors=True)
            return
        if self.final.exists():
            self.final.delete_tree()
        self.final.makedirs()
        for name in self.staging.listdir():
            self.final.fs.move(self.staging.path(name), self.final.path(name))
        self.final.write_bytes(manifest_name, manifest)
        self.staging.delete_tree()

    def abort(self) -> None:
        self.staging.delete_tree()
