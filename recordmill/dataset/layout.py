"""The names of everything recordmill writes, in the output folder and beside it.

::

    out/xyz/                            the dataset (see manifest.py and rejects.py)
      _manifest.parquet                 the manifest: no rows, the JSON in its metadata
      _rejects.parquet                  the rejected inputs, when there are any
      part-00000-of-00004.parquet       the partitions
    out/.xyz.recordmill-partial/        the staging folder, renamed to xyz when the run succeeded
      run.json                          what the run is (compared on --resume)
      _tasks/task-000007.arrow          the rows of a finished chunk of tasks, from task 7 (a fragment)
      _tasks/task-000007.json           the record that marks that chunk's tasks done
      _parts/part-...parquet.json       the record that marks a partition done
    out/.xyz.recordmill-lock            held by the run writing xyz (local disks)
    s3://b/out/.xyz.recordmill-lease    held by the run writing xyz (S3; see lease.py)
    out/.xyz.recordmill-old             an older dataset while --overwrite replaces it
      .recordmill-replaced              marks it as the older one (also in xyz/, for a moment)

Formats are named by their file extension: ``parquet`` or ``arrow``.
"""

from __future__ import annotations

import re

FORMATS = ("parquet", "arrow")
MANIFEST_STEM = "_manifest"
REJECTS_STEM = "_rejects"
OLD_MANIFEST = "manifest.json"  # format version 1
RUN_FILE = "run.json"
REPLACED_MARK = ".recordmill-replaced"  # in an older dataset while a commit replaces it
TASKS_DIR = "_tasks"
PARTS_DIR = "_parts"
SCRATCH_DIRS = (TASKS_DIR, PARTS_DIR)
PARTITION = re.compile(r"^part-\d+-of-\d+\.(parquet|arrow)$")
TASK_RECORD = re.compile(r"^task-\d+\.json$")


def manifest_file(fmt: str) -> str:
    return f"{MANIFEST_STEM}.{fmt}"


def rejects_file(fmt: str) -> str:
    return f"{REJECTS_STEM}.{fmt}"


def partition_file(index: int, count: int, fmt: str) -> str:
    width = max(5, len(str(count)))
    return f"part-{index:0{width}d}-of-{count:0{width}d}.{fmt}"


def fragment_file(task_id: int) -> str:
    return f"{TASKS_DIR}/task-{task_id:06d}.arrow"


def task_record_file(task_id: int) -> str:
    return f"{TASKS_DIR}/task-{task_id:06d}.json"


def partition_record_file(partition: str) -> str:
    return f"{PARTS_DIR}/{partition}.json"


def staging_folder(name: str) -> str:
    return f".{name}.recordmill-partial"


def lock_file(name: str) -> str:
    return f".{name}.recordmill-lock"


def lease_file(name: str) -> str:
    return f".{name}.recordmill-lease"


def old_folder(name: str) -> str:
    return f".{name}.recordmill-old"
