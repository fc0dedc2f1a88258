"""CSV to Parquet: recordmill's csv plugin against the one-liners a user would write instead.

    python benchmarks/bench_csv.py --runs 3
    python benchmarks/bench_csv.py --runs 3 --before /tmp/base/writer.py   # an older checkout too

On first use it writes ``benchmarks/data/table.csv`` (git-ignored): 113,800 rows x 31 columns,
24 MB, numbers as scikit-learn's bundled tables hold them (30 float columns of measurements, an
integer label), seeded. Each command is a whole process (imports included), timed with the page
cache warm; rounds are interleaved and the table shows medians:

- pandas: ``pd.read_csv(path).to_parquet(out)``;
- pyarrow: ``pq.write_table(pyarrow.csv.read_csv(path), out)``;
- recordmill: ``writer.py --script csv --input path --output out --partitions 1`` with
  ``--workers 0`` (in the one process, as the one-liners), ``--workers 1``, and with
  ``--workers 2 --rows-per-task 28450`` (four tasks); and ``--workers 2 --partitions 2`` (two
  files, one written by each worker).

Every command runs once untimed first, and without ``PYTHONDONTWRITEBYTECODE``: recordmill's
modules, as pandas' and pyarrow's, are timed from their compiled ``.pyc`` files, as an installed
package has them (a checkout run with ``PYTHONDONTWRITEBYTECODE=1`` compiles some 80 modules
each time, about 0.1 s).

Every output is read back and compared with the CSV's sums (rows, the label's sum, one float
column's sum); a command that wrote other data stops the benchmark.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
ROWS, FLOATS = 113_800, 30


def make_table(path: Path, rows: int = ROWS) -> None:
    rng = np.random.default_rng(0)
    values = rng.lognormal(2, 1, size=(rows, FLOATS)).round(4)
    labels = rng.integers(0, 3, rows)
    names = [f"m{i}" for i in range(FLOATS)]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write(",".join([*names, "label"]) + "\n")
        for row, label in zip(values, labels, strict=True):
            f.write(",".join(map(repr, row.tolist())) + f",{label}\n")


def scaling(csv: Path, out: Path, counts: list[int], rows: int) -> dict[str, list[str]]:
    """recordmill with N workers writing N partitions (N tasks), for each N."""
    writer = [sys.executable, str(HERE.parent / "writer.py"), "--script", "csv"]
    return {
        f"recordmill --workers {n} --partitions {n} ({n} tasks)": [
            *(*writer, "--input", str(csv), "--output", str(out / f"rs{n}"), "--quiet"),
            *("--overwrite", "--workers", str(n), "--partitions", str(n)),
            *("--rows-per-task", str(-(-rows // n))),
        ]
        for n in counts
    }


def commands(csv: Path, out: Path, before: str | None, rows: int = ROWS) -> dict[str, list[str]]:
    py = sys.executable
    writer = [py, str(HERE.parent / "writer.py"), "--script", "csv", "--input", str(csv)]
    common = ["--partitions", "1", "--quiet", "--overwrite"]
    earlier = {}
    if before:  # the same runs by another checkout's writer.py (its own recordmill package)
        old = [py, before, "--script", "csv", "--input", str(csv), *common]
        earlier = {
            "recordmill before, --workers 1": [*old, "--output", str(out / "b1"), "--workers", "1"],
            "recordmill before, --workers 2 (4 tasks)": [
                *(*old, "--output", str(out / "b2"), "--workers", "2"),
                *("--rows-per-task", str(rows // 4)),
            ],
        }
    return {
        "pandas: pd.read_csv(...).to_parquet(...)": [
            py,
            "-c",
            f"import pandas as pd; pd.read_csv({str(csv)!r}).to_parquet({str(out / 'pd.parquet')!r})",
        ],
        "pyarrow: pq.write_table(pyarrow.csv.read_csv(...))": [
            py,
            "-c",
            "import pyarrow.csv as c, pyarrow.parquet as pq; "
            f"pq.write_table(c.read_csv({str(csv)!r}), {str(out / 'pa.parquet')!r})",
        ],
        "recordmill --workers 0 (in this process)": [
            *(*writer, "--output", str(out / "rm0"), *common, "--workers", "0"),
        ],
        "recordmill --workers 1": [
            *writer,
            "--output",
            str(out / "rm1"),
            *common,
            "--workers",
            "1",
        ],
        "recordmill --workers 2 (4 tasks)": [
            *writer,
            *("--output", str(out / "rm2"), *common, "--workers", "2"),
            *("--rows-per-task", str(rows // 4)),
        ],
        "recordmill --workers 2 --partitions 2 (4 tasks, 2 files)": [
            *(*writer, "--output", str(out / "rm2p"), "--quiet", "--overwrite"),
            *("--workers", "2", "--partitions", "2", "--rows-per-task", str(rows // 4)),
        ],
        **earlier,
    }


def check(out: Path, expected: tuple[int, int, float]) -> None:
    for found in sorted(out.iterdir()):
        table = pq.read_table(found)
        sums = (table.num_rows, int(np.sum(table["label"])), float(np.sum(table["m0"])))
        assert sums[:2] == expected[:2] and abs(sums[2] - expected[2]) < 1e-6, (found, sums)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", help="another checkout's writer.py, timed beside this one")
    parser.add_argument("--scale", type=int, default=1, help="a table this many times larger")
    parser.add_argument("--scaling", default="", help="workers (and partitions) to add: 1,4,8")
    args = parser.parse_args()
    DATA.mkdir(exist_ok=True)
    rows = ROWS * args.scale
    csv = DATA / ("table.csv" if args.scale == 1 else f"table-x{args.scale}.csv")
    if not csv.exists():
        make_table(csv, rows)
    import pyarrow.csv as pacsv

    source = pacsv.read_csv(csv)
    expected = (source.num_rows, int(np.sum(source["label"])), float(np.sum(source["m0"])))
    out = DATA / "csv-out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    times: dict[str, list[float]] = {}
    for run in range(args.runs + 1):  # the first, untimed: page cache and .pyc files
        counts = [int(n) for n in args.scaling.split(",") if n]
        runs = {**commands(csv, out, args.before, rows), **scaling(csv, out, counts, rows)}
        for name, command in runs.items():
            started = time.perf_counter()
            subprocess.run(command, check=True, env=env)
            if run:
                times.setdefault(name, []).append(time.perf_counter() - started)
        check(out, expected)
    pandas = statistics.median(times["pandas: pd.read_csv(...).to_parquet(...)"])
    print(f"{csv.stat().st_size / 1e6:.0f} MB, {rows:,} rows x {FLOATS + 1} columns")
    print("| command | median s | min | max | / pandas |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, found in times.items():
        median = statistics.median(found)
        print(
            f"| {name} | {median:.2f} | {min(found):.2f} | {max(found):.2f} | "
            f"{median / pandas:.2f} |"
        )


if __name__ == "__main__":
    main()
