"""Memory of IterableDataset loaders for a dataset of many rows, on one node: what each
DataLoader worker and each rank's process holds of its own, and what the node holds for them all.

    python benchmarks/bench_worker_memory.py --rows 10000000 --workers 2
    python benchmarks/bench_worker_memory.py --rows 100000000 --ranks 2 --workers 2 --batches 50
    python benchmarks/bench_worker_memory.py --rows 100000000 --ranks 2 --workers 2 --batches 50 \
        --pythonpath /tmp/base

A dataset of ``--rows`` int64 ids (one column, written once under benchmarks/data/, git-ignored,
by a plugin that yields Arrow tables); ``--ranks`` rank processes at once (rank/world_size given,
as torch.distributed would), each reading a shuffled epoch (or its first ``--batches`` batches
of 4096) through a DataLoader of ``--workers`` fork workers, with a fresh cache folder. Sampled
every 20 ms, the largest kept: each process's private dirty pages (/proc/PID/smaps: what it has
written of its own, not the pages of the mapped files, the order's included), and the sum of PSS over every rank and
worker (shared pages counted once). The orders drawn are counted (``RECORDMILL_ORDER_LOG``).
``--pythonpath`` runs the same with another checkout's recordmill (its folder first on
PYTHONPATH).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

PLUGIN = """
import pyarrow as pa

ROWS = {rows}

def task_number():
    return 10

def schema():
    return {{"id": {{"type": "int64"}}}}

def task_rows(task_id):
    return ROWS // 10

def dict_data(task_id):
    n = ROWS // 10
    yield pa.table({{"id": pa.array(range(task_id * n, (task_id + 1) * n), pa.int64())}})
"""

EPOCH = """
import itertools, sys
import recordmill.torch as rtorch

path, workers, batches, rank, ranks = sys.argv[1:6]
data = rtorch.IterableDataset(path, shuffle=True, seed=0, rank=int(rank), world_size=int(ranks))
loader = rtorch.DataLoader(data, batch_size=4096, num_workers=int(workers),
                           multiprocessing_context="fork")
some = itertools.islice(loader, int(batches)) if int(batches) else loader
print(sum(len(batch["id"]) for batch in some))
"""


def memory(pid: int) -> dict[str, int]:
    """A process's memory (/proc/PID/smaps), in bytes: its Pss, and its private dirty pages
    (what it has written of its own) outside the shared order files. USS would also count the
    clean pages of mapped files only it has touched so far, and an order file's pages count as
    private while the one process that draws it is the only one to map it: both are page cache,
    shared by every process that maps them, and counted once in the node's sum of PSS."""
    found = {"Pss": 0, "Private_Dirty": 0}
    in_orders = False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if "-" in key and " " in line:  # a mapping's header: its range, ..., its file
                in_orders = "/orders/" in line
            elif key == "Pss" or (key == "Private_Dirty" and not in_orders):
                found[key] += int(rest.split()[0]) * 1024
    return found


def measure(command: list[str], env: dict[str, str], ranks: int) -> dict[str, float]:
    """Run ``ranks`` rank processes at once, sampling every 20 ms: the largest private dirty of
    a worker and of a rank's process, and the largest sum of PSS over all of them (what the
    node holds for the job: shared pages counted once)."""
    import psutil

    procs = [
        subprocess.Popen([*command, str(r), str(ranks)], env=env, cwd=DATA, stdout=subprocess.PIPE)
        for r in range(ranks)
    ]
    peak = {"worker": 0, "rank": 0, "node": 0}
    while any(p.poll() is None for p in procs):
        node = 0
        for p in procs:
            with contextlib.suppress(psutil.Error, OSError):
                for kind, pid in [("rank", p.pid)] + [
                    ("worker", c.pid) for c in psutil.Process(p.pid).children()
                ]:
                    found = memory(pid)
                    node += found["Pss"]
                    peak[kind] = max(peak[kind], found["Private_Dirty"])
        peak["node"] = max(peak["node"], node)
        time.sleep(0.02)
    rows = sum(int(p.communicate()[0]) for p in procs)
    if any(p.returncode for p in procs):
        raise SystemExit("a rank failed")
    return {"rows": rows, **{k: v / 2**20 for k, v in peak.items()}}


def node(rows: int, ranks: int, workers: int, batches: int, pythonpath: str | None = None) -> dict:
    """``ranks`` loaders of ``workers`` workers on a dataset of ``rows`` ids (written the first
    time): what :func:`measure` gives, and the orders drawn (None where not counted)."""
    folder = DATA / f"ids-{rows}"
    if not folder.exists():
        plugin = DATA / f"ids-plugin-{rows}.py"
        DATA.mkdir(exist_ok=True)
        plugin.write_text(textwrap.dedent(PLUGIN.format(rows=rows)))
        writer = [sys.executable, str(HERE.parent / "writer.py"), "--script", str(plugin)]
        subprocess.run(
            [*writer, "--output", str(folder), "--format", "arrow", "--quiet"], check=True
        )
    with tempfile.TemporaryDirectory() as scratch:
        env = dict(os.environ, RECORDMILL_CACHE_DIR=scratch)  # no order drawn before
        env["RECORDMILL_ORDER_LOG"] = log = os.path.join(scratch, "drawn")
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        command = [sys.executable, "-c", EPOCH, str(folder), str(workers), str(batches)]
        got = measure(command, env, ranks)
        drawn = len(Path(log).read_text().splitlines()) if os.path.exists(log) else None
    return {**got, "drawn": drawn}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ranks", type=int, default=1, help="rank processes run at once")
    parser.add_argument("--batches", type=int, default=0, help="each rank's (0: the epoch)")
    parser.add_argument("--pythonpath", help="another checkout whose recordmill to measure")
    a = parser.parse_args()
    got = node(a.rows, a.ranks, a.workers, a.batches, a.pythonpath)
    print(
        f"{a.rows:,} rows, {a.ranks} ranks x {a.workers} workers, {got['rows']:,} read; "
        f"private dirty: largest worker {got['worker']:.0f} MiB, largest rank "
        f"{got['rank']:.0f} MiB; node (sum of PSS) {got['node']:.0f} MiB; "
        f"orders drawn: {'not counted' if got['drawn'] is None else got['drawn']}"
    )


if __name__ == "__main__":
    main()
