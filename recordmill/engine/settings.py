"""A write's settings: one frozen, checked object, built once from flags, a YAML file or Python
arguments, saved for ``--resume``, recorded in the manifest and carried by the jobs.

Each setting is a field of :class:`WriteSettings` whose metadata holds its command-line flag, so a
new setting is added here and nowhere else: the CLI builds its flags from these fields
(:func:`add_flags`), and the engine, the task and partition jobs read the object.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recordmill.dataset.layout import FORMATS
from recordmill.dataset.manifest import MAX_PARTITIONS
from recordmill.errors import ConfigError, UnknownSetting, did_you_mean

COMPRESSIONS = ("auto", "none", "zstd", "snappy", "lz4", "gzip", "brotli")
POLICIES = ("fail", "skip")
# The bad-input policy's names before it had one (the engine's, the image pipeline's, the csv and
# tfrecord plugins'): still accepted, with a note, until the next release.
OLD_POLICY_NAMES = ("on_bad_row", "on_bad_file", "on_bad_record")
OLD_PLUGIN_POLICY_NAMES = ("on_bad_file", "on_bad_record")  # a plugin may still define these
FORMAT_HELP = "the partition files' format (default: parquet; with --append, the dataset's)"
APPEND_HELP = (
    "add the rows after the dataset's, as its next version (a folder that is not a dataset gets "
    "version 1)"
)
DEDUP_HELP = (
    "reject a row whose key (FIELD[,FIELD...]) is already in the dataset (any version) or earlier "
    "in this run, as a duplicate"
)


def _flag(*names: str, identity: bool = False, **argparse_kwargs: Any) -> dict[str, Any]:
    """A field's flag; ``identity``: the setting makes the output what it is (see
    :meth:`WriteSettings.identity`)."""
    return {"flags": names, "argparse": argparse_kwargs, "identity": identity}


WORKERS_HELP = (
    "worker processes (default: the number of cores); 0 runs the tasks in this process, one "
    "after the other, to debug a plugin: breakpoint() and pdb work, and a crash is not retried"
)
COMPRESSION_HELP = (
    "auto: zstd, except bytes and tensor columns (usually JPEG/PNG already) and Arrow files, "
    "which stay uncompressed (default: auto; with --append, the dataset's)"
)
ROW_GROUP_HELP = (
    "rows per Parquet row group / Arrow record batch (default: about 1 MB (Parquet) or 4 MB "
    "(Arrow IPC) of rows of 1 KB and more, up to 64 MB of smaller rows)"
)
FSYNC_HELP = (
    "trade safety for speed: publish the output without flushing its files to the disk first; "
    "a power cut or a system crash soon after the run can lose it (and, with --overwrite, the "
    "dataset it replaced). For scratch outputs"
)
TIMEOUT_HELP = (
    "stop a task (or partition) running longer than this and run it again on a fresh worker, "
    "as when its worker dies (default: no limit; recordmill's own process pool only)"
)
ON_BAD_INPUT_HELP = (
    "bad input (a row that does not fit the schema, an image or a record that a plugin cannot "
    "read) fails the run, or is listed in the rejects (recordmill rejects PATH) and left out"
)
EXECUTOR_HELP = (
    "where tasks run: process, dask, ray or an installed executor; --executor NAME --help shows "
    "its own flags"
)


@dataclass(frozen=True)
class WriteSettings:
    """Everything a write is told besides its plugin, the plugin's options and the output."""

    partitions: int = field(
        default=1,
        metadata=_flag(
            "--partitions",
            "--mindrecord_partitions",
            identity=True,
            type=int,
            help="number of output files",
        ),
    )
    workers: int | None = field(
        default=None,
        metadata=_flag(
            "--workers",
            "--mindrecord_workers",
            type=int,
            help=WORKERS_HELP,
        ),
    )
    # None until known: parquet and auto, or with --append the dataset's (see engine/append.py).
    format: str | None = field(
        default=None, metadata=_flag("--format", identity=True, choices=FORMATS, help=FORMAT_HELP)
    )
    compression: str | None = field(
        default=None,
        metadata=_flag(
            "--compression",
            identity=True,
            choices=COMPRESSIONS,
            help=COMPRESSION_HELP,
        ),
    )
    row_group_size: int | None = field(
        default=None,
        metadata=_flag(
            "--row-group-size",
            identity=True,
            type=int,
            help=ROW_GROUP_HELP,
        ),
    )
    shuffle: bool = field(
        default=False,
        metadata=_flag(
            "--shuffle",
            identity=True,
            action="store_true",
            help="write the rows in a seeded random order",
        ),
    )
    seed: int = field(
        default=0, metadata=_flag("--seed", identity=True, type=int, help="seed for --shuffle")
    )
    overwrite: bool = field(
        default=False,
        metadata=_flag(
            "--overwrite", action="store_true", help="replace an existing output dataset"
        ),
    )
    append: bool = field(
        default=False,
        metadata=_flag("--append", identity=True, action="store_true", help=APPEND_HELP),
    )
    dedup_key: str | None = field(
        default=None,
        metadata=_flag("--dedup-key", identity=True, metavar="FIELD[,...]", help=DEDUP_HELP),
    )
    resume: bool = field(
        default=False,
        metadata=_flag(
            "--resume",
            action="store_true",
            help="finish an interrupted run on this output: only its unfinished tasks run again",
        ),
    )
    fsync: bool = field(
        default=True,
        metadata=_flag(
            "--no-fsync",
            action="store_false",
            help=FSYNC_HELP,
        ),
    )
    retries: int = field(
        default=2,
        metadata=_flag(
            "--retries",
            type=int,
            help="run a task again this many times when its worker process dies",
        ),
    )
    task_timeout: float | None = field(
        default=None,
        metadata=_flag(
            "--task-timeout",
            type=float,
            metavar="SECONDS",
            help=TIMEOUT_HELP,
        ),
    )
    retries_on_error: bool = field(
        default=False,
        metadata=_flag(
            "--retries-on-error",
            action="store_true",
            help="also run a task again when the plugin raised an exception in it",
        ),
    )
    on_bad_input: str = field(
        default="fail",
        metadata=_flag(
            "--on-bad-input",
            identity=True,
            choices=POLICIES,
            help=ON_BAD_INPUT_HELP,
        ),
    )
    max_rejects: int | None = field(
        default=None,
        metadata=_flag(
            "--max-rejects",
            type=int,
            help="fail the run when more inputs than this are rejected (default: no limit)",
        ),
    )
    executor: str = field(
        default="process",
        metadata=_flag(
            "--executor",
            help=EXECUTOR_HELP,
        ),
    )
    # Set by the executor's own flags (see executors.py), not by a flag of its own.
    executor_options: Mapping[str, Any] = field(default_factory=dict)
    progress: bool = True  # the CLI's --quiet turns it off

    def __post_init__(self) -> None:
        if self.executor_options is None:  # as from write(..., executor_options=None)
            object.__setattr__(self, "executor_options", {})
        if not self.append:  # with --append, the dataset's (engine/append.py)
            object.__setattr__(self, "format", self.format or "parquet")
            object.__setattr__(self, "compression", self.compression or "auto")
        _check(self)

    @property
    def worker_count(self) -> int:
        """How many worker processes run jobs at once (0: none, the jobs run in this process)."""
        if self.workers is None:
            return os.cpu_count() or 1
        return self.workers

    def identity(self) -> dict[str, Any]:
        """What makes the output what it is: recorded in the manifest, and what a ``--resume``
        must match (workers, retries, the executor and the like may change between runs)."""
        found = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.metadata.get("identity")
        }
        if not self.shuffle:
            found["seed"] = None  # the seed changes nothing without --shuffle
        for key in ("append", "dedup_key"):  # left out unless given: as runs before them were
            if not found[key]:
                del found[key]
        return found


