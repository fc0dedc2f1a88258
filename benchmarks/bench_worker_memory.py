"""Memory of an IterableDataset's DataLoader workers for a dataset of many rows: what each worker
holds of its own (USS: the pages only it uses), with the epoch's order drawn by every worker or
once by the loader and shared.

    python benchmarks/bench_worker_memory.py --rows 10000000 --workers 2
    python benchmarks/bench_worker_memory.py --rows 10000000 --workers 2 --pythonpath /tmp/base

A dataset of ``--rows`` int64 ids (one column, written once under benchmarks/data/, git-ignored,
by a plugin that yields Arrow tables); one shuffled epoch with ``--workers`` fork workers, each
worker's USS, PSS (psutil) and private dirty pages (/proc/PID/smaps_rollup: what it has
written of its own, not the mapped files' pages) sampled every 20 ms, the largest kept. ``--pythonpath`` runs the
same with another checkout's recordmill (its folder first on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
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
import sys, threading, time
import psutil
import recordmill.torch as rtorch

path, workers = sys.argv[1], int(sys.argv[2])
data = rtorch.IterableDataset(path, shuffle=True, seed=0)
loader = rtorch.DataLoader(data, batch_size=4096, num_workers=workers,
                           multiprocessing_context="fork")
peak = {"uss": 0, "pss": 0, "dirty": 0}
done = threading.Event()


# Pages only this process has written (its heap, copied-on-write pages): memory it holds of its
# own. USS also counts the pages of mapped files that only it has touched so far: page cache,
# which every process shares and the kernel may drop.
def private_dirty(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1]) * 1024
    return 0


def sample():
    me = psutil.Process()
    while not done.is_set():
        for child in me.children():
            try:
                info = child.memory_full_info()
                dirty = private_dirty(child.pid)
            except (psutil.Error, OSError):
                continue
            peak["uss"] = max(peak["uss"], info.uss)
            peak["pss"] = max(peak["pss"], info.pss)
            peak["dirty"] = max(peak["dirty"], dirty)
        time.sleep(0.02)

thread = threading.Thread(target=sample)
thread.start()
rows = sum(len(batch["id"]) for batch in loader)
done.set()
thread.join()
print(f"{rows:,} rows; largest worker USS {peak['uss'] / 2**20:.0f} MiB, "
      f"PSS {peak['pss'] / 2**20:.0f} MiB, private dirty {peak['dirty'] / 2**20:.0f} MiB")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pythonpath", help="another checkout whose recordmill to measure")
    args = parser.parse_args()
    folder = DATA / f"ids-{args.rows}"
    if not folder.exists():
        plugin = DATA / f"ids-plugin-{args.rows}.py"
        DATA.mkdir(exist_ok=True)
        plugin.write_text(textwrap.dedent(PLUGIN.format(rows=args.rows)))
        writer = [sys.executable, str(HERE.parent / "writer.py"), "--script", str(plugin)]
        subprocess.run(
            [*writer, "--output", str(folder), "--format", "arrow", "--quiet"], check=True
        )
    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    command = [sys.executable, "-c", EPOCH, str(folder), str(args.workers)]
    subprocess.run(command, check=True, env=env, cwd=DATA)


if __name__ == "__main__":
    main()
