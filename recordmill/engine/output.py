"""The output folder's life, one context manager (:class:`OutputDir`): lock it, refuse what must
not be replaced, give a staging folder (a new one, or with ``--resume`` the one an interrupted run
left), commit it (see commit.py for the steps), or on failure leave nothing; release.

Everything is written into a hidden sibling folder (``.NAME.recordmill-partial``). A lock beside
it (``.NAME.recordmill-lock`` on a local disk, deleted when the run ends; a lease object on S3,
see lease.py) makes a second run on the same output fail at once instead of mixing its files with
the first run's. An interrupted run's staging folder is kept for ``--resume``.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from recordmill.dataset import layout
from recordmill.dataset import manifest as manifest_file
from recordmill.dataset.storage import Store
from recordmill.engine import append, commit, leftovers, records
from recordmill.engine.lock import OutputLock
from recordmill.engine.settings import WriteSettings
from recordmill.errors import LeaseLost, OutputError, RecordmillError, writing

# What a --resume that finds another run's complete output can do instead.
WRITE_AGAIN = "write to another output"
APPEND_AGAIN = "drop --resume to append it"


class OutputDir:
    """``with OutputDir(settings, path) as out:`` locks the output and gives ``out.staging`` (an
    empty staging folder, or with ``--resume`` the one an interrupted run left); ``out.commit``
    publishes it. Once :meth:`start_writing` was called, a failure inside the block removes the
    staging folder (an interruption keeps it, for ``--resume``); the lock is released in any case.

    With ``--resume``, ``out.finished`` is the manifest of a run that has nothing left to write:
    its staging folder is complete (``out.staged``: only publishing is left) or its output is.
    """

    def __init__(self, settings: WriteSettings, path: str | os.PathLike[str]):
        # Local files are flushed before each step that a later one trusts (see commit.py).
        self.final = Store.at(path, fsync=settings.fsync)
        self.overwrite = settings.overwrite
        self.resume = settings.resume
        self.append = settings.append
        self._writing = False
        self.staging = self.final.sibling(layout.staging_folder(self.final.name))
        self._old = self.final.sibling(layout.old_folder(self.final.name))
        self._lock = OutputLock(self.final)
        self.resumed = False
        self.finished: dict[str, Any] | None = None
        self.staged = False
        # A run was killed after it published the output, before it cleaned up: the output's
        # latest version is that run's.
        self.killed_after_publishing = False

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
        """Hold the output's lock for this process's life: a second run on it is refused. On
        S3, every write to the staging folder or the output checks the lease first."""
        self._lock.take()
        self.final, self.staging, self._old = self._lock.guarded(
            self.final, self.staging, self._old
        )

    def release(self) -> None:
        self._lock.release()

    def prepare(self) -> Store:
        """Check the destination and give the staging folder: an empty one, or with ``resume``
        the one an interrupted run left."""
        published = leftovers.put_back_old(self.final, self.staging, self._old)
        self.killed_after_publishing = commit.drop_published(self.staging, self.final) or published
        staged = self._staged_manifest()
        if self.staging.exists():
            if self.resume:
                _check_final(self)
                self.resumed = True
                self.staging.delete(layout.FAILED_MARK)
                if staged is not None:
                    self.finished, self.staged = staged, True
                elif not self.staging.is_file(layout.RUN_FILE):
                    self._restart()  # killed before it recorded itself: nothing was finished
                # Trusted from here on, and maybe never flushed (a run with --no-fsync).
                self.staging.flush_tree()
                return self.staging
            if not self.overwrite and self.staging.is_file(layout.FAILED_MARK):
                leftovers.warn(f"the run that failed at {self.final}", self.staging)
            elif not self.overwrite:
                what = "a complete dataset that was not published yet" if staged else "its work"
                raise OutputError(
                    f"an interrupted run left {self.staging} ({what}); pass --resume to finish "
                    f"it (only its unfinished tasks run again) or delete {self.staging} to start "
                    "over"
                )
            _check_final(self)
            if _state(self.final) == "leftover":  # a commit cut short: its half-published files too
                self.final.delete_tree()
            self.staging.delete_tree()
        elif self.resume and _state(self.final) == "dataset":
            self.finished = manifest_file.load(self.final)
            return self.staging
        elif self.resume:
            leftovers.warn(f"nothing to resume at {self.final}")
        _check_final(self)
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

    def check_finished(self, record: dict[str, Any]) -> bool:
        """Whether the finished run's output is this run's (``record``: this run's, in its JSON
        form, as run.json holds it): True, or refused; False for an ``--append --resume`` whose
        killed run staged nothing, which is then a plain append of its own."""
        assert self.finished is not None
        changed = records.describe_changes(records.run_record(self.finished, record), record)
        if changed and self.append and not (self.staged or self.killed_after_publishing):
            self.finished = None
            self._restart()
            return False
        if changed:
            raise _another_run(self, changed)
        return True

    def keep_for_resume(self, error: RecordmillError) -> RecordmillError:
        """A failed run's finished tasks, kept for ``--resume`` (see ``leftovers``); its error."""
        if leftovers.keep_for_resume(self.staging, error):
            self._writing = False
        return error

    # --- the commit ---------------------------------------------------------------------------

    def commit(self, manifest_name: str, manifest: bytes) -> None:
        """Make the staged folder the output, the manifest last, replacing an older dataset
        when allowed. Each step is a safe place to die (see commit.py)."""
        commit.stage(self.staging, manifest_name, manifest)
        self.publish()

    def publish(self) -> None:
        """Publish a staging folder that holds its manifest (the steps after ``staged``)."""
        name = manifest_file.find(self.staging)
        assert name is not None
        manifest = self.staging.read_bytes(name)
        _check_final(self)
        appending = self.append and append.is_append(manifest, name)
        if appending:
            append.check_base(self.staging, self.final, manifest, name)
        commit.clean(self.staging)
        self._lock.check()
        _publish(self.staging, self.final, self._old, name, manifest, appending)

    def abort(self) -> None:
        # A run that lost its lease deletes nothing: the staging folder is the other run's.
        with contextlib.suppress(LeaseLost):
            self.staging.delete_tree()