def _check(s: WriteSettings) -> None:
    """Refuse settings that contradict each other or are out of range (the first one found)."""
    if s.append and s.overwrite:
        raise ConfigError(
            "--append adds a version to a dataset and --overwrite replaces it: give one of them"
        )
    if not 1 <= s.partitions <= MAX_PARTITIONS:
        raise ConfigError(
            f"--partitions must be from 1 to {MAX_PARTITIONS:,} (what a dataset holds at "
            f"most), got {s.partitions:,}"
        )
    _check_workers(s)
    _check_choices(s)


def _check_choices(s: WriteSettings) -> None:
    """The settings that take one of a few values, or a bound: refused in one line each."""
    if s.format is not None and s.format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, got {s.format!r}")
    if s.compression is not None and s.compression not in COMPRESSIONS:
        raise ConfigError(
            f"--compression must be one of {', '.join(COMPRESSIONS)}, got {s.compression!r}"
        )
    if s.on_bad_input not in POLICIES:
        raise ConfigError(f"--on-bad-input must be fail or skip, got {s.on_bad_input!r}")
    if s.retries < 0:
        raise ConfigError(f"--retries must be at least 0, got {s.retries}")
    if s.task_timeout is not None and s.task_timeout <= 0:
        raise ConfigError(f"--task-timeout must be more than 0 seconds, got {s.task_timeout}")
    if s.row_group_size is not None and s.row_group_size < 1:
        raise ConfigError(f"--row-group-size must be at least 1, got {s.row_group_size}")
    if s.max_rejects is not None and s.max_rejects < 0:
        raise ConfigError(f"--max-rejects must be at least 0, got {s.max_rejects}")


