"""The measures of the read and write goals against a saved baseline: a change that makes any of
them worse by more than 10% is printed as a regression (and the exit status is 1).

    python benchmarks/regressions.py            # measure, compare with benchmarks/baseline.json
    python benchmarks/regressions.py --save     # measure and save them as the new baseline

Counts that do not depend on the machine (bytes checked per epoch, bytes a token) are compared
as they are; times (medians of ``--runs`` rounds, each in a new process) are compared as ratios to
a floor measured in the same run where there is one, so that a slower machine is not a
regression. A baseline is only as good as the machine it was saved on: save it on the one you
compare on.

- ``checked bytes / dataset, 4 workers``: a map-style DataLoader epoch over local Arrow IPC, new
  workers each epoch, two epochs and a second job (``bench_checks.py``'s count);
- ``arrow checked / unchecked, shuffled`` and ``random ds[i]``: the cost of the checks;
- ``parquet / arrow, shuffled`` and ``random``: Parquet opened with no argument;
- ``template write, 4 tasks, 2 workers (s)``: ``python writer.py --script template
  --partitions 2 --workers 2`` wall time, the whole process;
- ``text bytes / 2 bytes a token``: the text plugin's dataset of a tokenized corpus;
- ``orders drawn, 2 ranks x 2 workers``: a shuffled epoch's order (1.2 M rows) on one node
  (``bench_worker_memory.py``'s count);
- ``images DataLoader map`` / ``iter``: ``recordmill.torch.DataLoader`` epochs over 20,000 images
  (``bench_read.py``'s cases and datasets) as ratios to HF's map-style epoch;
- ``first pass ...``: ``bench_first_pass.py``'s first passes in a fresh process (sequential,
  shuffled, torch's own DataLoader over each dataset, random ``ds[i]``), as ratios to HF's.

A time more than 10% worse than its baseline is measured once more, and is a regression only if
that run shows it too (the better of the two is printed): a 2-core machine's busy moment made
single runs of the DataLoader epochs 20-30% slower now and then.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_checks  # noqa: E402
from bench_write_start import compiled  # noqa: E402

BASELINE = HERE / "baseline.json"
WORSE = 1.10  # a measure this much above its baseline is a regression (each is "less is better")


def checks(root: Path, runs: int) -> dict[str, float]:
    data = bench_checks.write(root, 3000)
    per_epoch = dict(bench_checks.bytes_checked(root, data["arrow"]))
    env = {"XDG_CACHE_HOME": str(root / "xdg")}
    bench_checks.run(data["arrow"], "sequential", env)  # the machine's record made
    bench_checks.run(data["parquet"], "default-shuffled", env)  # the default cache filled
    out = {"checked bytes / dataset, 4 workers": per_epoch["4 workers, record"]}
    for case in ("shuffled", "random"):
        times = {k: [] for k in ("checked", "unchecked", "parquet")}
        for _ in range(runs):
            times["checked"].append(bench_checks.run(data["arrow"], case, env)[0])
            times["unchecked"].append(bench_checks.run(data["arrow"], case, env, False)[0])
            times["parquet"].append(bench_checks.run(data["parquet"], f"default-{case}", env)[0])
        c, u, p = (statistics.median(times[k]) for k in ("checked", "unchecked", "parquet"))
        out[f"arrow checked / unchecked, {case}"] = c / u
        out[f"parquet / arrow, {case}"] = p / c
    return out


def template_write(root: Path, runs: int) -> dict[str, float]:
    seconds = []
    for k in range(runs):
        out = root / f"template-{k}"
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, str(HERE.parent / "writer.py"), "--script",
             str(HERE.parent / "templates" / "template"), "--output", str(out),
             "--partitions", "2", "--workers", "2", "--quiet"],
            check=True, capture_output=True,
        )  # fmt: skip
        seconds.append(time.perf_counter() - start)  # the whole process, as a user waits
    return {"template write, 4 tasks, 2 workers (s)": statistics.median(seconds)}


def text(root: Path) -> dict[str, float]:
    import bench_text

    files = bench_text.corpus(2)
    bench_text.train_tokenizer(files, root / "tokenizer.json")
    (root / "plain").mkdir()
    _, tokens = bench_text.plain_loop(files, root / "tokenizer.json", root / "plain")
    bench_text.recordmill_write(files, root / "tokenizer.json", root / "rm1", 1)
    written = sum(f.stat().st_size for f in (root / "rm1").glob("*.parquet"))
    return {"text bytes / 2 bytes a token": written / (2 * tokens)}


def orders() -> dict[str, float]:
    import bench_worker_memory

    got = bench_worker_memory.node(1_200_000, ranks=2, workers=2, batches=5)
    return {"orders drawn, 2 ranks x 2 workers": float(got["drawn"] or 0)}


def loaders(runs: int) -> dict[str, float]:
    """recordmill's DataLoader epochs over ``bench_read.py``'s 20,000 images (its datasets,
    written by a run of it) as ratios to HF's map-style epoch, each case in a new process."""
    root = HERE / "data" / "bench_read"
    if not all((root / f"images-{r}").exists() for r in ("arrow", "hf")):
        print("DataLoader epochs not measured: run bench_read.py --datasets images first")
        return {}

    def epoch(reader: str, measure: str) -> float:
        done = subprocess.run(
            [sys.executable, str(HERE / "bench_read.py"), "--one", reader, "images", measure,
             "--root", str(root)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        return json.loads(done.stdout.splitlines()[-1])["seconds"]

    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(runs):  # interleaved, as bench_read.py's rounds are
        for case in (("arrow", "map"), ("arrow", "iter"), ("hf", "map")):
            times.setdefault(case, []).append(epoch(*case))
    hf = statistics.median(times["hf", "map"])
    return {
        f"images DataLoader {m}, arrow / HF's map-style": statistics.median(times["arrow", m]) / hf
        for m in ("map", "iter")
    }


def first_passes(runs: int) -> dict[str, float]:
    """``bench_first_pass.py``'s measures (a first pass in a fresh process over 20,000 images)
    as ratios of recordmill's time to HF datasets', each case in a new process."""
    import bench_first_pass

    if not (bench_first_pass.DATA / "hf" / "dataset_info.json").exists():
        print("first passes not measured: run bench_first_pass.py first (it writes the data)")
        return {}
    times: dict[tuple[str, str], list[float]] = {}
    measures = ["seq", "shuf", "torch_iter", "torch_map", "random"]
    for _ in range(runs):  # interleaved, as bench_first_pass.py's rounds are
        for measure in measures:
            for reader in ("recordmill", "hf"):
                command = [sys.executable, bench_first_pass.__file__, "--one", reader, measure]
                done = subprocess.run(command, check=True, capture_output=True, text=True)
                seconds = json.loads(done.stdout.splitlines()[-1])["seconds"]
                times.setdefault((measure, reader), []).append(seconds)
    return {
        f"first pass {m}, recordmill / HF": statistics.median(times[m, "recordmill"])
        / statistics.median(times[m, "hf"])
        for m in measures
    }


@dataclass(frozen=True)
class Group:
    """Measures that one function gives: times, or counts (the same every run)."""

    measure: Callable[[Path, int], dict[str, float]]
    timed: bool = True


GROUPS = [
    Group(checks),
    Group(template_write),
    Group(lambda root, runs: text(root), timed=False),
    Group(lambda root, runs: orders(), timed=False),
    Group(lambda root, runs: loaders(runs)),
    Group(lambda root, runs: first_passes(runs)),
]


def measure(root: Path, runs: int, groups: list[Group]) -> list[dict[str, float]]:
    """Each group's measures, each group in a folder of its own (one measured again starts
    afresh)."""
    return [group.measure(Path(tempfile.mkdtemp(dir=root)), runs) for group in groups]


def worse(now: dict[str, float], saved: dict[str, float], name: str) -> bool:
    before, value = saved.get(name), now.get(name)
    if before is None or value is None:
        return False
    return value / before > WORSE if before else bool(value)


def compare(now: dict[str, float], saved: dict[str, float]) -> int:
    print("| measure | baseline | now | now / baseline | |\n| --- | ---: | ---: | ---: | --- |")
    count = 0
    for name, value in now.items():
        before = saved.get(name)
        if before is None:
            print(f"| {name} | | {value:.3f} | | new |")
            continue
        ratio = value / before if before else (float("inf") if value else 1.0)
        bad = worse(now, saved, name)
        count += bad
        print(
            f"| {name} | {before:.3f} | {value:.3f} | {ratio:.2f} | {'REGRESSION' if bad else ''} |"
        )
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    a = parser.parse_args()
    compiled()  # as installed (see bench_write_start.py)
    root = Path(tempfile.mkdtemp(prefix="bench-regressions-"))
    saved = json.loads(a.baseline.read_text())["measures"] if a.baseline.exists() else {}
    try:
        got = measure(root, a.runs, GROUPS)
        now = {name: value for measures in got for name, value in measures.items()}
        # A time that a busy moment of the machine made worse is measured once more: a
        # regression is one that both runs show (the better of the two is kept).
        again = [
            (group, list(measures))
            for group, measures in zip(GROUPS, got, strict=True)
            if group.timed and any(worse(now, saved, name) for name in measures)
        ]
        if again:
            print("measured again:", "; ".join(", ".join(names) for _, names in again))
        for measures in measure(root, a.runs, [group for group, _ in again]):
            for name, value in measures.items():
                now[name] = min(now[name], value)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if a.save:
        machine = {"machine": platform.machine(), "cpus": os.cpu_count(), "saved": time.ctime()}
        a.baseline.write_text(json.dumps({"machine": machine, "measures": now}, indent=1) + "\n")
        print(f"saved {len(now)} measures to {a.baseline}")
        return 0
    if not saved:
        print(f"no baseline at {a.baseline}: run with --save first")
        return 1
    bad = compare(now, saved)
    print(f"\n{bad} regression(s) of more than {WORSE - 1:.0%}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
