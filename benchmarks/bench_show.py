"""``recordmill show`` on the 20,000-image dataset, beside ``recordmill info`` and a bare start-up.

    python benchmarks/bench_show.py              # median of 5 interleaved rounds, about 2 minutes
    python benchmarks/bench_show.py --runs 3 --formats parquet
    python benchmarks/bench_show.py --runs 0     # only make the data

Data: the 20,000 JPEG files of ``benchmarks/data/images`` (``make_imagefolder.py``: 100 class
folders x 200 files, 592 MB, made on first use), written once with the ``imagenet`` plugin in
passthrough (label, synset, file_name, the JPEG bytes; 4 partitions, 2 workers) as Parquet and as
Arrow IPC under ``benchmarks/data/bench_show/`` (git-ignored).

Each command is a fresh process, timed whole (interpreter start-up, imports, exit), with the page
cache warm (every file read once first); rounds are interleaved so that a noisy moment on a shared
machine hits every command alike. The table gives median, min and max seconds and, for ``show``,
the size of the page. The load average is printed before and after: compare ratios within one
run, not seconds across runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
IMAGES = DATA / "images"
OUT = DATA / "bench_show"
FORMATS = ("parquet", "arrow")


def ensure_data(formats: list[str]) -> None:
    if not IMAGES.is_dir():
        subprocess.run([sys.executable, str(HERE / "make_imagefolder.py"), str(IMAGES)], check=True)
    import recordmill

    for fmt in formats:
        path = OUT / f"images-{fmt}"
        if not path.is_dir():
            recordmill.write(
                "imagenet",
                path,
                options={"image_dir": str(IMAGES)},
                partitions=4,
                workers=2,
                format=fmt,
                progress=False,
            )
    for path in OUT.rglob("*"):  # warm the page cache
        if path.is_file():
            path.read_bytes()


def commands(formats: list[str]) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "recordmill"]
    out = {"python -c 'import recordmill' (start-up)": [sys.executable, "-c", "import recordmill"]}
    for fmt in formats:
        path = str(OUT / f"images-{fmt}")
        out[f"{fmt}: recordmill info"] = [*cli, "info", path]
        out[f"{fmt}: recordmill show"] = [*cli, "show", path, "-o", str(OUT / f"{fmt}.html")]
        out[f"{fmt}: recordmill show --rows 100"] = [
            *cli, "show", path, "--rows", "100", "-o", str(OUT / f"{fmt}-100.html")
        ]  # fmt: skip
    return out


def run_once(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--formats", default=",".join(FORMATS))
    args = parser.parse_args()
    formats = [f for f in args.formats.split(",") if f]
    ensure_data(formats)
    if not args.runs:  # only the data
        return
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    cases = commands(formats)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, command in cases.items():
            times[name].append(run_once(command))
    print(f"load average after: {os.getloadavg()[0]:.2f}\n")
    print("| command | median s | min | max | page |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, seconds in times.items():
        page = ""
        command = cases[name]
        if "-o" in command:
            page = f"{Path(command[command.index('-o') + 1]).stat().st_size / 1e3:,.0f} KB"
        print(
            f"| {name} | {statistics.median(seconds):.2f} | {min(seconds):.2f} | "
            f"{max(seconds):.2f} | {page} |"
        )


if __name__ == "__main__":
    main()
