"""Write benchmarks: recordmill against tar and a plain pyarrow loop, as whole processes.

    python benchmarks/bench_write.py            # all workloads, median of 5 runs each
    python benchmarks/bench_write.py --runs 3 --workloads images
    python benchmarks/bench_write.py --runs 5 --workloads fsync   # flushed against --no-fsync

Makes the synthetic image folder on first use (benchmarks/data/, about 600 MB), reads it once so
the page cache is warm, then times each command as a whole process and samples the summed RSS of
the process and all its children (the workers) every 20 ms for the peak memory. Prints a Markdown
table; ratios are taken within the same run because this machine is shared and noisy.
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

import psutil

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / "data"
IMAGES = DATA / "images"
DOUBLED = DATA / "images-x2"
PHOTOS = DATA / "photos"
WORK = DATA / "out"


def ensure_images(folder: Path = IMAGES) -> None:
    if not folder.is_dir():
        subprocess.run([sys.executable, HERE / "make_imagefolder.py", folder], check=True)
    for f in folder.rglob("*"):
        if f.is_file():
            f.read_bytes()


def ensure_data() -> None:
    ensure_images()
    if not DOUBLED.is_dir():
        # Twice the classes, as hard links: twice the rows and bytes at no extra disk space.
        for copy in range(2):
            for folder in sorted(IMAGES.iterdir()):
                target = DOUBLED / f"{folder.name}-{copy}"
                target.mkdir(parents=True)
                for f in folder.iterdir():
                    os.link(f, target / f.name)
    if not PHOTOS.is_dir():
        subprocess.run(
            [
                sys.executable,
                HERE / "make_imagefolder.py",
                PHOTOS,
                "--classes",
                "20",
                "--per-class",
                "50",
                "--min-size",
                "480",
                "--max-size",
                "1200",
            ],
            check=True,
        )
    for f in PHOTOS.rglob("*"):
        if f.is_file():
            f.read_bytes()


def measure(command: list[str]) -> tuple[float, float, float, float]:
    """Wall seconds, peak summed RSS (MB), bytes written (MB: what the processes passed to
    write(), the last value sampled for each) and the size of what is left on disk (MB) of the
    command's process tree."""
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    start = time.perf_counter()
    process = psutil.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=WORK)
    peak = 0
    written: dict[int, int] = {}
    parents: set[int] = set()
    while process.poll() is None:
        try:
            tree = [process, *process.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
            for p in tree:
                written[p.pid] = p.io_counters().write_chars
                parents.add(p.ppid())
        except psutil.Error:
            pass
        time.sleep(0.02)
    seconds = time.perf_counter() - start
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, command))} failed:\n{process.stderr.read().decode()}")
    left = sum(f.stat().st_size for f in WORK.rglob("*") if f.is_file())
    # Linux adds a reaped child's counts to its parent's, so a process that made others (the
    # fork server, which makes and reaps the workers) would count their writes a second time.
    own = sum(n for pid, n in written.items() if pid not in parents or pid == process.pid)
    return seconds, peak / 1e6, own / 1e6, left / 1e6


def writer(*args: object) -> list[str]:
    return [sys.executable, str(REPO / "writer.py"), "--quiet", "--overwrite", *map(str, args)]


def fsync_workloads(images: Path) -> dict[str, list[str]]:
    """W1 (the JPEGs passed through, straight to partitions and staged) and W3 (small rows),
    each flushed (the default) and with --no-fsync, one after the other."""
    out = WORK / "dataset"
    imagenet = ["--script", "imagenet", "--image-dir", images, "--output", out, "--partitions", 4]
    small = ["--script", HERE / "smallrows", "--output", out, "--partitions", 4]
    count = f"{sum(1 for _ in images.glob('*/*')):,} images"
    runs = {
        f"W1 {count}: recordmill --workers 2": imagenet,
        f"W1 {count}, staged (--on-bad-input skip)": [*imagenet, "--on-bad-input", "skip"],
        "W3 2M small rows: recordmill --workers 2": small,
    }
    commands = {}
    for name, args in runs.items():
        commands[f"{name}, flushed"] = writer(*args, "--workers", 2)
        commands[f"{name}, --no-fsync"] = writer(*args, "--workers", 2, "--no-fsync")
    return commands


