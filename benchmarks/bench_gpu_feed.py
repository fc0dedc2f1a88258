"""A GPU fed by the loaders (issue 39, item 7): ResNet-18 trained from each format, side by side.

    python benchmarks/bench_gpu_feed.py                      # on a machine with a GPU
    python benchmarks/bench_gpu_feed.py --rows 512 --device cpu --model tiny --steps 2  # smoke

**Data**: ``--rows`` uint8 tensors of 128 x 128 x 3 (48 KB each; a gradient per class with
seeded noise, which Parquet compression leaves about as large) and a label in 0..99, written by
``recordmill.write`` with 16 partitions as Arrow IPC and as Parquet, and the same rows as a
``.npy`` pair read back from the Arrow dataset.

**The loop**: ResNet-18 (torchvision, 100 classes, channels-last, bf16 autocast, SGD), batches of
256, ``--workers`` DataLoader workers with pinned memory; the uint8 batch goes to the GPU and is
made float there. An epoch is timed from ``iter(loader)`` (the workers' start included) to the
GPU's last step; every epoch's rows are counted and their labels summed against the data's.

**Readers**: the floors, memory-mapped ``.npy``: ``npy-rows`` (a ``Dataset`` whose
``__getitem__`` copies one row, the plain code) and ``npy-batch`` (one fancy index of the memmap
per batch, ``batch_size=None`` over a ``BatchSampler``: the fastest simple code); recordmill's
``recordmill.torch.DataLoader`` over ``MapDataset`` of the Arrow dataset (``arrow``), of the
Parquet dataset with no argument (``parquet``: through the disk cache in the user's cache folder,
filled by its first epoch) and with ``cache_dir=False`` (``parquet-direct``), and an
``IterableDataset`` over the Parquet dataset (``parquet-iter``). ``gpu`` is the same steps on one
batch kept on the GPU: the most the GPU does, whatever feeds it.

Each reader runs ``--epochs`` epochs in one process; the first epoch is reported apart (it fills
the page cache, or recordmill's disk cache) and the figure compared is the median of the others.
With ``--write-scaling 1,4,16``, the Arrow write is timed with that many workers too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import recordmill  # noqa: E402

SHAPE = (128, 128, 3)
CLASSES = 100
PARTITIONS = 16
SEED = 39

PLUGIN = """
import sys

sys.path.insert(0, {here!r})
from bench_gpu_feed import PARTITIONS, SHAPE, row


def add_options(parser):
    parser.add_argument("--rows", type=int, default=1000)


def task_number():
    return PARTITIONS


def schema(options):
    return {{"label": "int64", "x": {{"type": "uint8", "shape": list(SHAPE)}}}}


