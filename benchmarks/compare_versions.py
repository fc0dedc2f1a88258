"""Two checkouts of recordmill side by side, in one interleaved run: is a change free of cost?

    git worktree add /tmp/old <commit>
    python benchmarks/compare_versions.py /tmp/old .        # median of 5 rounds each

Each round writes the images folder (see bench_write.py; passthrough, 4 partitions, --workers 2)
as Parquet and as Arrow IPC and the 2M small rows, with each checkout's own writer.py (whole
processes, run from a neutral folder with PYTHONPATH set to the checkout, so that both import
their own recordmill), then reads each checkout's datasets back: 2,000 random ``ds[i]``, a shuffled
and a sequential pass. The order of the two checkouts alternates between rounds; round 0 is not
counted. Run it in an environment without recordmill installed (an editable install would win
over PYTHONPATH): the project's dependencies only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
IMAGES = HERE / "data" / "images"

WRITES = {
    "write images parquet": ["--script", "imagenet", "--image-dir", str(IMAGES)],
    "write images arrow": ["--script", "imagenet", "--image-dir", str(IMAGES), "--format", "arrow"],
    "write 2M small rows": ["--script", str(HERE / "smallrows")],
}
READ = """
import sys, time, numpy as np, recordmill
out = []
for step in ("ds[i] x2000", "shuffled", "sequential"):
    ds = recordmill.open(sys.argv[1])
    started = time.perf_counter()
    if step == "ds[i] x2000":
        for i in np.random.default_rng(0).integers(0, len(ds), 2000):
            ds[int(i)]
    else:
        for _ in ds.iter_batches(batch_size=256, shuffle=step == "shuffled", seed=0, format="arrow"):
            pass
    out.append(time.perf_counter() - started)
print(*out)
"""


def run(checkout: Path, args: list[str], cwd: str) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"{checkout}: {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - started, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if not IMAGES.is_dir():
        subprocess.run([sys.executable, HERE / "make_imagefolder.py", IMAGES], check=True)
    versions = {"old": args.old.resolve(), "new": args.new.resolve()}
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as work:
        for round_ in range(args.runs + 1):
            order = ("old", "new") if round_ % 2 else ("new", "old")
            for name, flags in WRITES.items():
                for v in order:
                    out = f"{work}/{v}-{name.replace(' ', '-')}"
                    common = ["--partitions", "4", "--workers", "2", "--quiet", "--overwrite"]
                    writer = [str(versions[v] / "writer.py"), *flags, *common, "--output", out]
                    seconds, _ = run(versions[v], writer, work)
                    if round_:
                        times.setdefault((name, v), []).append(seconds)
            for fmt in ("parquet", "arrow"):
                for v in order:
                    _, printed = run(
                        versions[v], ["-c", READ, f"{work}/{v}-write-images-{fmt}"], work
                    )
                    steps = ("ds[i] x2000", "shuffled", "sequential")
                    for step, seconds in zip(steps, map(float, printed.split()), strict=True):
                        if round_:
                            times.setdefault((f"read {fmt}: {step}", v), []).append(seconds)
            print(f"round {round_} done", file=sys.stderr)
    print(f"median of {args.runs} rounds; old = {versions['old']}, new = {versions['new']}\n")
    print("| step | old s | new s | new / old |")
    print("| --- | ---: | ---: | ---: |")
    for name in dict.fromkeys(step for step, _ in times):
        old, new = (statistics.median(times[(name, v)]) for v in ("old", "new"))
        print(f"| {name} | {old:.3f} | {new:.3f} | {new / old:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
