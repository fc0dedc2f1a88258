"""What a run leaves for ``--resume`` in its staging folder, and how two runs are compared.

``run.json`` records what the run is (plugin, options, task count, the settings that make the
output what it is); each finished chunk of tasks leaves a record of its tasks' row counts, its
fragment's batches, the schema its rows had and its rejects (``_tasks/task-000007.json``, written
after the fragment is complete). A resumed run must be the same run: what differs is said as the
flags that set it (``--partitions: 5 then, 3 now``)."""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from recordmill.dataset import layout, versions
from recordmill.dataset.rejects import Reject
from recordmill.dataset.storage import Store
from recordmill.engine.commit import step
from recordmill.errors import OutputError

if TYPE_CHECKING:
    from recordmill.engine.plan import Run


@dataclass
class ChunkResult:
    """What a chunk of tasks produced: each task's row count (as runs ``[rows, tasks]``), the
    batches of its fragment, and its rejects with their task ids."""

    first: int  # the chunk's first task: it names the fragment and the record
    task_rows: list[list[int]] = field(default_factory=list)
    batch_rows: list[int] = field(default_factory=list)
    nbytes: int = 0
    schema: pa.Schema | None = None
    schema_task: int | None = None  # the task whose rows gave the schema
    rejects: list[tuple[int, Reject]] = field(default_factory=list)

    @property
    def tasks(self) -> range:
        return range(self.first, self.first + sum(count for _, count in self.task_rows))

    @property
    def rows(self) -> int:
        return sum(rows * count for rows, count in self.task_rows)

    def progress(self) -> tuple[int, int]:
        """(rows, bytes) done, for the progress bar."""
        return self.rows, self.nbytes


def add_run(runs: list[list[int]], rows: int, count: int = 1) -> None:
    """Append ``count`` tasks of ``rows`` rows to run-length counts ``runs``."""
    if runs and runs[-1][0] == rows:
        runs[-1][1] += count
    else:
        runs.append([rows, count])


def save_record(staging: Store, result: ChunkResult) -> None:
    """Record a finished chunk (after its fragment is complete, and flushed with its name):
    what ``--resume`` reads. Not flushed itself: a record that a power cut left empty or short
    is passed over on ``--resume`` and its tasks run again (see :func:`load_records`); up to
    2,048 flushes a run would cost more than that rare rerun."""
    record = {
        "first": result.first,
        "task_rows": result.task_rows,
        "batch_rows": result.batch_rows,
        "nbytes": result.nbytes,
        "schema": None
        if result.schema is None
        else base64.b64encode(result.schema.serialize().to_pybytes()).decode("ascii"),
        "schema_task": result.schema_task,
        "rejects": [[task_id, asdict(r)] for task_id, r in result.rejects],
    }
    staging.write_text(layout.task_record_file(result.first), json.dumps(record), flush=False)


def load_records(staging: Store) -> list[ChunkResult]:
    """The finished chunks of an interrupted run, in task order; a record that cannot be read
    (not flushed when a power cut came) is left out, so its tasks run again."""
    found = []
    for name in staging.listdir(layout.TASKS_DIR):
        match = layout.TASK_RECORD.match(name)
        if match is None:
            continue
        try:
            record = json.loads(staging.read_text(layout.TASKS_DIR, name))
        except ValueError:  # cut short by a power cut: its tasks run again
            continue
        if "first" not in record:  # one task's record, as recordmill 0.1.0 wrote them
            task_id = record["task_id"]
            record |= {
                "first": task_id,
                "task_rows": [[record["rows"], 1]],
                "schema_task": task_id,
                "rejects": [[task_id, r] for r in record["rejects"]],
            }
        schema = record["schema"]
        found.append(
            ChunkResult(
                record["first"],
                task_rows=record["task_rows"],
                batch_rows=record["batch_rows"],
                nbytes=record["nbytes"],
                schema=None
                if schema is None
                else pa.ipc.read_schema(pa.py_buffer(base64.b64decode(schema))),
                schema_task=record["schema_task"],
                rejects=[(task_id, Reject(**r)) for task_id, r in record["rejects"]],
            )
        )
    return sorted(found, key=lambda r: r.first)


