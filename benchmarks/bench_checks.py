"""What the checks cost at scale, and Parquet read at random without being told to cache.

    python benchmarks/bench_checks.py            # 6,000 rows of 30 KB (180 MB), median of 3
    python benchmarks/bench_checks.py --rows 1000 --runs 1   # a quick check

**Data**: ``--rows`` rows ``{label, data: 30 KB of seeded random bytes}`` (an image's size,
which compression cannot shrink), written once as Arrow IPC and once as Parquet (4 partitions,
row groups of about 1 MB), both older than two seconds when read (a machine records checks of
files that settled, ``recordmill/read/machine/checked.py``).

**Bytes checked** (a count, not a time: every process appends each check's bytes to
``RECORDMILL_CHECK_LOG``, summed here): the Arrow dataset read by a map-style
``DataLoader(MapDataset, batch_size=64, shuffle=True)`` with 0, 2 and 4 workers for two epochs
(PyTorch starts new workers each epoch), then by a second job; against the dataset's row-group
bytes. With a fresh record each time (a new cache folder), and with the record made unusable
(what every process checked before the record existed).

**Time, checked against unchecked** (``checksums=False``), each in a new process after the
machine's record is made: a sequential pass (``iter_batches(256)``), a shuffled pass
(``iter_batches(256, shuffle=True)``), 2,000 random ``ds[i]``, and DataLoader epochs with 0, 2
and 4 workers. **Parquet at random, no argument**: the shuffled pass and ``ds[i]`` of the
Parquet dataset opened with no ``cache_dir`` (the user's cache folder, filled in a first
process), against the Arrow dataset's; the time of the pass that fills the cache apart.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PLUGIN = """
import numpy as np

ROWS = {rows}

def task_number():
    return 4

def schema():
    return {{"label": {{"type": "int64"}}, "data": {{"type": "bytes"}}}}

