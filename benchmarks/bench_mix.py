"""Training on a mixture: proportions, throughput against one dataset of the same rows, memory per
number of sources, and LitData's CombinedStreamingDataset and MDS Streams side by side.

    python benchmarks/bench_mix.py --litdata-python /tmp/venv-litdata/bin/python \\
        --mds-python /tmp/venv-mds/bin/python     # median of 3 interleaved rounds
    python benchmarks/bench_mix.py --rows 6000 --runs 1  # recordmill alone, a quick check

**Data**: ``--rows`` rows ``{label: int64, x: uint8 [32, 32, 3]}`` (3 KB, seeded random bytes),
the label being the row's number; three sources hold rows 0-60%, 60-90% and 90-100% of them, and a
single dataset holds them all, each written once per tool on local disk (recordmill: Arrow IPC;
LitData: ``optimize``; MDS: ``MDSWriter``). A mixture weighted 0.6/0.3/0.1 that ends at the first
source to run out (recordmill ``until="first_exhausted"``, LitData ``iterate_over_all=False``, which
does not take weights otherwise; MDS ``proportion`` with ``epoch_size`` the rows) reads nearly the
rows of the single dataset; throughput is given in rows a second.

**Throughput**: one shuffled epoch through a DataLoader (batches of 64, ``--workers`` workers,
default 2), timed from the loader's creation to its last batch; the median of ``--runs`` rounds,
the tools interleaved. **Resume**: a loader stopped after 10 batches, its state given to a new
loader with another number of workers, then to one with other weights: what comes next is
compared with what the uninterrupted loader gave (rows repeated, rows missing, or refused).
**Proportions** (recordmill and an independent draw, as tf.data and Hugging Face draw): shares
over 100,000 rows, and the largest miss over every window of 1,000 rows. **Memory**: the peak
RSS of a process reading one epoch of a mixture of 1, 3 and 12 sources holding the same rows.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SHAPE = (32, 32, 3)
BATCH = 64
WEIGHTS = [0.6, 0.3, 0.1]
SPLITS = [0.0, 0.6, 0.9, 1.0]
SEED = 7


def block(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    labels = np.arange(lo, hi, dtype=np.int64)
    x = np.random.default_rng(lo).integers(0, 256, (hi - lo, *SHAPE), dtype=np.uint8)
    return labels, x


def ranges(rows: int, splits: list[float]) -> list[tuple[int, int]]:
    cuts = [round(s * rows) for s in splits]
    return list(itertools.pairwise(cuts))


# --- recordmill -------------------------------------------------------------------------------

PLUGIN = """
import numpy as np, sys
sys.path.insert(0, {here!r})
from bench_mix import block

def task_number():
    return {tasks}

def schema():
    return {{"label": {{"type": "int64"}}, "x": {{"type": "uint8", "shape": [32, 32, 3]}}}}

def dict_data(task_id):
    lo = {lo} + task_id * 1000
    labels, x = block(lo, min(lo + 1000, {hi}))
    for i in range(len(labels)):
        yield {{"label": int(labels[i]), "x": x[i]}}
