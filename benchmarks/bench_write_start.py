"""What a small write spends before, around and after its tasks, phase by phase.

    python benchmarks/bench_write_start.py               # median of 7 rounds
    python benchmarks/bench_write_start.py --runs 3

Each run is ``python writer.py ...`` in a new process, with ``RECORDMILL_TIMELINE`` set: every
process of the write appends its moments to a file (``recordmill/timeline.py``), and the phases
are the gaps between them, from the moment the benchmark starts the process:

- **imports**: until ``write()`` is called (the interpreter, recordmill's imports, the arguments);
- **plan**: the plugin loaded and the run planned;
- **waiting for workers**: until the pool's workers are up (the fork server's imports, when they
  take longer than the main process's own);
- **tasks**: until the last partition is written;
- **commit**: the manifest staged, flushed and published;
- **exit**: until the process has ended.

``fork server`` is when the server was asked to start (``recordmill/forkserver.py``). The runs:
the template plugin's 4 tasks with 2 workers (``templates/template``), and the CSV table of
``bench_csv.py`` (made on its first use) with 1 worker and in the process (``--workers 0``).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PHASES = [
    ("fork server", "fork-server-started"),
    ("imports", "write-called"),
    ("plan", "planned"),
    ("waiting for workers", "workers-started"),
    ("tasks", "partitions-done"),
    ("commit", "published"),
]


def run_once(args: list[str], out: Path) -> dict[str, float]:
    """One write: the moment each phase ended, in seconds from the process's start."""
    with tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        timeline = Path(tmp) / "timeline.jsonl"
        env = {**os.environ, "RECORDMILL_TIMELINE": str(timeline)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # imports from .pyc, as installed
        shutil.rmtree(out, ignore_errors=True)
        start = time.time()
        cmd = [sys.executable, str(REPO / "writer.py"), *args, "--output", str(out)]
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        end = time.time()
        main = None
        ends: dict[str, float] = {}
        for line in timeline.read_text().splitlines():
            moment = json.loads(line)
            main = main or moment["pid"]
            if moment["pid"] == main:  # the main process's moments (the last of each name)
                ends[moment["name"]] = moment["t"] - start
        ends["exit"] = end - start
        return ends


def phases(ends: dict[str, float]) -> dict[str, float]:
    """Each phase's seconds (the fork server: when it was asked for)."""
    out, last = {}, 0.0
    for label, name in PHASES:
        if name not in ends:
            continue
        if label == "fork server":
            out[label] = ends[name]
            continue
        out[label], last = ends[name] - last, ends[name]
    out["exit"] = ends["exit"] - last
    out["total"] = ends["exit"]
    return out


def compiled() -> None:
    """Compile recordmill's modules, its templates and its plugins to bytecode, as installing
    it does: with ``PYTHONDONTWRITEBYTECODE`` set and no ``__pycache__``, every process compiles
    them again (a whole write took 0.32 s instead of 0.26 s), which is not what users time."""
    for folder in ("recordmill", "templates", "plugins"):
        compileall.compile_dir(HERE.parent / folder, quiet=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    compiled()
    sys.path.insert(0, str(HERE))
    from bench_csv import DATA, make_table  # the same CSV as bench_csv.py

    table = DATA / "table.csv"
    if not table.exists():
        make_table(table)
    cases = {
        "template, 4 tasks, --workers 2": ["--script", "templates/template", "--workers", "2"],
        "csv, --workers 1": ["--script", "csv", "--input", str(table), "--workers", "1"],
        "csv, --workers 0": ["--script", "csv", "--input", str(table), "--workers", "0"],
    }
    out = Path(tempfile.mkdtemp(prefix="bench-start-out-"))
    results: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
    for case in cases.values():  # once untimed: .pyc files, the page cache
        run_once(case, out / "warm")
    for _ in range(args.runs):  # interleaved rounds
        for name, case in cases.items():
            results[name].append(phases(run_once(case, out / name.split(",")[0])))
    shutil.rmtree(out, ignore_errors=True)
    labels = [label for label, _ in PHASES] + ["exit", "total"]
    print("| run | " + " | ".join(labels) + " |")
    print("| --- |" + " ---: |" * len(labels))
    for name, runs in results.items():
        cells = [
            f"{statistics.median(r[label] for r in runs):.3f}" if label in runs[0] else ""
            for label in labels
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
