"""Where a write's wall time goes, process by process.

With ``RECORDMILL_TIMELINE=FILE`` set, each named moment of a run (``fork-server-started``,
``write-called``, ``planned``, ``workers-started``, each job's ``job-start`` in its worker,
``partitions-done`` and the commit's steps) is appended to ``FILE`` as a JSON line
``{"t": unix time, "pid", "name"}``:
what ``benchmarks/bench_write_start.py`` reads to time a write's start phase by phase. Unset, a
mark costs one dictionary lookup.
"""

from __future__ import annotations

import json
import os
import time

TIMELINE = "RECORDMILL_TIMELINE"


def mark(name: str, **more: int | str) -> None:
    """Append the moment ``name`` of this process (and ``more`` about it) to the timeline file,
    if one is set."""
    path = os.environ.get(TIMELINE)
    if not path:
        return
    line = json.dumps({"t": time.time(), "pid": os.getpid(), "name": name, **more}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line.encode())  # one write of an appended line: processes do not mix
    finally:
        os.close(fd)