def dict_data(task_id, options):
    first, stop = (t * options.rows // PARTITIONS for t in (task_id, task_id + 1))
    for i in range(first, stop):
        label, x = row(i)
        yield {{"label": label, "x": x}}
"""


_BASES: dict[int, np.ndarray] = {}
_NOISE: list[np.ndarray] = []


def row(i: int) -> tuple[int, np.ndarray]:
    """Row ``i``: its label and its pixels (a class's gradient plus one of 61 seeded noises,
    shifted by ``i``)."""
    label = (i * 7919) % CLASSES
    if label not in _BASES:
        h, w, _ = SHAPE
        yy, xx = np.mgrid[0:h, 0:w]
        grad = np.stack([xx * 255 // w, yy * 255 // h, (xx + yy + label) * 255 // (w + h + 99)], -1)
        _BASES[label] = grad.astype(np.int16)
    if not _NOISE:
        rng = np.random.default_rng(SEED)
        _NOISE.extend(rng.integers(-20, 21, size=SHAPE, dtype=np.int16) for _ in range(61))
    noise = np.roll(_NOISE[i % 61], i % 128, axis=1)
    return label, np.clip(_BASES[label] + noise, 0, 255).astype(np.uint8)


# --- the data -----------------------------------------------------------------------------------


def write(root: Path, fmt: str, rows: int, workers: int, name: str | None = None) -> float:
    """Seconds to write the dataset with ``workers`` workers."""
    with tempfile.TemporaryDirectory(prefix="bench-gpu-plugin-") as tmp:
        plugin = Path(tmp) / "tensors"
        plugin.mkdir()
        (plugin / "plugin.py").write_text(PLUGIN.format(here=str(HERE)))
        start = time.perf_counter()
        recordmill.write(
            plugin,
            root / (name or fmt),
            options={"rows": rows},
            partitions=PARTITIONS,
            workers=workers,
            format=fmt,
            overwrite=True,
            progress=False,
        )
        return time.perf_counter() - start


def write_npy(root: Path) -> float:
    """The floor's files, read back from the Arrow dataset (so all readers hold the same rows)."""
    start = time.perf_counter()
    ds = recordmill.open(root / "arrow")
    folder = root / "npy"
    folder.mkdir(exist_ok=True)
    x = np.lib.format.open_memmap(folder / "x.npy", "w+", np.uint8, (len(ds), *SHAPE))
    labels = np.empty(len(ds), np.int64)
    at = 0
    for batch in ds.iter_batches(1024, format="numpy"):
        n = len(batch["label"])
        x[at : at + n], labels[at : at + n] = batch["x"], batch["label"]
        at += n
    x.flush()
    del x
    np.save(folder / "label.npy", labels)
    return time.perf_counter() - start


def prepare(root: Path, rows: int, workers: int) -> dict[str, float]:
    """Write the three datasets once (kept in ``root`` for later runs)."""
    done = root / f"done-{rows}"
    if done.exists():
        return json.loads(done.read_text())
    root.mkdir(parents=True, exist_ok=True)
    times = {f"write {fmt}": write(root, fmt, rows, workers) for fmt in ("arrow", "parquet")}
    times["write npy"] = write_npy(root)
    done.write_text(json.dumps(times))
    return times


def write_scaling(root: Path, rows: int, counts: list[int]) -> dict[str, float]:
    """Seconds of the Arrow write with each number of workers, and the plain one-process loop."""
    times = {}
    for workers in counts:
        times[f"write arrow, {workers} workers"] = write(root, "arrow", rows, workers, "scaling")
    start = time.perf_counter()
    plain_loop(root / "plain.arrow", rows)
    times["plain loop (one process, pyarrow)"] = time.perf_counter() - start
    shutil.rmtree(root / "scaling", ignore_errors=True)
    return times


def plain_loop(path: Path, rows: int) -> None:
    """The honest floor of a write: make each row, write Arrow IPC in batches, nothing else."""
    import pyarrow as pa

    schema = pa.schema([("label", pa.int64()), ("x", pa.binary(int(np.prod(SHAPE))))])
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as out:
        for lo in range(0, rows, 1024):
            got = [row(i) for i in range(lo, min(rows, lo + 1024))]
            labels = pa.array([g[0] for g in got], pa.int64())
            xs = pa.array([g[1].tobytes() for g in got], schema.field("x").type)
            out.write_batch(pa.record_batch([labels, xs], schema=schema))
    path.unlink()


# --- the readers --------------------------------------------------------------------------------


class NpyRows:
    """The plain map-style dataset: one row copied out of the memmap per ``__getitem__``."""

    def __init__(self, folder: Path):
        self.folder, self.x = folder, None
        self.labels = np.load(folder / "label.npy")

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, Any]:
        import torch

        if self.x is None:  # opened in the worker
            self.x = np.load(self.folder / "x.npy", mmap_mode="r")
        return {"label": int(self.labels[i]), "x": torch.from_numpy(np.array(self.x[i]))}


class NpyBatches(NpyRows):
    """A batch per ``__getitem__``: one fancy index of the memmap."""

    def __getitem__(self, indices: list[int]) -> dict[str, Any]:  # type: ignore[override]
        import torch

        if self.x is None:
            self.x = np.load(self.folder / "x.npy", mmap_mode="r")
        at = np.sort(np.asarray(indices))  # in file order: the same rows, fewer seeks
        return {"label": torch.from_numpy(self.labels[at]), "x": torch.from_numpy(self.x[at])}


def loader(reader: str, root: Path, batch: int, workers: int) -> Any:
    import recordmill.torch as rt
    import torch
    from torch.utils import data

    common = {"num_workers": workers, "pin_memory": torch.cuda.is_available()}
    if reader == "npy-rows":
        gen = torch.Generator().manual_seed(SEED)
        return data.DataLoader(NpyRows(root / "npy"), batch, shuffle=True, generator=gen, **common)
    if reader == "npy-batch":
        ds = NpyBatches(root / "npy")
        gen = torch.Generator().manual_seed(SEED)
        batches = data.BatchSampler(data.RandomSampler(ds, generator=gen), batch, False)
        return data.DataLoader(ds, batch_size=None, sampler=batches, **common)
    columns = ["label", "x"]
    if reader == "parquet-iter":
        ds = rt.IterableDataset(root / "parquet", columns=columns, shuffle=True, seed=SEED)
        return rt.DataLoader(ds, batch, **common)
    path, cache = {
        "arrow": (root / "arrow", {}),
        "parquet": (root / "parquet", {}),
        "parquet-direct": (root / "parquet", {"cache_dir": False}),
    }[reader]
    ds = rt.MapDataset(path, columns=columns, **cache)
    return rt.DataLoader(ds, batch, shuffle=True, seed=SEED, **common)


# --- the loop -----------------------------------------------------------------------------------