def workloads(which: set[str], images: Path = IMAGES) -> dict[str, list[str]]:
    out = WORK / "dataset"
    commands = fsync_workloads(images) if "fsync" in which else {}
    if "images" in which:
        imagenet = ["--script", "imagenet", "--output", out, "--partitions", 4]
        commands |= {
            "images: recordmill --workers 1": writer(
                *imagenet, "--image-dir", IMAGES, "--workers", 1
            ),
            "images: recordmill --workers 2": writer(
                *imagenet, "--image-dir", IMAGES, "--workers", 2
            ),
            "images: recordmill --workers 2, staged (--on-bad-input skip)": writer(
                *imagenet, "--image-dir", IMAGES, "--workers", 2, "--on-bad-input", "skip"
            ),
            "images: plain pyarrow loop": [
                sys.executable,
                str(HERE / "baseline.py"),
                "images",
                str(IMAGES),
                str(WORK / "plain.parquet"),
            ],
            "images: Hugging Face datasets (num_proc=2, 4 shards)": [
                sys.executable,
                str(HERE / "hf_write.py"),
                "images",
                str(IMAGES),
                str(WORK / "hf"),
            ],
            "images: tar -cf (floor)": [
                "tar",
                "-cf",
                str(WORK / "images.tar"),
                "-C",
                str(DATA),
                "images",
            ],
            "images: Python reads every file, writes nothing": [
                sys.executable,
                str(HERE / "baseline.py"),
                "read",
                str(IMAGES),
            ],
            "images: recordmill --workers 2 --format arrow": writer(
                *imagenet, "--image-dir", IMAGES, "--workers", 2, "--format", "arrow"
            ),
            "images x2: recordmill --workers 2": writer(
                *imagenet, "--image-dir", DOUBLED, "--workers", 2
            ),
        }
    if "tensors" in which:
        tensors = [
            "--script",
            "imagenet",
            "--output",
            out,
            "--partitions",
            4,
            "--encode",
            "tensor",
            "--size",
            128,
            "--resize-mode",
            "stretch",
        ]
        for name, folder in (("photos 480-1200 px", PHOTOS), ("images 160-500 px", IMAGES)):
            for workers in (1, 2):
                commands[f"{name}: recordmill --encode tensor --size 128 --workers {workers}"] = (
                    writer(*tensors, "--image-dir", folder, "--workers", workers)
                )
            commands[f"{name}: Hugging Face datasets, plain PIL (num_proc=2)"] = [
                sys.executable,
                str(HERE / "hf_write.py"),
                "tensors",
                str(folder),
                str(WORK / "hf"),
            ]
            commands[f"{name}: plain PIL loop, no draft mode"] = [
                sys.executable,
                str(HERE / "baseline.py"),
                "tensors",
                str(folder),
                str(WORK / "plain.parquet"),
            ]
    if "dask" in which:
        imagenet = [
            "--script",
            "imagenet",
            "--output",
            out,
            "--partitions",
            4,
            "--image-dir",
            IMAGES,
        ]
        commands |= {
            "images: recordmill --executor process --workers 2": writer(*imagenet, "--workers", 2),
            "images: recordmill --executor dask (local scheduler, 2 workers)": writer(
                *imagenet, "--workers", 2, "--executor", "dask", "--dask-address", DASK_ADDRESS
            ),
        }
    if "smallrows" in which:
        small = ["--script", HERE / "smallrows", "--output", out, "--partitions", 4]
        commands |= {
            "2M small rows: recordmill --workers 2": writer(*small, "--workers", 2),
            "2M small rows: Hugging Face datasets (num_proc=2, 4 shards)": [
                sys.executable,
                str(HERE / "hf_write.py"),
                "smallrows",
                str(WORK / "hf"),
            ],
            "2M small rows: plain pyarrow loop": [
                sys.executable,
                str(HERE / "baseline.py"),
                "smallrows",
                str(WORK / "plain.parquet"),
            ],
        }
    if "emptytasks" in which:
        empty = ["--script", HERE / "emptytasks", "--output", out, "--workers", 2]
        for tasks in (100_000, 1_000_000):
            commands[f"{tasks:,} empty tasks: recordmill --workers 2"] = writer(
                *empty, "--tasks", tasks
            )
        commands["1,000,000 empty tasks: the plugin called in a plain loop (floor)"] = [
            sys.executable,
            str(HERE / "baseline.py"),
            "emptytasks",
            "1000000",
        ]
    return commands


DASK_ADDRESS = "tcp://127.0.0.1:8799"