def _check_workers(settings: WriteSettings) -> None:
    if settings.workers is not None and settings.workers < 0:
        raise ConfigError(f"--workers must be 0 (in this process) or more, got {settings.workers}")
    if settings.workers == 0 and settings.executor != "process":
        raise ConfigError(
            f"--workers 0 runs the tasks in this process; --executor {settings.executor} runs "
            "them in its own workers: give --workers 1 or more, or leave out --executor"
        )
    if settings.workers == 0 and settings.task_timeout is not None:
        raise ConfigError(
            "--task-timeout has no effect with --workers 0: a task in this process cannot "
            "be stopped and run again"
        )


# What a Python caller may have meant by a keyword that is not a setting.
_MEANT = {
    "quiet": "progress=False",
    "verbose": "progress=True",
    "num_workers": "workers",
    "num_partitions": "partitions",
    "mindrecord_workers": "workers",
    "mindrecord_partitions": "partitions",
    "output_format": "format",
    "script": "the plugin, write()'s first argument",
    "mindrecord_script": "the plugin, write()'s first argument",
    "mindrecord_file": "the output, write()'s second argument",
}


def keywords() -> list[str]:
    """The setting keywords of :func:`recordmill.write`."""
    return [f.name for f in dataclasses.fields(WriteSettings)]


def check_keywords(values: Mapping[str, Any], plugin_options: Sequence[str] = ()) -> None:
    """Raise :class:`UnknownSetting` for the first key of ``values`` that is no setting, with
    what was probably meant: another setting, or an option of the plugin."""
    known = keywords()
    for key in values:
        if key in known:
            continue
        if key in plugin_options:
            hint = f": it is an option of the plugin, given as options={{{key!r}: ...}}"
        elif key in _MEANT:
            hint = f" (did you mean {_MEANT[key]}?)"
        else:
            hint = did_you_mean(key, known)
        raise UnknownSetting(f"unknown setting {key!r}{hint}; the settings: {', '.join(known)}")


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of every setting that has one, with its default in the help."""
    for f in dataclasses.fields(WriteSettings):
        if "flags" not in f.metadata:
            continue
        kwargs = dict(f.metadata["argparse"])
        default = f.default
        # A --no-X flag's default (True: X is done) would read as the flag's own.
        if default is not None and default is not False and kwargs.get("action") != "store_false":
            shown = f"(default: {default})"
            kwargs["help"] = f"{kwargs['help']} {shown}" if "help" in kwargs else shown
        parser.add_argument(*f.metadata["flags"], dest=f.name, default=default, **kwargs)


def from_args(args: argparse.Namespace, **more: Any) -> WriteSettings:
    """The settings parsed by :func:`add_flags`, and ``more`` (the executor's options...)."""
    values = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(WriteSettings)
        if "flags" in f.metadata
    }
    return WriteSettings(**values, **more)


def old_policy_flags(
    argv: list[str], names: tuple[str, ...] = OLD_POLICY_NAMES
) -> tuple[list[str], list[str]]:
    """``argv`` with the bad-input policy's old flags (``names`` of them) renamed
    ``--on-bad-input``, and a note for each one found."""
    out, notes = [], []
    for token in argv:
        flag, eq, value = token.partition("=")
        name = flag.lstrip("-").replace("-", "_")
        if flag.startswith("--") and name in names:
            notes.append(_note(flag))
            token = "--on-bad-input" + eq + value
        out.append(token)
    return out, notes


def old_policy_keys(
    values: Mapping[str, Any], names: tuple[str, ...] = OLD_POLICY_NAMES
) -> tuple[dict[str, Any], list[str]]:
    """The same for the keys of a ``--config`` file or of Python keyword arguments."""
    out, notes = {}, []
    for key, value in values.items():
        if str(key).replace("-", "_") in names:
            notes.append(_note(str(key)))
            key = "on_bad_input"
        out[key] = value
    return out, notes


def _note(old: str) -> str:
    return (
        f"recordmill: note: {old} is now --on-bad-input (one policy for rows, images and "
        "records); the old name works until the next release"
    )
