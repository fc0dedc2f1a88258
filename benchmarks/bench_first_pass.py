"""First passes in a fresh process, as a user's script runs them: recordmill against HF datasets.

    python benchmarks/bench_first_pass.py               # median of 5 interleaved rounds
    python benchmarks/bench_first_pass.py --runs 3 --measures seq,shuf

Data (made on first use under ``benchmarks/data/first_pass/``, git-ignored): 20,000 rows
``{image: JPEG bytes (180 x 180, quality 92), label: int64}``, 601 MB, written by recordmill as
Arrow IPC (8 partitions) and, from the same table, by ``datasets.Dataset(table).save_to_disk()``.

After one untimed round (the page cache warm, and the first read's checks of each group
recorded for the machine, as after a first epoch), each measure runs in a new process (``bench_first_pass.py --one READER MEASURE``). The imports
of recordmill, numpy, pyarrow, datasets (and torch for the loaders) are outside the timing; the
dataset is opened inside it; every value is touched (the length of every image's bytes, the sum
of the labels), and the parent checks that both readers touched the same total:

- ``seq``: ``ds.iter_batches(256, format="numpy")`` against ``ds.iter(batch_size=256)``;
- ``shuf``: ``ds.iter_batches(256, shuffle=True, seed=1)`` against
  ``ds.shuffle(seed=1).iter(batch_size=256)``;
- ``torch_iter``: torch's ``DataLoader(batch_size=64, num_workers=2)`` over
  ``recordmill.torch.IterableDataset(shuffle=True)`` against HF's
  ``to_iterable_dataset(num_shards=8).shuffle(seed=1)``;
- ``torch_map``: the same loader with ``shuffle=True`` over ``recordmill.torch.MapDataset``
  against the HF dataset itself;
- ``random``: 2,000 seeded ``ds[i]``; ``random_unchecked``: recordmill's with
  ``checksums=False`` (what the checks cost; HF checks nothing);
- ``write``: not a read: the time of ``python writer.py --script templates/template ...
  --workers 2 --quiet`` as a whole process, as a user waits for it (HF: none).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "first_pass"
MEASURES = ["seq", "shuf", "torch_iter", "torch_map", "random", "random_unchecked", "write"]
PLUGIN = """
import io

import numpy as np
from PIL import Image


def task_number():
    return 20


def schema():
    return {"image": {"type": "bytes"}, "label": {"type": "int64"}}


def dict_data(task_id):
    rng = np.random.default_rng(task_id)
    base = rng.integers(0, 255, (180, 180, 3), dtype=np.uint8)
    for i in range(1000):
        buf = io.BytesIO()
        Image.fromarray(np.roll(base, i, axis=0)).save(buf, "JPEG", quality=92)
        yield {"image": buf.getvalue(), "label": (task_id * 1000 + i) % 1000}