def start_dask() -> list[subprocess.Popen]:
    """A scheduler and two single-threaded workers on this machine, as a cluster already running."""
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    module = [sys.executable, "-m"]
    scheduler = subprocess.Popen(
        [
            *module,
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "8799",
            "--no-dashboard",
        ],
        **quiet,
    )
    workers = [
        subprocess.Popen(
            [
                *module,
                "distributed.cli.dask_worker",
                DASK_ADDRESS,
                "--nthreads",
                "1",
                "--no-dashboard",
                "--host",
                "127.0.0.1",
            ],
            **quiet,
        )
        for _ in range(2)
    ]
    from distributed import Client

    with Client(DASK_ADDRESS, timeout=60) as client:
        client.wait_for_workers(2, timeout=60)
    return [scheduler, *workers]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workloads", default="images,smallrows,tensors,dask")
    parser.add_argument(
        "--images", type=Path, default=IMAGES, help="the image folder of the fsync workload"
    )
    args = parser.parse_args()
    if set(args.workloads.split(",")) & {"images", "tensors", "dask"}:
        ensure_data()
    images = args.images.resolve()  # the commands run in WORK
    if "fsync" in args.workloads.split(","):
        ensure_images(images)
    commands = workloads(set(args.workloads.split(",")), images)
    cluster = start_dask() if "dask" in args.workloads.split(",") else []
    results: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in commands}
    try:
        for _ in range(args.runs):  # interleaved, so that a noisy moment hits every command alike
            for name, command in commands.items():
                results[name].append(measure(command))
    finally:
        for process in cluster:
            process.kill()
    print(
        "| workload | median wall s | min | max | peak RSS MB (all processes) "
        "| MB written | MB left | written / left |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    medians = {}
    for name, runs in results.items():
        walls = [w for w, _, _, _ in runs]
        medians[name] = statistics.median(walls)
        written = statistics.median(r[2] for r in runs)
        left = statistics.median(r[3] for r in runs)
        ratio = f"{written / left:.2f}" if left else "-"
        print(
            f"| {name} | {medians[name]:.2f} | {min(walls):.2f} | {max(walls):.2f} "
            f"| {max(r[1] for r in runs):.0f} | {written:.0f} | {left:.0f} | {ratio} |"
        )
    print()
    ratios = [
        ("images: recordmill --workers 2", "images: tar -cf (floor)", "goal <= 1.5"),
        ("images: recordmill --workers 2", "images: plain pyarrow loop", "goal < 1"),
        (
            "2M small rows: recordmill --workers 2",
            "2M small rows: plain pyarrow loop",
            "goal <= 0.67",
        ),
    ]
    for a, b, goal in ratios:
        if a in medians and b in medians:
            print(f"- {a} / {b}: {medians[a] / medians[b]:.2f} ({goal})")
    for name in ("photos 480-1200 px", "images 160-500 px"):
        ours = f"{name}: recordmill --encode tensor --size 128 --workers 2"
        plain = f"{name}: plain PIL loop, no draft mode"
        if ours in medians and plain in medians:
            goal = (
                "goal >= 3"
                if name.startswith("photos")
                else "no goal: few images are big enough for draft mode"
            )
            print(
                f"- {name}: plain loop / recordmill --workers 2: {medians[plain] / medians[ours]:.2f}x faster ({goal})"
            )
    for name in medians:
        if name.endswith(", flushed"):
            fast = name.removesuffix(", flushed") + ", --no-fsync"
            print(
                f"- {name.removesuffix(', flushed')}: flushed / --no-fsync: "
                f"{medians[name] / medians[fast]:.2f} ({medians[name] - medians[fast]:+.2f} s)"
            )
    dask = "images: recordmill --executor dask (local scheduler, 2 workers)"
    process = "images: recordmill --executor process --workers 2"
    if dask in medians and process in medians:
        extra = medians[dask] - medians[process]
        print(
            f"- dask / process pool: {medians[dask] / medians[process]:.2f} (goal <= 1.3); "
            f"overhead {extra / 100 * 1000:.1f} ms per task, {extra / 20000 * 1e6:.0f} us per row"
        )
    small, big = (f"{n:,} empty tasks: recordmill --workers 2" for n in (100_000, 1_000_000))
    if small in results and big in results:
        peak = {name: max(r[1] for r in results[name]) for name in (small, big)}
        print(
            f"- 1,000,000 / 100,000 empty tasks: {medians[big] / medians[small]:.1f}x the time "
            f"(goal: at most 10x, no more per task at a million; {medians[big]:.1f} us per "
            f"task), peak RSS {peak[big] / peak[small]:.2f}x (goal: about 1.0, flat)"
        )
    x2 = "images x2: recordmill --workers 2"
    if x2 in results:
        one = max(r[1] for r in results["images: recordmill --workers 2"])
        two = max(r[1] for r in results[x2])
        print(f"- peak RSS, doubled folder / folder: {two / one:.2f} (goal: no growth, about 1.0)")


if __name__ == "__main__":
    main()
