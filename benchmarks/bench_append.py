"""Appending 10% more images to a dataset (``--append``) against writing it whole again.

    python benchmarks/bench_append.py             # median of 3 runs; about 15 minutes on 2 cores
    python benchmarks/bench_append.py --runs 1

The first version is the 20,000-image folder of bench_write.py (``benchmarks/data/images``, made
by make_imagefolder.py on first use); 2,000 more images in 10 new classes (``images-more``, the
same generator, classes 100-109) are the 10% that arrives; ``images-grown`` is both, as hard
links. Each command is a whole process, timed with the page cache warm, the runs interleaved:

- first write: the 20,000 images (``--partitions 4 --workers 2``);
- append: the 2,000 more, added to a copy of that dataset (``--append --partitions 2``, both
  workers busy as in the first write); and 20 more, which is what any append costs (the process,
  its imports and workers, the commit) whatever its size;
- overwrite: the grown 22,000 written again over a copy: what a user without --append does;
- append, staged: the append through staged fragments (``--on-bad-input skip``), and the same
  with ``--dedup-key file_name`` (which takes that path too): the difference, and the summary's
  ``duplicates`` phase, are what the key lookups cost;
- the same 2,000 appended again with ``--dedup-key file_name``: every row a duplicate.

The copies of the dataset are hard links made before the clock starts. "MB written" is what the
command's processes passed to write() (psutil's write_chars, as bench_write.py counts it): the
figure that does not depend on the machine. The 1-minute load average is shown beside each line:
this machine is shared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / "data"
IMAGES = DATA / "images"
MORE = DATA / "images-more"
GROWN = DATA / "images-grown"
FEW = DATA / "images-few"
WORK = DATA / "append-out"
BASE = WORK / "base"
MORE_CLASSES = range(100, 110)

sys.path.insert(0, str(HERE))
from make_imagefolder import make_class  # noqa: E402


def ensure_data() -> None:
    if not IMAGES.is_dir():
        subprocess.run([sys.executable, HERE / "make_imagefolder.py", IMAGES], check=True)
    if not MORE.is_dir():
        jobs = [(MORE, c, 200, 0, 160, 500) for c in MORE_CLASSES]
        with ProcessPoolExecutor(2) as pool:
            list(pool.map(make_class, jobs))
    if not FEW.is_dir():  # 20 of the more images: what any append costs whatever its size
        first = sorted(MORE.iterdir())[0]
        (FEW / first.name).mkdir(parents=True)
        for f in sorted(first.iterdir())[:20]:
            os.link(f, FEW / first.name / f.name)
    if not GROWN.is_dir():
        for root in (IMAGES, MORE):
            for folder in sorted(root.iterdir()):
                (GROWN / folder.name).mkdir(parents=True)
                for f in folder.iterdir():
                    os.link(f, GROWN / folder.name / f.name)
    for root in (IMAGES, MORE):
        for f in root.rglob("*"):
            if f.is_file():
                f.read_bytes()


def writer(*args: object) -> list[str]:
    return [sys.executable, str(REPO / "writer.py"), "--quiet", "--script", "imagenet", *args]


def workloads() -> dict[str, tuple[str | None, list[str]]]:
    """name: (the dataset copied to the output first, or None; the command)."""
    out = WORK / "run"
    new = ["--image-dir", MORE, "--output", out, "--append", "--partitions", 2, "--workers", 2]
    staged = [*new, "--on-bad-input", "skip"]
    few = ["--image-dir", FEW, "--output", out, "--append", "--partitions", 2, "--workers", 2]
    return {
        "first write: 20,000 images": (
            None,
            writer("--image-dir", IMAGES, "--output", out, "--partitions", 4, "--workers", 2),
        ),
        "append: 2,000 more (10%)": ("base", writer(*new)),
        "append: 20 more (0.1%), the fixed cost": ("base", writer(*few)),
        "overwrite: all 22,000 again": (
            "base",
            writer(
                "--image-dir",
                GROWN,
                "--output",
                out,
                "--overwrite",
                "--partitions",
                4,
                "--workers",
                2,
            ),
        ),
        "append, staged (--on-bad-input skip)": ("base", writer(*staged)),
        "append, staged, --dedup-key file_name": (
            "base",
            writer(*staged, "--dedup-key", "file_name"),
        ),
        "append the same 2,000 again, --dedup-key file_name": (
            "appended",
            writer(*staged, "--dedup-key", "file_name"),
        ),
    }


def prepare() -> None:
    """The dataset every append starts from, and that dataset appended to once already."""
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    first = writer("--image-dir", IMAGES, "--output", BASE, "--partitions", 4, "--workers", 2)
    subprocess.run([str(c) for c in first], check=True, stdout=subprocess.DEVNULL)
    shutil.copytree(BASE, WORK / "appended", copy_function=os.link)
    again = ["--image-dir", MORE, "--output", WORK / "appended", "--append", "--partitions", 2]
    subprocess.run([str(c) for c in writer(*again)], check=True, stdout=subprocess.DEVNULL)


def measure(start_from: str | None, command: list[str]) -> tuple[float, float, float, str]:
    """Wall seconds, MB written by the process tree, the load average, and the summary line."""
    out = WORK / "run"
    shutil.rmtree(out, ignore_errors=True)
    if start_from is not None:
        shutil.copytree(WORK / start_from, out, copy_function=os.link)
    started = time.perf_counter()
    process = psutil.Popen(
        [str(c) for c in command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    written: dict[int, int] = {}
    parents: set[int] = set()
    while process.poll() is None:
        try:
            for p in [process, *process.children(recursive=True)]:
                written[p.pid] = p.io_counters().write_chars
                parents.add(p.ppid())
        except psutil.Error:
            pass
        time.sleep(0.02)
    seconds = time.perf_counter() - started
    stdout, stderr = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, command))} failed:\n{stderr}")
    own = sum(n for pid, n in written.items() if pid not in parents or pid == process.pid)
    return seconds, own / 1e6, os.getloadavg()[0], stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    ensure_data()
    prepare()
    found: dict[str, list[tuple[float, float, float, str]]] = {}
    for _ in range(args.runs):
        for name, (start_from, command) in workloads().items():
            found.setdefault(name, []).append(measure(start_from, command))
            print(f"{name}: {found[name][-1][:3]}", file=sys.stderr)
    first = found["first write: 20,000 images"]
    base_s = statistics.median(r[0] for r in first)
    base_mb = statistics.median(r[1] for r in first)
    print("| workload | seconds | of the first write | MB written | of the first write | load |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, runs in found.items():
        s = statistics.median(r[0] for r in runs)
        mb = statistics.median(r[1] for r in runs)
        load = statistics.median(r[2] for r in runs)
        print(
            f"| {name} | {s:.1f} | {s / base_s:.0%} | {mb:,.0f} | {mb / base_mb:.1%} | {load:.1f} |"
        )
    print()
    for name, runs in found.items():  # the summary line of the last run: its phases
        print(f"- {name}: `{runs[-1][3]}`")


if __name__ == "__main__":
    main()
