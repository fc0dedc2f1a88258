"""Rejected input: what a plugin yields instead of a row for input it skips on purpose.

A plugin never drops input silently: it yields ``Reject(source, reason)``, which fails the run
under ``--on-bad-input fail`` (the default) and under ``skip`` is listed: recordmill lists
every reject in the output, counts them in the manifest, and says how many in the summary line.
Every input thus ends up either as a row or as a reject. The list is ``_rejects.parquet`` (or
``.arrow``) in the dataset folder: like the manifest, a file of the dataset's schema with no rows,
which other tools read as an empty part, holding the rejects as JSON lines in its metadata
(``recordmill.rejects``). ``recordmill rejects PATH`` prints them; :func:`read` returns them.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from recordmill.dataset import layout, versions
from recordmill.dataset import manifest as manifest_file
from recordmill.dataset.storage import Store
from recordmill.errors import SKIP_HINT, InputError, OutputError, RecordmillError, counted

REJECTS_KEY = b"recordmill.rejects"
_ADDRESS = re.compile(r"<([^<>]*?) at 0x[0-9a-fA-F]+>")


@dataclass(frozen=True)
class Reject:
    """An input that produced no row: ``source`` says which (a file path...), ``reason`` why.

    Rows that recordmill itself rejects (``--on-bad-input skip``) also carry the row's index in its
    task, the field, and the offending value (its repr, cut to 200 characters)."""

    source: str
    reason: str
    row: int | None = None
    field: str | None = None
    value: str | None = None

    def __post_init__(self) -> None:
        # "<_io.BytesIO object at 0x7f...>" differs from run to run: rejects must not.
        object.__setattr__(self, "reason", _ADDRESS.sub(r"<\1>", self.reason))


def bad_input(options: Any, source: str, reason: str, *, skipped: str = "") -> Reject:
    """A :class:`Reject` of bad input with ``--on-bad-input skip``; otherwise raises
    :class:`InputError`. ``skipped`` (what reading passed over to go on) ends the Reject's reason
    only: a run that fails passes nothing over."""
    if options.get("on_bad_input", "fail") == "skip":
        return Reject(source, reason + skipped)
    # Not the format's own error: a dict_data handler of those must not take it for another one.
    raise InputError(f"{reason} {SKIP_HINT}")


def write(
    folder: Store, rejects: list[dict[str, Any]], schema: pa.Schema, fmt: str, version: int = 1
) -> str:
    """Write the rejects file of a dataset version into ``folder``; returns its name. (Each
    version that rejected inputs has its own: an append never rewrites a file a reader of an
    earlier version may read.)"""
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rejects)
    name = layout.rejects_file(fmt, version)
    folder.write_bytes(name, manifest_file.empty_file(schema, fmt, {REJECTS_KEY: lines.encode()}))
    return name


def read(
    dataset: str | os.PathLike[str] | Store, manifest: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The rejects of a written dataset (a path, a URI or a Store), version by version, each in
    task order; give its ``manifest`` when it was read already."""
    store = dataset if isinstance(dataset, Store) else Store.at(dataset)
    manifest = manifest or manifest_file.load(store)
    return [r for name in versions.rejects_files(manifest) for r in _read(store, name, manifest)]


def _read(store: Store, name: str, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        with store.input_stream(name) as f:
            data = f.read()
        text = manifest_file.file_metadata(data, manifest["format"])[REJECTS_KEY].decode()
    except (OSError, pa.ArrowInvalid, KeyError) as e:
        raise OutputError(f"{store}/{name} cannot be read: {e}") from e
    return [json.loads(line) for line in text.splitlines()]


def as_record(task_id: int, reject: Reject) -> dict[str, Any]:
    return {"task_id": task_id, **{k: v for k, v in asdict(reject).items() if v is not None}}


def too_many(count: int, limit: int, last: Reject) -> RecordmillError:
    """The error that stops a run rejecting more than ``--max-rejects``."""
    return RecordmillError(
        f"{counted(count, 'input')} rejected, more than --max-rejects {limit}; "
        f"the last: {last.source}: {last.reason}"
    )
