"""The names of everything recordmill writes, in the output folder and beside it.

::

    out/xyz/                            the dataset (see manifest.py and rejects.py)
      _manifest.parquet                 the manifest: no rows, the JSON in its metadata
      _rejects.parquet                  the rejected inputs, when there are any
      part-00000-of-00004.parquet       the partitions (of version 1)
      part-v0002-00000-of-00002.parquet the partitions an append added (version 2: see versions.py)
      _rejects-v0002.parquet            that append's rejects, when there are any
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
# Beside the task records of a run that failed in a task (not one interrupted): its error.
FAILED_MARK = f"{TASKS_DIR}/failed.txt"
# Version 1's partitions are named as before versions existed; an append's carry their version
# first, 'v' sorting after every digit: every tool that orders files by name (pyarrow, Polars,
# DuckDB, Hugging Face datasets) reads the versions in order, and names never clash.
PARTITION = re.compile(r"^part-(?:v(\d+)-)?\d+-of-\d+\.(parquet|arrow)$")
REJECTS = re.compile(r"^_rejects(?:-v\d+)?\.(parquet|arrow)$")
# Up to this version the names sort in order (four digits, as in part-v0002-...).
MAX_VERSION = 9999
TASK_RECORD = re.compile(r"^task-\d+\.json$")


def manifest_file(fmt: str) -> str:
    return f"{MANIFEST_STEM}.{fmt}"


def rejects_file(fmt: str, version: int = 1) -> str:
    tag = "" if version == 1 else f"-v{version:04d}"
    return f"{REJECTS_STEM}{tag}.{fmt}"


def partition_file(index: int, count: int, fmt: str, version: int = 1) -> str:
    width = max(5, len(str(count)))
    tag = "" if version == 1 else f"v{version:04d}-"
    return f"part-{tag}{index:0{width}d}-of-{count:0{width}d}.{fmt}"


def partition_version(name: str) -> int | None:
    """The version a partition file's name says (1 for the unversioned names); None for a name
    that is not a partition's."""
    match = PARTITION.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)) if match.group(1) else 1


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