class Trainer:
    def __init__(self, model: str, device: str):
        import torch

        self.torch, self.device = torch, torch.device(device)
        if model == "resnet18":
            import torchvision

            net = torchvision.models.resnet18(num_classes=CLASSES)
        else:  # a stand-in small enough for a CPU smoke run
            net = torch.nn.Sequential(
                torch.nn.Conv2d(3, 8, 3, stride=4),
                torch.nn.AdaptiveAvgPool2d(1),
                torch.nn.Flatten(),
                torch.nn.Linear(8, CLASSES),
            )
        self.model = net.to(self.device, memory_format=torch.channels_last)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.loss = torch.nn.CrossEntropyLoss()

    def step(self, x: Any, y: Any) -> None:
        torch = self.torch
        x = x.to(self.device, non_blocking=True).permute(0, 3, 1, 2).float().div_(255)
        x = x.contiguous(memory_format=torch.channels_last)
        y = y.to(self.device, non_blocking=True)
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            loss = self.loss(self.model(x), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def epoch(self, batches: Any, steps: int | None) -> dict[str, float]:
        """One epoch: seconds, rows, the labels' sum, and rows/s after the first 10 batches."""
        start = time.perf_counter()
        rows = label_sum = 0
        steady = None
        for i, batch in enumerate(batches):
            if i == 10:
                self.sync()
                steady = (time.perf_counter(), rows)
            self.step(batch["x"], batch["label"])
            rows += len(batch["label"])
            label_sum += int(batch["label"].sum())
            if steps is not None and i + 1 >= steps:
                break
        self.sync()
        end = time.perf_counter()
        out = {"seconds": end - start, "rows": rows, "label_sum": label_sum}
        if steady is not None:
            out["steady_rows_per_s"] = (rows - steady[1]) / (end - steady[0])
        return out

    def ceiling(self, batch: int, steps: int) -> float:
        """Rows/s of the steps alone, on one batch kept on the device."""
        torch = self.torch
        x = torch.randint(0, 256, (batch, *SHAPE), dtype=torch.uint8, device=self.device)
        y = torch.randint(0, CLASSES, (batch,), device=self.device)
        for _ in range(5):
            self.step(x, y)
        self.sync()
        start = time.perf_counter()
        for _ in range(steps):
            self.step(x, y)
        self.sync()
        return batch * steps / (time.perf_counter() - start)


def run_reader(reader: str, args: argparse.Namespace, trainer: Trainer) -> dict[str, Any]:
    batches = loader(reader, args.root, args.batch, args.workers)
    epochs = [trainer.epoch(batches, args.steps) for _ in range(args.epochs)]
    expected = np.load(args.root / "npy" / "label.npy")
    for e in epochs:  # every row once an epoch, or the figure means nothing
        if args.steps is None and (e["rows"], e["label_sum"]) != (len(expected), expected.sum()):
            raise SystemExit(f"{reader}: read {e['rows']} rows, label sum {e['label_sum']}")
    later = epochs[1:] or epochs
    return {
        "reader": reader,
        "first_s": epochs[0]["seconds"],
        "epoch_s": statistics.median(e["seconds"] for e in later),
        "rows_per_s": statistics.median(e["rows"] / e["seconds"] for e in later),
        "steady_rows_per_s": statistics.median(e.get("steady_rows_per_s", 0) for e in later),
    }


def table(results: list[dict[str, Any]], ceiling: float, floor: str) -> str:
    # Without the floor among --readers, there is nothing to take the ratio to.
    base = next((r["rows_per_s"] for r in results if r["reader"] == floor), None)
    lines = [
        "| reader | first epoch s | later epoch s | img/s | img/s after 10 batches | x floor |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        f"| gpu (one batch on the device) | | | {ceiling:,.0f} | | |",
    ]
    for r in results:
        ratio = f"{r['rows_per_s'] / base:.2f}" if base else "-"
        lines.append(
            f"| {r['reader']} | {r['first_s']:.2f} | {r['epoch_s']:.2f} | {r['rows_per_s']:,.0f} "
            f"| {r['steady_rows_per_s']:,.0f} | {ratio} |"
        )
    return "\n".join(lines)


READERS = ["npy-rows", "npy-batch", "arrow", "parquet", "parquet-direct", "parquet-iter"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--write-workers", type=int, default=min(16, os.cpu_count() or 1))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None, help="at most this many batches")
    parser.add_argument("--readers", default=",".join(READERS))
    parser.add_argument("--model", default="resnet18", choices=["resnet18", "tiny"])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()) / "gpufeed")
    parser.add_argument("--write-scaling", default="", help="e.g. 1,4,16")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    # A fresh user cache folder: the "parquet" reader's first epoch fills it.
    os.environ["RECORDMILL_CACHE_DIR"] = str(args.root / f"cache-{time.time_ns()}")
    report: dict[str, Any] = {"writes": prepare(args.root, args.rows, args.write_workers)}
    if args.write_scaling:
        counts = [int(n) for n in args.write_scaling.split(",")]
        report["scaling"] = write_scaling(args.root, args.rows // 4, counts)
    trainer = Trainer(args.model, args.device)
    report["ceiling"] = trainer.ceiling(args.batch, 50 if args.steps is None else 2)
    report["readers"] = []
    for reader in args.readers.split(","):
        report["readers"].append(run_reader(reader, args, trainer))
        if reader == "parquet":  # what its first epoch put in the cache folder
            cache = Path(os.environ["RECORDMILL_CACHE_DIR"])
            report["readers"][-1]["cache_bytes"] = sum(
                f.stat().st_size for f in cache.rglob("*") if f.is_file()
            )
        print(json.dumps(report["readers"][-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    for name, seconds in {**report["writes"], **report.get("scaling", {})}.items():
        print(f"{name}: {seconds:.2f} s")
    print(table(report["readers"], report["ceiling"], "npy-batch"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