"""


def write_recordmill(root: Path, rows: int, splits: list[float]) -> list[str]:
    import recordmill

    out = []
    for k, (lo, hi) in enumerate(ranges(rows, splits)):
        plugin = root / f"plugin-{len(splits)}-{k}"
        plugin.mkdir(parents=True, exist_ok=True)
        tasks = -(-(hi - lo) // 1000)
        (plugin / "plugin.py").write_text(PLUGIN.format(here=str(HERE), tasks=tasks, lo=lo, hi=hi))
        path = root / f"rm-{len(splits) - 1}-{k}"
        recordmill.write(str(plugin), str(path), partitions=2, format="arrow", progress=False)
        out.append(str(path))
    return out


def epoch_recordmill(paths: list[str], workers: int, weights=None) -> dict:
    from recordmill.torch import DataLoader, IterableDataset

    import recordmill

    start = time.perf_counter()
    if len(paths) == 1:
        data = IterableDataset(paths[0], shuffle=True, seed=SEED)
    else:
        data = IterableDataset(recordmill.mix(paths, weights, seed=SEED))
    labels = [b["label"] for b in DataLoader(data, batch_size=BATCH, num_workers=workers)]
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "rows": int(sum(len(b) for b in labels))}


def resume_recordmill(paths: list[str], workers: int) -> dict:
    from recordmill.torch import DataLoader, IterableDataset

    import recordmill

    def loader(weights, n):
        m = recordmill.mix(paths, weights, seed=SEED)
        return DataLoader(IterableDataset(m, columns=["label"]), batch_size=BATCH, num_workers=n)

    full = [b["label"].tolist() for b in loader(WEIGHTS, workers)]
    first = loader(WEIGHTS, workers)
    it = iter(first)
    head = [next(it)["label"].tolist() for _ in range(10)]
    state = first.state_dict()
    del it
    out = {}
    other = loader(WEIGHTS, 1 if workers != 1 else 2)
    other.load_state_dict(state)
    out["other workers"] = verdict(full, head, [b["label"].tolist() for b in other])
    reweighted = loader([0.1, 0.3, 0.6], workers)
    reweighted.load_state_dict(state)
    out["other weights"] = verdict(None, head, [b["label"].tolist() for b in reweighted])
    return out


def verdict(full, head, rest) -> str:
    """What a resumed loader gave, against the uninterrupted one (with other weights: whether
    a row came twice in the epoch)."""
    seen = [i for b in head + rest for i in b]
    if full is not None and head + rest == full:
        return "exact"
    dupes = len(seen) - len(set(seen))
    if full is None and dupes == 0:
        return f"no row twice ({len(seen)} rows)"
    return f"not the same: {dupes} rows twice, {len(seen)} rows"


def peak_memory(paths: list[str], plain: bool = False) -> int:
    """Peak RSS (bytes) of a process reading one epoch of a mixture of ``paths`` (``plain``:
    of the one dataset, shuffled, without a mixture). The mapped files' pages count in it."""
    if plain:
        read = "recordmill.open(paths[0]).iter_batches(64, shuffle=True, seed=7)"
    else:
        read = "recordmill.mix(paths, seed=7, until='all_exhausted_without_replacement')"
        read += ".iter_batches(64)"
    code = (
        "import sys, json, resource, recordmill\n"
        "paths = json.loads(sys.argv[1])\n"
        f"n = sum(len(b['label']) for b in {read})\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(paths)], capture_output=True, text=True, check=True
    )
    return int(done.stdout.split()[-1])


def proportions() -> dict:
    from recordmill.read import mixing

    plan = mixing.plan_epoch([10**6] * 3, [(0, WEIGHTS)], SEED, 0, rows=100_000)
    independent = np.random.default_rng(SEED).choice(3, size=100_000, p=WEIGHTS)
    out = {}
    for name, source in (("recordmill", plan.source), ("independent draw", independent)):
        shares = np.bincount(source, minlength=3) / len(source)
        worst = 0.0
        for i, w in enumerate(WEIGHTS):
            cum = np.concatenate([[0], np.cumsum(source == i)])
            worst = max(worst, float(np.abs(cum[1000:] - cum[:-1000] - w * 1000).max()))
        out[name] = {
            "shares": [round(float(s), 4) for s in shares],
            "worst 1,000-row window": worst,
        }
    return out


# --- LitData and MDS (run under their own interpreters) ---------------------------------------


def litdata_rows(item):
    lo, hi = item
    labels, x = block(lo, hi)
    for i in range(len(labels)):
        yield {"label": int(labels[i]), "x": x[i]}


def peer_litdata(args: dict) -> dict:
    import litdata
    from litdata import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset

    os.environ["LITDATA_DISABLE_VERSION_CHECK"] = "1"
    root = Path(args["root"])
    dirs = []
    for k, (lo, hi) in enumerate(ranges(args["rows"], SPLITS)):
        out = root / f"litdata-{k}"
        if not out.exists():
            chunks = [(a, min(a + 1000, hi)) for a in range(lo, hi, 1000)]
            litdata.optimize(
                fn=litdata_rows,
                inputs=chunks,
                output_dir=str(out),
                chunk_bytes="16MB",
                num_workers=1,
            )
        dirs.append(str(out))

    def loader(weights, workers):
        sets = [StreamingDataset(d, shuffle=True, seed=SEED) for d in dirs]
        mixed = CombinedStreamingDataset(sets, seed=SEED, weights=weights, iterate_over_all=False)
        return StreamingDataLoader(mixed, batch_size=BATCH, num_workers=workers)

    return run_peer(loader, args["workers"], args["runs"])