"""


def make() -> None:
    import datasets

    import recordmill

    if (DATA / "hf" / "dataset_info.json").exists():
        return
    (DATA / "plugin").mkdir(parents=True, exist_ok=True)
    (DATA / "plugin" / "plugin.py").write_text(textwrap.dedent(PLUGIN))
    settings = dict(partitions=8, format="arrow", progress=False, overwrite=True, workers=2)
    recordmill.write(str(DATA / "plugin"), str(DATA / "arrow"), **settings)
    datasets.Dataset(recordmill.open(str(DATA / "arrow")).to_arrow()).save_to_disk(DATA / "hf")


def one(reader: str, measure: str) -> dict:
    """One measure in this (fresh) process: its seconds and what it touched."""
    # Imported before the timing, all of them on both sides, as a user's script does.
    import datasets  # noqa: F401
    import numpy  # noqa: F401
    import pyarrow  # noqa: F401

    import recordmill

    if measure.startswith("torch"):
        import recordmill.torch  # noqa: F401
        import torch  # noqa: F401
    start = time.perf_counter()
    touched = READERS[reader][measure]()
    return {"seconds": time.perf_counter() - start, "touched": touched}


def _batches(batches) -> int:
    import numpy as np

    return sum(sum(map(len, b["image"])) + int(np.asarray(b["label"]).sum()) for b in batches)


def _rows(loader) -> int:
    return sum(sum(len(r["image"]) + int(r["label"]) for r in rows) for rows in loader)


def _loader(data, shuffle: bool = False):
    import torch

    generator = torch.Generator().manual_seed(1) if shuffle else None
    return torch.utils.data.DataLoader(
        data, batch_size=64, num_workers=2, shuffle=shuffle, generator=generator,
        collate_fn=lambda rows: rows,
    )  # fmt: skip


def _indices() -> list[int]:
    import numpy as np

    return np.random.default_rng(0).integers(0, 20_000, 2_000).tolist()


def _random(ds) -> int:
    """2,000 seeded ``ds[i]`` (the dataset opened inside the timing)."""
    return _rows([[ds[i] for i in _indices()]])


def _rm(**options):
    import recordmill

    return recordmill.open(str(DATA / "arrow"), **options)


def _hf():
    import datasets

    return datasets.load_from_disk(str(DATA / "hf"))


def _rm_torch(kind: str):
    import recordmill.torch as rt

    if kind == "iter":
        return _rows(_loader(rt.IterableDataset(str(DATA / "arrow"), shuffle=True, seed=1)))
    return _rows(_loader(rt.MapDataset(str(DATA / "arrow")), shuffle=True))


def _write() -> int:
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, str(HERE.parent / "writer.py"), "--script",
                   str(HERE.parent / "templates" / "template"), "--output", out + "/o",
                   "--partitions", "2", "--workers", "2", "--quiet"]  # fmt: skip
        subprocess.run(command, check=True, capture_output=True)
    return 0


READERS = {
    "recordmill": {
        "seq": lambda: _batches(_rm().iter_batches(256, format="numpy")),
        "shuf": lambda: _batches(_rm().iter_batches(256, shuffle=True, seed=1)),
        "torch_iter": lambda: _rm_torch("iter"),
        "torch_map": lambda: _rm_torch("map"),
        "random": lambda: _random(_rm()),
        "random_unchecked": lambda: _random(_rm(checksums=False)),
        "write": _write,
    },
    "hf": {
        "seq": lambda: _batches(_hf().iter(batch_size=256)),
        "shuf": lambda: _batches(_hf().shuffle(seed=1).iter(batch_size=256)),
        "torch_iter": lambda: _rows(
            _loader(_hf().to_iterable_dataset(num_shards=8).shuffle(seed=1))
        ),
        "torch_map": lambda: _rows(_loader(_hf(), shuffle=True)),
        "random": lambda: _random(_hf()),
    },
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--measures", default=",".join(MEASURES))
    parser.add_argument("--one", nargs=2, metavar=("READER", "MEASURE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(*args.one)))
        return 0
    from bench_write_start import compiled

    compiled()  # as installed: recordmill's modules not compiled again in each process
    make()
    measures = args.measures.split(",")
    seconds: dict[tuple[str, str], list[float]] = {}
    for round_ in range(args.runs + 1):  # the first round untimed: the page cache warm
        for measure in measures:
            touched = {}
            for reader in READERS:
                if measure not in READERS[reader]:
                    continue
                command = [sys.executable, __file__, "--one", reader, measure]
                done = subprocess.run(command, capture_output=True, text=True, check=True)
                result = json.loads(done.stdout.splitlines()[-1])
                if round_:
                    seconds.setdefault((measure, reader), []).append(result["seconds"])
                touched[reader] = result["touched"]
            if len(set(touched.values())) > 1:
                raise SystemExit(f"{measure}: the readers touched other values: {touched}")
    print(f"| measure | recordmill s | HF datasets s | recordmill / HF (median of {args.runs}) |")
    print("| --- | ---: | ---: | ---: |")
    for measure in measures:
        ours = statistics.median(seconds[(measure, "recordmill")])
        theirs = seconds.get((measure, "hf"))
        if theirs:
            hf = statistics.median(theirs)
            print(f"| {measure} | {ours:.3f} | {hf:.3f} | {ours / hf:.2f}x |")
        else:
            print(f"| {measure} | {ours:.3f} | | |")
    if {"random", "random_unchecked"} <= set(measures):
        checked, unchecked = (statistics.median(seconds[(m, "recordmill")]) for m in
                              ("random", "random_unchecked"))  # fmt: skip
        print(f"\nrandom ds[i], checked / unchecked: {checked / unchecked:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