def run_record(manifest: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """What a finished run was (plugin, options, task count, settings), as its manifest records
    it: what a ``--resume`` (whose record is ``now``) must match. The manifest holds the run's
    record as run.json did (``run``); one written before it did is read from its settings."""
    if "run" in manifest:
        return manifest["run"]
    settings = dict(manifest.get("settings") or {})
    if "on_bad_row" in settings:  # recorded before the policy had one name
        settings["on_bad_input"] = settings.pop("on_bad_row")
    # Those settings held the row group size written, not the one asked for (None: chosen by
    # the rows): a size asked for now matches the one written, and no size asked matches any.
    written = settings.pop("row_group_size", None)
    asked = (now.get("settings") or {}).get("row_group_size")
    settings["row_group_size"] = asked if asked in (None, written) else written
    return {
        "plugin": manifest["plugin"]["name"],
        "options": manifest["plugin"].get("options") or {},
        "task_number": versions.latest_run(manifest)["tasks"],  # its own, not every version's
        "settings": settings,
    }


def check_run(staging: Store, run: Run, resumed: bool) -> None:
    """Record what this run is; when resuming, refuse a run that is not the same one."""
    record = record_of(run)
    if resumed and staging.is_file(layout.RUN_FILE):
        before = json.loads(staging.read_text(layout.RUN_FILE))
        old = before.get("settings") or {}
        if "on_bad_row" in old:  # recorded before the policy had one name
            old["on_bad_input"] = old.pop("on_bad_row")
        # A run stopped by bad input resumes with --on-bad-input skip, as its error offers:
        # the tasks it finished met no bad input, so skipping would have made them the same.
        skips_now = (
            old.get("on_bad_input") == "fail" and record["settings"].get("on_bad_input") == "skip"
        )
        if skips_now:
            old["on_bad_input"] = "skip"
        changed = describe_changes(before, record)
        if changed:
            raise OutputError(
                f"cannot --resume: this run differs from the interrupted one ({changed}). Run "
                f"it as before, or delete {staging} to drop it and start over"
            )
        if skips_now:
            staging.write_text(layout.RUN_FILE, json.dumps(record))
        return
    staging.write_text(layout.RUN_FILE, json.dumps(record))
    step("recorded")


def record_of(run: Run) -> dict[str, Any]:
    """What this run is, in the JSON form run.json and the manifest (``run``) record it in, so
    that it compares equal to what they hold."""
    record = {
        "plugin": run.plugin.name,
        "options": run.options.to_dict(),
        "task_number": run.tasks,
        "settings": run.settings.identity(),
    }
    return json.loads(json.dumps(record))


def _flag(key: str) -> str:
    if key == "mindrecord_arguments":  # an unmodified MindRecord script's own command line
        return "the script's flags"
    return "--" + key.replace("_", "-")


def _said(value: Any) -> str:
    """A flag's value as a user gave it: a switch given or not, a value, or not given."""
    if value is None or value is False:
        return "not given"
    return "given" if value is True else repr(value)


def describe_changes(before: dict[str, Any], now: dict[str, Any]) -> str:
    """What differs between two run records, named as the flags that set it: ``--partitions: 5
    then, 3 now``."""
    changed = []
    for key in sorted(set(before) | set(now)):
        old, new = before.get(key), now.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            changed += [
                f"{_flag(k)}: {_said(old.get(k))} then, {_said(new.get(k))} now"
                for k in sorted(set(old) | set(new))
                if old.get(k) != new.get(k)
            ]
        elif old != new:
            changed.append(f"{key.replace('_', ' ')}: {old!r} then, {new!r} now")
    return "; ".join(changed)