def peer_mds(args: dict) -> dict:
    import torch.utils.data
    from streaming import MDSWriter, Stream, StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    root = Path(args["root"])
    dirs = []
    for k, (lo, hi) in enumerate(ranges(args["rows"], SPLITS)):
        out = root / f"mds-{k}"
        if not out.exists():
            columns = {"label": "int64", "x": "ndarray:uint8:32,32,3"}
            with MDSWriter(out=str(out), columns=columns, size_limit=16 << 20) as w:
                labels, x = block(lo, hi)
                for i in range(len(labels)):
                    w.write({"label": labels[i], "x": x[i]})
        dirs.append(str(out))

    def loader(weights, workers):
        clean_stale_shared_memory()
        streams = [Stream(local=d, proportion=w) for d, w in zip(dirs, weights, strict=True)]
        ds = StreamingDataset(
            streams=streams,
            shuffle=True,
            shuffle_seed=SEED,
            batch_size=BATCH,
            epoch_size=args["rows"],
        )
        return torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=workers)

    return run_peer(loader, args["workers"], args["runs"], mds=True)


def run_peer(loader, workers: int, runs: int, mds: bool = False) -> dict:
    """Epoch times, then the two resumes, as :func:`resume_recordmill` does them."""
    times, rows = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        rows = sum(len(b["label"]) for b in loader(WEIGHTS, workers))
        times.append(time.perf_counter() - start)
    full_loader = loader(WEIGHTS, workers)
    full = [b["label"].tolist() for b in full_loader]
    out = {"seconds": times, "rows": rows}
    for case, weights, n in (
        ("other workers", WEIGHTS, 1),
        ("other weights", [0.1, 0.3, 0.6], workers),
    ):
        try:
            first = loader(WEIGHTS, workers)
            it = iter(first)
            head = [next(it)["label"].tolist() for _ in range(10)]
            if mds:
                state = first.dataset.state_dict(10 * BATCH, from_beginning=False)
            else:
                state = first.state_dict()
            del it
            again = loader(weights, n)
            if mds:
                again.dataset.load_state_dict(state)
            else:
                again.load_state_dict(state)
            rest = [b["label"].tolist() for b in again]
            out[case] = verdict(full if case == "other workers" else None, head, rest)
        except Exception as e:  # what the peer does is the result
            out[case] = f"refused: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return out


def run_in(python: str, task: str, args: dict) -> dict:
    done = subprocess.run(
        [python, __file__, "--peer-task", task, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--litdata-python")
    parser.add_argument("--mds-python")
    parser.add_argument("--peer-task")
    parser.add_argument("args", nargs="?")
    a = parser.parse_args()
    if a.peer_task:
        print(
            json.dumps({"litdata": peer_litdata, "mds": peer_mds}[a.peer_task](json.loads(a.args)))
        )
        return
    root = Path(tempfile.mkdtemp(prefix="bench-mix-"))
    try:
        report(a, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(a: argparse.Namespace, root: Path) -> None:
    single = write_recordmill(root, a.rows, [0.0, 1.0])
    three = write_recordmill(root, a.rows, SPLITS)
    twelve = write_recordmill(root, a.rows, list(np.linspace(0, 1, 13)))
    print("proportions:", json.dumps(proportions()))
    rates: dict[str, list[float]] = {"recordmill, one dataset": [], "recordmill, mixture of 3": []}
    for _ in range(a.runs):
        for name, paths, weights in (
            ("recordmill, one dataset", single, None),
            ("recordmill, mixture of 3", three, WEIGHTS),
        ):
            got = epoch_recordmill(paths, a.workers, weights)
            rates[name].append(got["rows"] / got["seconds"])
    for name, r in rates.items():
        print(f"{name}: {statistics.median(r):,.0f} rows/s (runs {[round(x) for x in r]})")
    ratio = statistics.median(rates["recordmill, mixture of 3"]) / statistics.median(
        rates["recordmill, one dataset"]
    )
    print(f"mixture throughput / one dataset's: {ratio:.3f}")
    print("recordmill resume:", json.dumps(resume_recordmill(three, a.workers)))
    print(f"peak RSS, one dataset: {peak_memory(single, plain=True) / 2**20:.0f} MiB")
    for label, paths in (("1", single), ("3", three), ("12", twelve)):
        print(f"peak RSS, mixture of {label}: {peak_memory(paths) / 2**20:.0f} MiB")
    args = {"root": str(root), "rows": a.rows, "workers": a.workers, "runs": a.runs}
    for name, python in (("litdata", a.litdata_python), ("mds", a.mds_python)):
        if python:
            result = run_in(python, name, args)
            if "seconds" in result:
                rows_s = [result["rows"] / t for t in result["seconds"]]
                result["rows/s"] = round(statistics.median(rows_s))
            print(f"{name}:", json.dumps(result))


if __name__ == "__main__":
    main()
