"""What an earlier run left beside the output, and what a new run does with it: the older dataset
of a commit cut short (put back or dropped), the advice when ``--resume`` meets a dataset, and a
failed run's finished tasks, kept for ``--resume``. :class:`~recordmill.engine.output.OutputDir`
calls these."""

from __future__ import annotations

import json
import os
import shutil
import warnings

from recordmill.dataset import layout
from recordmill.dataset.storage import Store
from recordmill.engine import records
from recordmill.errors import SKIP_HINT, RecordmillError, RecordmillWarning


def put_back_old(final: Store, staging: Store, old: Store) -> bool:
    """Local disks: a run killed after its exchange left the older dataset in the staging
    folder's place (delete it); one killed between its two renames left it aside (put it back,
    or, when the new one is already in place, delete it). True when the output is the new
    dataset of a run killed after it published it."""
    if not final.local:
        return False
    published = staging.is_file(layout.REPLACED_MARK)
    if published:
        shutil.rmtree(staging.root)
    elif final.is_file(layout.REPLACED_MARK):
        final.delete(layout.REPLACED_MARK)  # killed before the exchange: still current
    if not os.path.isdir(old.root):
        return published
    root = final.root
    if not os.path.exists(root) or (os.path.isdir(root) and not os.listdir(root)):
        if os.path.isdir(final.root):
            os.rmdir(final.root)
        os.replace(old.root, final.root)
    else:
        shutil.rmtree(old.root, ignore_errors=True)
    return published


def resume_advice(final: Store, staging: Store) -> str:
    """What to do when ``--resume`` meets the dataset that an interrupted run was to replace or
    append to, and this command says neither: never a flag that replaces a history unasked."""
    if not staging.is_file(layout.RUN_FILE):  # stopped before it recorded itself: nothing done
        return (
            f"output {final} holds a dataset and the interrupted run left nothing to finish in "
            f"{staging}: delete it, then run the command as the interrupted run was run"
        )
    staged = json.loads(staging.read_text(layout.RUN_FILE)).get("settings") or {}
    drop = f"or delete {staging} to drop it"
    if staged.get("append"):
        return (
            f"output {final} holds a dataset and the interrupted run was an --append to it: add "
            f"--append to finish it, {drop}"
        )
    return (
        f"output {final} holds a dataset and the interrupted run was to replace it (it was run "
        f"with --overwrite): add --overwrite to finish it, {drop} and keep the dataset as it is"
    )


def warn(what: str, dropped: Store | None = None) -> None:
    """Say what a ``--resume`` found nothing of, or a failed run's tasks this run drops."""
    if dropped is None:
        text = f"{what} (no interrupted run): writing it from the start"
    else:
        text = f"{what} left finished tasks in {dropped}; this run starts over without them "
        text += "(--resume keeps them)"
    warnings.warn(text, RecordmillWarning, stacklevel=3)


def keep_for_resume(staging: Store, error: RecordmillError) -> bool:
    """A run that failed in a task keeps the tasks it finished for ``--resume``, as an
    interrupted run does, marked as failed, its error saying so. False, nothing kept, when no
    task had finished."""
    finished = sum(len(r.tasks) for r in records.load_records(staging))
    if not finished:
        return False
    staging.write_text(layout.FAILED_MARK, str(error))
    kept = "the finished task is" if finished == 1 else f"the {finished:,} finished tasks are"
    # Bad input: skipping it (the flag the error names already) combines with --resume.
    fix = "fix it or skip it" if str(error).endswith(SKIP_HINT) else "fix it"
    error.args = (f"{error}; {fix}, then run the same command with --resume: {kept} kept",)
    return True
