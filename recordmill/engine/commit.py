"""Phase 4 of a write, the commit: the staging folder becomes the output, the manifest last.

The commit is a fixed sequence of named steps, each a safe place for the run to die (the fault
tests stop a run at each one, see :func:`step`):

1. ``staged``: the manifest is written into the staging folder; from here on the staging folder
   is a complete dataset and a later ``--resume`` only publishes it (no task runs again).
2. ``cleaned``: the staging folder's bookkeeping (``run.json``, ``_tasks/``, ``_parts/``) is gone.
3. Local disk (:func:`publish_local`): ``marked``: an older dataset at NAME gets a hidden
   ``.recordmill-replaced`` file; ``exchanged``: the staging folder and NAME trade places in one
   atomic rename (``renameat2(RENAME_EXCHANGE)``, Linux), so NAME is never missing; the marked
   older dataset, now in the staging folder's place, is then deleted. Where that rename does not
   exist: ``moved-aside``: the older dataset is renamed to ``.NAME.recordmill-old``,
   ``published``: the staging folder to NAME, then the old one is deleted; a run that finds the
   old folder without NAME puts it back first (``OutputDir``), so an older dataset is never lost.
3. Object storage (:func:`publish_object_store`; no rename there): ``unpublished``: the older
   dataset's manifest is deleted (its folder is no longer a dataset); ``cleared``: its other
   files are deleted; ``moved``: after the first file was copied in (a copy made by the
   store itself; the staged copies go with the staging folder, many to a request, where moving
   each would cost a delete and pyarrow's folder marker beside the copy); ``published``: the
   manifest is written last; then the staging folder is deleted.

So a folder without a manifest is never a dataset, and a failed or killed run never leaves an
output that looks complete.

On a local disk each step is also on the device before the next one starts, so that a power cut
or a system crash leaves one of these states too (unless the run was told ``--no-fsync``): the
workers flush each partition file as they close it, then the staging folder is flushed before
the manifest is written (itself flushed before its rename) and again once it holds only the
dataset; the older dataset's mark is flushed before the exchange, and the parent folder after
the publishing rename, before the older dataset is deleted. Object stores need no flush: a
completed PUT is durable.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal

from recordmill.dataset import layout
from recordmill.dataset import manifest as manifest_file
from recordmill.dataset.storage import Store
from recordmill.timeline import mark

# The fault tests name a step here; the run kills itself (SIGKILL) when it reaches it.
KILL_AT = "RECORDMILL_KILL_AT"


def step(name: str) -> None:
    """A named step of a run: where the fault tests stop it, one step at a time (and a moment
    of its timeline)."""
    mark(name)
    if os.environ.get(KILL_AT) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def stage(staging: Store, name: str, manifest: bytes) -> None:
    """Step ``staged``: the manifest ``name`` written into the staging folder, the files it
    lists on the disk before it (each partition flushed by the worker that wrote it)."""
    staging.flush_dir()  # the names of the partitions and the rejects: before the manifest's
    staging.write_bytes(name, manifest)  # flushed before its rename
    staging.flush_dir()  # a --resume after a power cut finds it, and only publishes
    step("staged")


def clean(staging: Store) -> None:
    """Step ``cleaned``: the staging folder holds the dataset's files and nothing else."""
    staging.delete(layout.RUN_FILE)
    for scratch in layout.SCRATCH_DIRS:
        staging.delete_tree(scratch)
    staging.flush_dirs()  # what a rename publishes next is this folder as it is on the disk
    step("cleaned")


def publish_local(staging: Store, final: Store, old: Store) -> None:
    """The staging folder becomes ``final`` by renames, an older dataset there replaced; the
    parent folder flushed after the rename, and only then the older dataset deleted."""
    if os.path.isdir(final.root) and os.listdir(final.root):
        final.write_bytes(layout.REPLACED_MARK, b"")
        final.flush_dir()  # wherever the exchange puts the older dataset, its mark is there
        step("marked")
        if _exchange(staging.root, final.root):
            final.parent.flush_dir()
            step("exchanged")
            shutil.rmtree(staging.root)
            return
        os.replace(final.root, old.root)
        step("moved-aside")
    os.replace(staging.root, final.root)  # rename(2) replaces an empty folder atomically
    final.parent.flush_dir()
    step("published")
    shutil.rmtree(old.root, ignore_errors=True)


def publish_object_store(staging: Store, final: Store, name: str, manifest: bytes) -> None:
    """The staging folder's files copied to ``final`` (an older dataset there deleted first,
    its manifest first of all), the manifest ``name`` written last. A resume of a commit cut
    short copies them all again: the same bytes."""
    if final.exists():
        for old_name in (n for n in final.listdir() if n.startswith(layout.MANIFEST_STEM)):
            final.delete(old_name)
        step("unpublished")
        staged = manifest_file.parse(manifest, name)
        keep = {p["file"] for p in staged["partitions"]} | {staged["rejects"].get("file")}
        for stale in final.listdir():
            if stale not in keep:
                final.delete(stale)
        step("cleared")
    final.makedirs()
    for n in sorted(staging.listdir()):
        if n != name:
            final.check()  # the lease, on S3
            final.fs.copy_file(staging.path(n), final.path(n))
            step("moved")
    final.write_bytes(name, manifest)
    step("published")
    staging.delete_tree()


def _exchange(a: str, b: str) -> bool:
    """Swap two folders in one atomic rename (Linux ``renameat2(RENAME_EXCHANGE)``); False where
    the system or the filesystem has no such rename."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def drop_published(staging: Store, final: Store) -> bool:
    """Object storage: a run killed after it wrote the output's manifest (``published``), before
    it deleted its staging folder, left that folder's copy of the manifest. The output is
    complete, so what is left goes, and the output is then taken as any complete one. True when
    it found such a run."""
    name = manifest_file.find(staging) if staging.exists() else None
    if name is None or not final.is_file(name):
        return False
    if final.read_bytes(name) == staging.read_bytes(name):
        staging.delete_tree()
        return True
    return False
