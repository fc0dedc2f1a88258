"""Rejected input: what a plugin yields instead of a row for input it skips on purpose.

A plugin never drops input silently: it yields ``Reject(source, reason)`` and recordmill writes one
JSON line per reject to ``rejects.jsonl`` in the output, counts them in the manifest, and says how
many in the summary line. Every input thus ends up either as a row or as a line of rejects.jsonl.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

REJECTS_FILE = "rejects.jsonl"


@dataclass(frozen=True)
class Reject:
    """An input that produced no row: ``source`` says which (a file path...), ``reason`` why.

    Rows that recordmill itself rejects (``--on-bad-row skip``) also carry the row's index in its
    task, the field, and the offending value (its repr, cut to 200 characters)."""

    source: str
    reason: str
    row: int | None = None
    field: str | None = None
    value: str | None = None


def write(folder: Any, rejects: list[dict[str, Any]]) -> None:
    """``rejects.jsonl`` in ``folder`` (a :class:`recordmill.storage.Store`)."""
    folder.write_text(
        REJECTS_FILE, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rejects)
    )


def as_record(task_id: int, reject: Reject) -> dict[str, Any]:
    return {"task_id": task_id, **{k: v for k, v in asdict(reject).items() if v is not None}}
