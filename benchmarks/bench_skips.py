"""What ``on_error="skip"`` costs when nothing fails: a DataLoader epoch of decoded images with
and without it, side by side.

    python benchmarks/bench_skips.py                 # 10,000 JPEGs, 5 interleaved rounds
    python benchmarks/bench_skips.py --rows 500 --runs 1

**Data**: ``--rows`` JPEGs of 96 x 96 (seeded noise under a gradient, Pillow quality 90) stored as
they are (a binary column, Arrow IPC), decoded with ``recordmill.decode.image`` and made CHW
float tensors by the transform: what an image training loop does per row. **Measured**: one
shuffled epoch of ``IterableDataset`` and of ``MapDataset`` through ``recordmill.torch.DataLoader``
(batches of 64, ``--workers`` workers, default 2), from the loader's creation to its last batch,
the two settings alternating round by round; the median of ``--runs`` rounds and its ratio.
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import recordmill.decode
import torch
from PIL import Image
from recordmill.torch import DataLoader, IterableDataset, MapDataset

import recordmill

PLUGIN = """
import sys
sys.path.insert(0, {here!r})
from bench_skips import jpeg

def task_number():
    return {tasks}

def schema():
    return {{"label": {{"type": "int64"}}, "data": {{"type": "binary"}}}}

def dict_data(task_id):
    for i in range(task_id * 500, min(task_id * 500 + 500, {rows})):
        yield {{"label": i, "data": jpeg(i)}}
"""


def jpeg(i: int) -> bytes:
    rng = np.random.default_rng(i)
    ramp = np.linspace(0, 200, 96, dtype=np.float32)[None, :, None]
    pixels = np.clip(ramp + rng.normal(0, 20, (96, 96, 3)), 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return out.getvalue()


def to_tensor(row: dict) -> tuple[torch.Tensor, int]:
    return torch.from_numpy(row["data"]).permute(2, 0, 1).float().div_(255), row["label"]


def epoch(path: str, kind: str, on_error: str, workers: int) -> float:
    start = time.perf_counter()
    args = {
        "decode": {"data": recordmill.decode.image},
        "transform": to_tensor,
        "on_error": on_error,
    }
    if kind == "iterable":
        data = DataLoader(
            IterableDataset(path, shuffle=True, **args), batch_size=64, num_workers=workers
        )
    else:
        data = DataLoader(
            MapDataset(path, **args), batch_size=64, shuffle=True, num_workers=workers
        )
    rows = sum(len(labels) for _, labels in data)
    seconds = time.perf_counter() - start
    assert rows == len(recordmill.open(path)) and not getattr(data, "rejects", [])
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    a = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-skips-"))
    try:
        plugin = root / "plugin"
        plugin.mkdir()
        here = str(Path(__file__).resolve().parent)
        tasks = -(-a.rows // 500)
        (plugin / "plugin.py").write_text(PLUGIN.format(here=here, tasks=tasks, rows=a.rows))
        path = str(root / "ds")
        recordmill.write(str(plugin), path, partitions=2, format="arrow", progress=False)
        for kind in ("iterable", "map"):
            times: dict[str, list[float]] = {"raise": [], "skip": []}
            for _ in range(a.runs):
                for on_error in ("raise", "skip"):
                    times[on_error].append(epoch(path, kind, on_error, a.workers))
            med = {k: statistics.median(v) for k, v in times.items()}
            print(
                f"{kind}: on_error='raise' {med['raise']:.3f} s, on_error='skip' {med['skip']:.3f} s,"
                f" ratio {med['skip'] / med['raise']:.3f} (rounds: raise "
                f"{[round(t, 3) for t in times['raise']]}, skip {[round(t, 3) for t in times['skip']]})"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