def dict_data(task_id):
    for i in range(task_id * ROWS // 4, (task_id + 1) * ROWS // 4):
        yield {{"label": i, "data": np.random.default_rng(i).bytes(30_000)}}
"""

# Run in a new process: (seconds, rows) of one case.
CASE = """
import sys, time, json
import numpy as np
import recordmill
import recordmill.read.dataset  # recordmill imports its names when first used: not timed
path, case, checked, workers = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
extra = {} if path.endswith("arrow") or case.startswith("default") else {"cache_dir": False}
start = time.perf_counter()
ds = recordmill.open(path, checksums=checked, **extra)
rows = 0
if case == "sequential":
    rows = sum(len(b["label"]) for b in ds.iter_batches(256))
elif case in ("shuffled", "default-shuffled"):
    rows = sum(len(b["label"]) for b in ds.iter_batches(256, shuffle=True, seed=0))
elif case in ("random", "default-random"):
    for i in np.random.default_rng(0).integers(0, len(ds), 2000):
        ds[int(i)]["data"]
    rows = 2000
else:
    import recordmill.torch as rt
    for epoch in range(int(case.split("-")[1])):
        loader = rt.DataLoader(rt.MapDataset(path, **extra), batch_size=64, shuffle=True,
                               num_workers=workers)
        loader.set_epoch(epoch)
        rows += sum(len(b["label"]) for b in loader)
print(json.dumps([time.perf_counter() - start, rows]))
"""


def write(root: Path, rows: int) -> dict[str, Path]:
    import recordmill

    plugin = root / "plugin"
    plugin.mkdir()
    (plugin / "plugin.py").write_text(textwrap.dedent(PLUGIN.format(rows=rows)))
    out = {}
    for fmt in ("arrow", "parquet"):
        out[fmt] = root / fmt
        recordmill.write(plugin, out[fmt], format=fmt, partitions=4, row_group_size=34,
                         workers=2, progress=False)  # fmt: skip
    time.sleep(2.1)  # settled: a machine records checks of files older than two seconds
    return out


def run(path: Path, case: str, env: dict[str, str], checked: bool = True, workers: int = 0):
    done = subprocess.run(
        [sys.executable, "-c", CASE, str(path), case, "1" if checked else "0", str(workers)],
        env={**os.environ, **env}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def group_bytes(path: Path) -> int:
    import recordmill

    parts = recordmill.read_manifest(path)["partitions"]
    return sum(p["group_offsets"][-1] - p["group_offsets"][0] for p in parts)


def bytes_checked(root: Path, arrow: Path) -> list[tuple[str, float]]:
    """Bytes checked per epoch over the dataset's bytes, by the workers of two epochs and a
    second job, with a fresh record and with none."""
    total = group_bytes(arrow)
    out = []
    for workers in (0, 2, 4):
        for record in ("record", "no record"):
            cache = root / f"xdg-{workers}-{record}"
            if record == "no record":
                cache.write_text("")  # a file where the folder would be: the record is unusable
            log = root / f"check-{workers}-{record}.log"
            env = {"XDG_CACHE_HOME": str(cache), "RECORDMILL_CHECK_LOG": str(log)}
            run(arrow, "map-2", env, workers=workers)  # two epochs
            run(arrow, "map-1", env, workers=workers)  # and another job
            checked = sum(int(line.split()[1]) for line in log.read_text().splitlines())
            out.append((f"{workers} workers, {record}", checked / total / 3))
    return out


def timed(args, root: Path, data: dict[str, Path]) -> dict[str, list[float]]:
    env = {"XDG_CACHE_HOME": str(root / "xdg")}
    run(data["arrow"], "sequential", env)  # the machine's record made
    run(data["parquet"], "default-shuffled", env)  # the default cache filled
    times: dict[str, list[float]] = {}
    cases = [("sequential", 0), ("shuffled", 0), ("random", 0)]
    cases += [("map-1", w) for w in (0, 2, 4)]
    for _ in range(args.runs):
        for case, workers in cases:
            for checked in (True, False):
                name = f"{case}{'' if case != 'map-1' else f', {workers} workers'}"
                seconds = run(data["arrow"], case, env, checked, workers)[0]
                times.setdefault(f"{name}|{'checked' if checked else 'unchecked'}", []).append(
                    seconds
                )
        for case in ("default-shuffled", "default-random"):
            times.setdefault(f"{case}|parquet", []).append(run(data["parquet"], case, env)[0])
            name = case.replace("default-", "")
            times.setdefault(f"{case}|arrow", []).append(run(data["arrow"], name, env)[0])
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=6000)
    parser.add_argument("--runs", type=int, default=3)
    a = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-checks-"))
    try:
        data = write(root, a.rows)
        print(f"| bytes checked per epoch / the dataset's ({group_bytes(data['arrow']):,} bytes) |"
              " |\n| --- | --- |")  # fmt: skip
        for name, ratio in bytes_checked(root, data["arrow"]):
            print(f"| {name} | {ratio:.3f} |")
        times = timed(a, root, data)
        print("\n| read (Arrow IPC) | checked s | unchecked s | checked / unchecked |")
        print("| --- | --- | --- | --- |")
        for key in [k for k in times if k.endswith("|checked")]:
            name = key.split("|")[0]
            c, u = (statistics.median(times[f"{name}|{k}"]) for k in ("checked", "unchecked"))
            print(f"| {name} | {c:.3f} | {u:.3f} | {c / u:.2f} |")
        print(
            "\n| no argument | Parquet s | Arrow s | Parquet / Arrow |\n| --- | --- | --- | --- |"
        )
        for case in ("default-shuffled", "default-random"):
            p, r = (statistics.median(times[f"{case}|{k}"]) for k in ("parquet", "arrow"))
            print(f"| {case.split('-')[1]} | {p:.3f} | {r:.3f} | {p / r:.2f} |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
