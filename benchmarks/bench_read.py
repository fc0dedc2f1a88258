"""Read benchmarks: recordmill.open against the original JPEG files and pyarrow's read_table.

    python benchmarks/bench_read.py              # median of 5 runs each
    python benchmarks/bench_read.py --runs 3

Writes the synthetic image folder (see bench_write.py) once as Parquet and as Arrow IPC with
recordmill (passthrough, 4 partitions), then, in this process with the page cache warm, times:
a sequential pass over every row, a shuffled pass over every row (batches of 256, as Arrow record
batches like read_table's, and again converted to Python/numpy values), and random
access ``ds[i]`` for 2,000 random rows; against reading each JPEG file one by one from the folder
(what a "conventional" folder loader does) and ``pyarrow.parquet.read_table`` of the same files.
Each case runs once untimed first (page cache and memory allocator warm, as from the second
epoch of a training run on), and every timed run opens the dataset afresh, so each pass decodes
what it reads. Prints rows per second and the ratios the goals are about.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

import recordmill

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
IMAGES = DATA / "images"


def ensure_data() -> dict[str, Path]:
    if not IMAGES.is_dir():
        subprocess.run([sys.executable, HERE / "make_imagefolder.py", IMAGES], check=True)
    out = {}
    for fmt in ("parquet", "arrow"):
        path = DATA / f"read-{fmt}"
        if not (path / f"_manifest.{fmt}").is_file():
            recordmill.write(
                "imagenet",
                path,
                options={"image_dir": str(IMAGES)},
                partitions=4,
                workers=2,
                format=fmt,
                overwrite=True,
                progress=False,
            )
        out[fmt] = path
    return out


def files_one_by_one() -> int:
    total = 0
    for folder in sorted(IMAGES.iterdir()):
        for f in sorted(folder.iterdir()):
            total += len(f.read_bytes())
    return total


def sequential(path: Path, fmt: str = "arrow") -> int:
    total = 0
    for batch in recordmill.open(str(path)).iter_batches(
        256, columns=["label", "data"], format=fmt
    ):
        total += len(batch["label"])
    return total


def shuffled(path: Path, fmt: str = "arrow") -> int:
    total = 0
    ds = recordmill.open(str(path))
    for batch in ds.iter_batches(256, columns=["label", "data"], shuffle=True, seed=0, format=fmt):
        total += len(batch["label"])
    return total


def random_access(path: Path, count: int = 2000) -> int:
    ds = recordmill.open(str(path))
    rows = np.random.default_rng(0).integers(0, len(ds), size=count)
    return sum(len(ds[int(i)]["data"]) for i in rows)


def read_table(path: Path) -> int:
    table = pq.read_table(sorted(path.glob("part-*.parquet")), columns=["label", "data"])
    return table.num_rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    paths = ensure_data()
    rows = recordmill.open(str(paths["parquet"])).manifest["total_rows"]
    files_one_by_one()  # warm the page cache
    cases = {
        "JPEG files one by one (conventional loader)": (files_one_by_one, rows),
        "pyarrow.parquet.read_table (floor)": (lambda: read_table(paths["parquet"]), rows),
    }
    for fmt, path in paths.items():
        cases[f"{fmt}: sequential, every row"] = (lambda p=path: sequential(p), rows)
        cases[f"{fmt}: shuffled, every row"] = (lambda p=path: shuffled(p), rows)
        cases[f"{fmt}: sequential, as Python/numpy"] = (lambda p=path: sequential(p, "numpy"), rows)
        cases[f"{fmt}: shuffled, as Python/numpy"] = (lambda p=path: shuffled(p, "numpy"), rows)
        cases[f"{fmt}: random access ds[i], 2,000 rows"] = (lambda p=path: random_access(p), 2000)
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    for fn, _ in cases.values():
        fn()  # once untimed: page cache and memory allocator warm, as in a second epoch
    for _ in range(args.runs):
        for name, (fn, _) in cases.items():
            start = time.perf_counter()
            fn()
            seconds[name].append(time.perf_counter() - start)
    print(f"| read ({rows:,} rows of ~30 KB JPEG bytes) | median s | rows/s |")
    print("| --- | ---: | ---: |")
    median = {name: statistics.median(s) for name, s in seconds.items()}
    for name, (_, count) in cases.items():
        print(f"| {name} | {median[name]:.2f} | {count / median[name]:,.0f} |")
    print()
    floor = median["pyarrow.parquet.read_table (floor)"]
    for fmt in paths:
        seq, shuf = median[f"{fmt}: sequential, every row"], median[f"{fmt}: shuffled, every row"]
        print(f"- {fmt}: shuffled / sequential = {shuf / seq:.2f} (goal <= 2)")
        print(f"- {fmt}: sequential / read_table = {seq / floor:.2f} (goal <= 1.5)")


if __name__ == "__main__":
    main()