# --- the destination: what is at the output, and whether this run may replace it ----------


def _state(final: Store) -> str:
    """What is at the output now: missing, empty, dataset, leftover (a dataset's files
    without a manifest: an object-store commit that was cut short), other or file."""
    info = final.info()
    if info.type.name == "NotFound":
        return "missing"
    if info.type.name != "Directory":
        return "file"
    names = final.listdir()
    if not names:
        return "empty"
    if manifest_file.find(final) is not None or layout.OLD_MANIFEST in names:
        return "dataset"
    if all(layout.PARTITION.fullmatch(n) or layout.REJECTS.fullmatch(n) for n in names):
        return "leftover"
    return "other"


def _check_final(out: OutputDir) -> None:
    """Refuse an output that must not be replaced (a dataset there needs --overwrite)."""
    state = _state(out.final)
    if state == "file":
        raise OutputError(f"output {out.final} exists and is not a folder")
    if state == "other" or (state == "leftover" and not out.staging.exists()):
        raise OutputError(
            f"output {out.final} is a folder that holds other files (it is not a recordmill "
            f"dataset: no {layout.manifest_file('parquet')}); recordmill never replaces it, "
            "even with --overwrite: choose another output, or empty or remove it yourself"
        )
    if state == "dataset" and not (out.overwrite or out.append):
        if out.resume:
            raise OutputError(leftovers.resume_advice(out.final, out.staging))
        raise OutputError(f"output {out.final} already exists; pass --overwrite to replace it")


def _publish(
    staging: Store, final: Store, old: Store, name: str, manifest: bytes, appending: bool
) -> None:
    """The last steps: locally one rename; on object storage the files, then the manifest."""
    if final.local:
        commit.publish_local(staging, final, old)
    elif appending:
        append.publish_object_store(staging, final, name, manifest)
    else:
        commit.publish_object_store(staging, final, name, manifest)


def _another_run(out: OutputDir, changed: str) -> OutputError:
    """The refusal of a ``--resume`` whose finished output is another run's."""
    where = out.staging if out.staged else out.final
    return OutputError(
        f"cannot --resume: {where} holds the complete output of another run ({changed}); "
        f"run it as before, or {APPEND_AGAIN if out.append else WRITE_AGAIN}"
    )
