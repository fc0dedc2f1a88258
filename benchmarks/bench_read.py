"""Read benchmarks: recordmill against Hugging Face datasets, MosaicML streaming (MDS) and a floor.

    python benchmarks/bench_read.py                  # images and tensors, median of 5 rounds
    python benchmarks/bench_read.py --double         # also: peak RSS with the images twice over
    python benchmarks/bench_read.py --runs 3 --datasets tensors --readers parquet,arrow,hf
    python benchmarks/bench_read.py --small --runs 1 # a few hundred rows, a quick end-to-end check
    python benchmarks/bench_read.py --runs 0         # only write the datasets (and warm the cache)
    python benchmarks/bench_read.py --rewrite        # write every dataset again (after a writer change)

One round of everything with ``--double`` takes about 4 minutes on 2 cores (most of it process
start-up); ``--timeout`` (300 s) stops a case that takes longer and reports it as timed out.
``--json FILE`` appends each run's result as a JSON line. MDS runs when ``import streaming``
works in this interpreter, and is skipped with the reason printed otherwise (mosaicml-streaming
0.13 pins numpy<2.2 and pulls torchvision and transformers).

Data (under ``benchmarks/data/bench_read/``, or ``bench_read_small/`` with ``--small``):

- **images**: the 20,000 JPEG files of ``benchmarks/data/images`` (``make_imagefolder.py``) as
  rows ``{label, data: the file's bytes, file_name}``, label = the class folder's sorted position;
- **tensors**: 4,000 rows ``{label: int64, x: uint8 [128, 128, 3]}`` (a colour gradient plus
  seeded noise, from :func:`tensor_row`);
- **images-x2** (``--double``): ``benchmarks/data/images-x2``, the same files hard-linked twice,
  40,000 rows; recordmill only.

Each is written once, from the same rows, by every reader: recordmill (the ``imagenet`` plugin in
passthrough for images, a small plugin for tensors; 4 partitions, 2 workers, Parquet and Arrow
IPC), Hugging Face ``Dataset.from_generator(...).save_to_disk(num_shards=4)``, MDS
``MDSWriter`` (about 4 shards), and the floor: the JPEG files themselves, and for tensors one
``.npy`` of all arrays (read with ``mmap_mode="r"``) plus a small ``.npy`` of labels.

Measures, for every reader (``--measures``):

- ``sequential``: every row once in order, batches of 256 where the reader has batches
  (recordmill ``iter_batches(256, columns, format="numpy")``, HF ``with_format("numpy").iter(256)``,
  MDS ``LocalDataset[i]`` row by row, the floor file by file / slices of the ``.npy``);
- ``shuffled``: every row once in the permutation ``np.random.default_rng(0).permutation(n)``
  (recordmill ``iter_batches(256, shuffle=True, seed=0)``, HF ``shuffle(seed=0,
  keep_in_memory=True)``, which draws the same permutation, then ``.iter(256)``; MDS and the floor
  index rows in that order);
- ``random``: ``ds[i]`` for the same 2,000 seeded indices (``default_rng(0).integers``), one call each;
- ``map``: one epoch of ``DataLoader(map-style dataset, batch_size=64, shuffle=True,
  num_workers=2)`` with a seeded generator (``recordmill.torch.MapDataset``, the HF dataset (numpy
  format for tensors), MDS ``LocalDataset``, the floor's tiny map-style datasets);
- ``iter``: one epoch of ``DataLoader(iterable dataset, batch_size=64, num_workers=2)``:
  ``recordmill.torch.IterableDataset(shuffle=True, seed=0, batch_size=64)``; the floor reads its worker's share of
  the permutation; HF ``to_iterable_dataset(num_shards=4).shuffle(seed=0, buffer_size=1000)`` and MDS
  ``StreamingDataset(shuffle=True, shuffle_seed=0)`` are marked with a dagger: their shuffles are
  shard-and-buffer shuffles, not a permutation of all rows (the goals compare recordmill's
  IterableDataset with HF's map-style DataLoader).

Every value is touched: images add ``len(data)`` of each ``bytes`` value (a copy of every byte),
tensors the sum of every pixel value; every run reports its row count, label sum and that value sum,
which the parent checks against the figures computed once from the source rows (for ``random``, of
the 2,000 indexed rows). A mismatch stops the benchmark with an error.

Method: the page cache is warmed first (every file of every dataset read once). Then, for each of
``--runs`` rounds, every case (reader, dataset, measure) runs once, interleaved, each in a fresh
Python process (``bench_read.py --one READER DATASET MEASURE --root DIR``) that prints one JSON line.
The timed part starts after the interpreter's start-up and the imports and includes opening the
dataset (``recordmill.open``, ``load_from_disk``, ``LocalDataset``, listing the files, ``np.load``);
for the DataLoader measures it includes making the dataset and the loader and starting its workers
(forked). The tables show medians. Peak RSS: for ``shuffled``, the process's ``VmHWM`` (its
``ru_maxrss`` would still hold the peak of the process that forked it before ``exec``); for
``map``/``iter``, the largest DataLoader worker's ``ru_maxrss`` (``RUSAGE_CHILDREN``, read once the
loader has joined its workers). Both include the imports (a forked worker starts with its parent's
private pages), and the pages of memory-mapped files that were touched (Arrow IPC, HF, the ``.npy``),
which are the OS's page cache, shared, not the process's own memory. So the tables also give, in
parentheses, the peak anonymous RSS (``RssAnon``: private memory only), sampled every 20 ms by a
thread of the run for the process and each of its children.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
IMAGES = DATA / "images"
DOUBLED = DATA / "images-x2"

READERS = (
    "floor", "parquet", "parquet-cache", "arrow", "arrow-unchecked", "arrow-torch-loader", "hf", "mds"
)  # fmt: skip
DATASETS = ("images", "tensors")
MEASURES = ("sequential", "shuffled", "random", "map", "iter")
READER_NAMES = {
    "floor": "floor (files / .npy)",
    "parquet": "recordmill parquet",
    "parquet-cache": "recordmill parquet, through the disk cache (filled)",
    "arrow": "recordmill arrow",
    "arrow-unchecked": "recordmill arrow, checksums=False",
    "arrow-torch-loader": "recordmill arrow, torch's own DataLoader",
    "hf": "HF datasets",
    "mds": "MDS (streaming)",
}
COLUMNS = {"images": ["label", "data", "file_name"], "tensors": ["label", "x"]}
VALUE_COLUMN = {"images": "data", "tensors": "x"}
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff")

SEED = 0
BATCH = 256
LOADER_BATCH = 64
LOADER_WORKERS = 2
RANDOM_READS = 2000
PARTITIONS = 4
SHAPE = (128, 128, 3)
TENSOR_SCHEMA = {"label": "int64", "x": {"type": "uint8", "shape": list(SHAPE)}}
RSS_FLAT = 1.2  # the --double goal: peak RSS at twice the rows within this factor of 1x

TENSOR_PLUGIN = """
import sys

sys.path.insert(0, {here!r})
from bench_read import PARTITIONS, TENSOR_SCHEMA, tensor_row


def add_options(parser):
    parser.add_argument("--rows", type=int, default=4000)


def task_number():
    return PARTITIONS


def schema(options):
    return TENSOR_SCHEMA


def dict_data(task_id, options):
    first, stop = (t * options.rows // PARTITIONS for t in (task_id, task_id + 1))
    for i in range(first, stop):
        label, x = tensor_row(i)
        yield {{"label": label, "x": x}}
"""


# --- the rows ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=128)
def _gradient(label: int) -> np.ndarray:
    h, w, _ = SHAPE
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack([xx * 255 // w, yy * 255 // h, (xx + yy + label) * 255 // (w + h + 100)], -1)


def tensor_row(i: int) -> tuple[int, np.ndarray]:
    """Row ``i`` of the tensors dataset: a label in 0..99 and a gradient with seeded noise."""
    rng = np.random.default_rng([SEED, i])
    label = int(rng.integers(0, 100))
    noise = rng.integers(-20, 21, size=SHAPE, dtype=np.int16)
    return label, np.clip(_gradient(label) + noise, 0, 255).astype(np.uint8)


def list_images(root: Path) -> list[tuple[Path, int, str]]:
    """(path, label, file_name) of every image, in the imagenet plugin's order: class folders
    sorted by name (label = position), files sorted by name."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    out = []
    for label, synset in enumerate(classes):
        folder = root / synset
        names = sorted(
            e.name
            for e in os.scandir(folder)
            if e.is_file() and e.name.lower().endswith(IMAGE_SUFFIXES)
        )
        out.extend((folder / name, label, f"{synset}/{name}") for name in names)
    return out


def image_rows(root: str) -> Iterator[dict[str, Any]]:
    for path, label, name in list_images(Path(root)):
        yield {"label": label, "data": path.read_bytes(), "file_name": name}


def tensor_rows(rows: int) -> Iterator[dict[str, Any]]:
    for i in range(rows):
        label, x = tensor_row(i)
        yield {"label": label, "x": x}


def kind_of(dataset: str) -> str:
    return "tensors" if dataset == "tensors" else "images"


def random_indices(rows: int) -> np.ndarray:
    return np.random.default_rng(SEED).integers(0, rows, size=RANDOM_READS)


def permutation(rows: int) -> np.ndarray:
    return np.random.default_rng(SEED).permutation(rows)


# --- where things are -------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    root: Path
    small: bool

    @property
    def tensor_count(self) -> int:
        return 300 if self.small else 4000

    def source(self, dataset: str) -> Path:
        if dataset == "tensors":
            return self.root / "tensors-floor"
        if self.small:
            return self.root / ("images-x2-src" if dataset == "images-x2" else "images-src")
        return DOUBLED if dataset == "images-x2" else IMAGES

    def path(self, reader: str, dataset: str) -> Path:
        if reader == "floor":
            return self.source(dataset)
        if reader in ("arrow-unchecked", "arrow-torch-loader"):  # the same files, read otherwise
            reader = "arrow"
        if reader == "parquet-cache":  # the same files, read through the disk cache
            reader = "parquet"
        return self.root / f"{dataset}-{reader}"

    @property
    def cache(self) -> Path:
        """The disk cache of the ``parquet-cache`` reader (filled before the rounds)."""
        return self.root / "cache"


# --- what a run counts ------------------------------------------------------------------------


@dataclass
class Tally:
    """Rows seen, the sum of their labels and of their values (bytes, or pixel values)."""

    rows: int = 0
    labels: int = 0
    values: int = 0

    def batch(self, kind: str, labels: Any, values: Any) -> None:
        labels = np.asarray(labels)
        self.rows += len(labels)
        self.labels += int(labels.sum())
        if kind == "images":
            self.values += sum(len(v) for v in values)
        else:
            self.values += int(np.asarray(values).sum(dtype=np.int64))

    def row(self, kind: str, label: Any, value: Any) -> None:
        self.rows += 1
        self.labels += int(label)
        if kind == "images":
            self.values += len(value)
        else:
            self.values += int(np.asarray(value).sum(dtype=np.int64))


@dataclass
class Expected:
    labels: np.ndarray
    values: np.ndarray

    def of(self, measure: str) -> Tally:
        if measure == "random":
            rows = random_indices(len(self.labels))
            labels, values = self.labels[rows], self.values[rows]
        else:
            labels, values = self.labels, self.values
        return Tally(len(labels), int(labels.sum()), int(values.sum()))


def expected(layout: Layout, dataset: str) -> Expected:
    """Per-row labels and values from the source: file sizes, or the saved tensor sums."""
    if kind_of(dataset) == "tensors":
        saved = np.load(layout.source(dataset) / "expected.npz")
        return Expected(saved["labels"], saved["values"])
    files = list_images(layout.source(dataset))
    return Expected(
        np.array([label for _, label, _ in files], dtype=np.int64),
        np.array([p.stat().st_size for p, _, _ in files], dtype=np.int64),
    )


# --- readers: each measure opens the dataset and reads it (timed) ------------------------------


class Reader:
    """One library reading one dataset; ``__init__`` does the imports (not timed)."""

    def __init__(self, layout: Layout, reader: str, dataset: str, measure: str) -> None:
        self.path = layout.path(reader, dataset)
        self.kind = kind_of(dataset)
        self.columns = COLUMNS[self.kind]
        self.value = VALUE_COLUMN[self.kind]
        self.loader: Any = None  # the DataLoader class the reader's docs use (None: torch's)
        if measure in ("map", "iter"):
            import torch.utils.data  # noqa: F401

    def open(self) -> Any:
        """A map-style dataset (``len``, ``[i]``) for the row-by-row measures below."""
        raise NotImplementedError

    def sequential(self) -> Tally:
        ds = self.open()
        return self.rows_by_index(ds.__getitem__, range(len(ds)))

    def shuffled(self) -> Tally:
        ds = self.open()
        return self.rows_by_index(ds.__getitem__, permutation(len(ds)))

    def random(self) -> Tally:
        ds = self.open()
        return self.rows_by_index(ds.__getitem__, random_indices(len(ds)))

    def map_dataset(self) -> Any:
        raise NotImplementedError

    def iterable_dataset(self) -> Any:
        raise NotImplementedError

    def rows_by_index(self, get: Callable[[int], dict[str, Any]], order: Iterable[int]) -> Tally:
        tally = Tally()
        for i in order:
            row = get(int(i))
            tally.row(self.kind, row["label"], row[self.value])
        return tally


class FloorImages:
    """The floor's map-style dataset: one file read per row."""

    def __init__(self, root: Path) -> None:
        self.files = [(path, label) for path, label, _ in list_images(root)]

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> dict[str, Any]:
        path, label = self.files[i]
        return {"label": label, "data": path.read_bytes()}


class FloorTensors:
    """The floor's map-style dataset: rows of the memory-mapped ``.npy``."""

    def __init__(self, folder: Path) -> None:
        self.x = np.load(folder / "x.npy", mmap_mode="r")
        self.labels = np.load(folder / "label.npy")

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"label": int(self.labels[i]), "x": self.x[i]}


@functools.cache
def _permuted_iterable() -> type:
    """A torch IterableDataset over a map-style one: each worker reads its share of the seeded
    permutation. Made on first use so that runs without a DataLoader do not import torch."""
    from torch.utils.data import IterableDataset, get_worker_info

    class PermutedIterable(IterableDataset):
        def __init__(self, rows: Any) -> None:
            self.rows = rows

        def __iter__(self) -> Iterator[dict[str, Any]]:
            info = get_worker_info()
            worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
            for i in permutation(len(self.rows))[worker::workers]:
                yield self.rows[int(i)]

    return PermutedIterable


class Floor(Reader):
    def open(self) -> FloorImages | FloorTensors:
        return FloorImages(self.path) if self.kind == "images" else FloorTensors(self.path)

    def _tensor_batches(self, shuffle: bool) -> Tally:
        """Batches of 256 rows of the ``.npy``: slices, or fancy indexing in permuted order."""
        ds = FloorTensors(self.path)
        order = permutation(len(ds)) if shuffle else None
        tally = Tally()
        for lo in range(0, len(ds), BATCH):
            rows = slice(lo, lo + BATCH) if order is None else order[lo : lo + BATCH]
            tally.batch(self.kind, ds.labels[rows], ds.x[rows])
        return tally

    def sequential(self) -> Tally:
        if self.kind == "tensors":
            return self._tensor_batches(shuffle=False)
        return super().sequential()

    def shuffled(self) -> Tally:
        if self.kind == "tensors":
            return self._tensor_batches(shuffle=True)
        return super().shuffled()

    def map_dataset(self) -> Any:
        return self.open()

    def iterable_dataset(self) -> Any:
        return _permuted_iterable()(self.open())


class Recordmill(Reader):
    def __init__(self, layout: Layout, reader: str, dataset: str, measure: str) -> None:
        super().__init__(layout, reader, dataset, measure)
        import recordmill
        import recordmill.read.dataset  # recordmill imports its names when first used

        self.recordmill = recordmill
        self.checksums = reader != "arrow-unchecked"
        self.cache = {"cache_dir": layout.cache} if reader == "parquet-cache" else {}
        if measure in ("map", "iter"):
            import recordmill.torch

            if reader != "arrow-torch-loader":  # the loader recordmill's docs train with
                self.loader = recordmill.torch.DataLoader

    def _batches(self, **shuffle: Any) -> Tally:
        ds = self.recordmill.open(str(self.path), checksums=self.checksums, **self.cache)
        tally = Tally()
        for batch in ds.iter_batches(BATCH, columns=self.columns, format="numpy", **shuffle):
            tally.batch(self.kind, batch["label"], batch[self.value])
        return tally

    def sequential(self) -> Tally:
        return self._batches()

    def shuffled(self) -> Tally:
        return self._batches(shuffle=True, seed=SEED)

    def random(self) -> Tally:
        ds = self.recordmill.open(str(self.path), **self.cache).select(self.columns)
        return self.rows_by_index(ds.__getitem__, random_indices(len(ds)))

    def map_dataset(self) -> Any:
        return self.recordmill.torch.MapDataset(self.path, columns=self.columns, **self.cache)

    def iterable_dataset(self) -> Any:
        return self.recordmill.torch.IterableDataset(
            self.path,
            columns=self.columns,
            shuffle=True,
            seed=SEED,
            batch_size=LOADER_BATCH,
            **self.cache,
        )


class HuggingFace(Reader):
    def __init__(self, layout: Layout, reader: str, dataset: str, measure: str) -> None:
        super().__init__(layout, reader, dataset, measure)
        import datasets

        datasets.disable_progress_bars()
        self.datasets = datasets

    def open(self) -> Any:
        return self.datasets.load_from_disk(str(self.path))

    def _batches(self, ds: Any) -> Tally:
        tally = Tally()
        for batch in ds.with_format("numpy").iter(batch_size=BATCH):
            tally.batch(self.kind, batch["label"], batch[self.value])
        return tally

    def sequential(self) -> Tally:
        return self._batches(self.open())

    def shuffled(self) -> Tally:
        return self._batches(self.open().shuffle(seed=SEED, keep_in_memory=True))

    def random(self) -> Tally:
        ds = self.map_dataset()
        return self.rows_by_index(ds.__getitem__, random_indices(len(ds)))

    def map_dataset(self) -> Any:
        ds = self.open()
        return ds.with_format("numpy") if self.kind == "tensors" else ds

    def iterable_dataset(self) -> Any:
        ds = self.open().to_iterable_dataset(num_shards=PARTITIONS)
        ds = ds.shuffle(seed=SEED, buffer_size=1000)
        return ds.with_format("numpy") if self.kind == "tensors" else ds


class Mosaic(Reader):
    def __init__(self, layout: Layout, reader: str, dataset: str, measure: str) -> None:
        super().__init__(layout, reader, dataset, measure)
        import streaming

        self.streaming = streaming

    def open(self) -> Any:
        return self.streaming.LocalDataset(local=str(self.path))

    def map_dataset(self) -> Any:
        return self.open()

    def iterable_dataset(self) -> Any:
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        return self.streaming.StreamingDataset(
            local=str(self.path), shuffle=True, shuffle_seed=SEED, batch_size=LOADER_BATCH
        )


READER_CLASSES: dict[str, type[Reader]] = {
    "floor": Floor,
    "parquet": Recordmill,
    "parquet-cache": Recordmill,
    "arrow": Recordmill,
    "arrow-unchecked": Recordmill,
    "arrow-torch-loader": Recordmill,
    "hf": HuggingFace,
    "mds": Mosaic,
}


def loader_epoch(dataset: Any, kind: str, map_style: bool, own: Any = None) -> Tally:
    """One epoch of a DataLoader (batches of 64, 2 workers): torch's, or the reader's ``own``
    class; shuffled by the sampler when ``map_style`` (seeded), by the dataset otherwise."""
    import torch
    from torch.utils.data import DataLoader

    shuffle: dict[str, Any] = {}
    if map_style and own is not None:  # recordmill's: its own seeded sampler
        shuffle = {"shuffle": True, "seed": SEED}
    elif map_style:
        shuffle = {"shuffle": True, "generator": torch.Generator().manual_seed(SEED)}
    loader = (own or DataLoader)(
        dataset, batch_size=LOADER_BATCH, num_workers=LOADER_WORKERS, **shuffle
    )
    tally = Tally()
    for batch in loader:
        tally.batch(kind, batch["label"], batch[VALUE_COLUMN[kind]])
    return tally


def _status_mb(field: str, pid: int | str = "self") -> float:
    """A memory figure of /proc/PID/status in MB (0 when the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0.0


class AnonSampler(threading.Thread):
    """The largest ``RssAnon`` (private memory: the RSS less file pages, such as memory-mapped
    data files) of this process and of any one child (a DataLoader worker), every 20 ms."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.done = threading.Event()
        self.own = 0.0
        self.child = 0.0

    def run(self) -> None:
        children = f"/proc/{os.getpid()}/task/{os.getpid()}/children"
        while not self.done.wait(0.02):
            self.own = max(self.own, _status_mb("RssAnon"))
            with open(children) as f:
                pids = f.read().split()
            self.child = max([self.child, *(_status_mb("RssAnon", pid) for pid in pids)])

    def stop(self) -> None:
        self.done.set()
        self.join()
        self.own = max(self.own, _status_mb("RssAnon"))


def run_one(layout: Layout, reader: str, dataset: str, measure: str) -> dict[str, Any]:
    """One case in this process: imports first, then the timed open-and-read."""
    source = READER_CLASSES[reader](layout, reader, dataset, measure)
    kind = kind_of(dataset)
    work: dict[str, Callable[[], Tally]] = {
        "sequential": source.sequential,
        "shuffled": source.shuffled,
        "random": source.random,
        "map": lambda: loader_epoch(source.map_dataset(), kind, True, source.loader),
        "iter": lambda: loader_epoch(source.iterable_dataset(), kind, False, source.loader),
    }
    rss_start = _status_mb("VmRSS")
    sampler = AnonSampler()
    sampler.start()
    started = time.perf_counter()
    tally = work[measure]()
    seconds = time.perf_counter() - started
    sampler.stop()
    result = {
        "reader": reader,
        "dataset": dataset,
        "measure": measure,
        "seconds": seconds,
        "rows": tally.rows,
        "labels": tally.labels,
        "values": tally.values,
        "rss_start_mb": rss_start,
        # VmHWM, not RUSAGE_SELF: after exec, ru_maxrss still holds the forking parent's peak.
        "rss_peak_mb": _status_mb("VmHWM"),
        "anon_peak_mb": sampler.own,
    }
    if measure in ("map", "iter"):
        result["worker_peak_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        result["worker_anon_peak_mb"] = sampler.child
    return result


# --- writing the datasets (once) --------------------------------------------------------------


def _finish(partial: Path, path: Path) -> None:
    partial.rename(path)
    print(f"wrote {path}", file=sys.stderr)


def _fresh(path: Path) -> Path:
    partial = path.with_name(path.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    return partial


def write_floor_tensors(layout: Layout) -> None:
    path = layout.source("tensors")
    partial = _fresh(path)
    partial.mkdir(parents=True)
    rows = layout.tensor_count
    x = np.lib.format.open_memmap(
        partial / "x.npy", mode="w+", dtype=np.uint8, shape=(rows, *SHAPE)
    )
    labels = np.empty(rows, dtype=np.int64)
    values = np.empty(rows, dtype=np.int64)
    for i in range(rows):
        labels[i], x[i] = tensor_row(i)
        values[i] = int(x[i].sum(dtype=np.int64))
    x.flush()
    del x
    np.save(partial / "label.npy", labels)
    np.savez(partial / "expected.npz", labels=labels, values=values)
    _finish(partial, path)


def write_recordmill(layout: Layout, dataset: str, fmt: str) -> None:
    import recordmill

    path = layout.path(fmt, dataset)  # written in place: a failed write leaves no output
    common = {
        "partitions": PARTITIONS,
        "workers": 2,
        "format": fmt,
        "overwrite": True,
        "progress": False,
    }
    if kind_of(dataset) == "images":
        options = {"image_dir": str(layout.source(dataset))}
        recordmill.write("imagenet", path, options=options, **common)
    else:
        with tempfile.TemporaryDirectory(prefix="bench-read-plugin-") as tmp:
            plugin = Path(tmp) / "tensors"
            plugin.mkdir()
            (plugin / "plugin.py").write_text(TENSOR_PLUGIN.format(here=str(HERE)))
            recordmill.write(plugin, path, options={"rows": layout.tensor_count}, **common)
    print(f"wrote {path}", file=sys.stderr)


def hf_rows(kind: str, source: str, rows: int) -> Iterator[dict[str, Any]]:
    """The rows for Dataset.from_generator (module level: HF fingerprints the function)."""
    yield from image_rows(source) if kind == "images" else tensor_rows(rows)


def write_hf(layout: Layout, dataset: str) -> None:
    import datasets

    datasets.disable_progress_bars()
    kind = kind_of(dataset)
    if kind == "images":
        features = datasets.Features(
            {
                "label": datasets.Value("int64"),
                "data": datasets.Value("binary"),
                "file_name": datasets.Value("string"),
            }
        )
    else:
        features = datasets.Features(
            {"label": datasets.Value("int64"), "x": datasets.Array3D(shape=SHAPE, dtype="uint8")}
        )
    path = layout.path("hf", dataset)
    partial = _fresh(path)
    with tempfile.TemporaryDirectory(prefix="hf-cache-", dir=layout.root) as cache:
        ds = datasets.Dataset.from_generator(
            hf_rows,
            features=features,
            gen_kwargs={
                "kind": kind,
                "source": str(layout.source(dataset)),
                "rows": layout.tensor_count,
            },
            cache_dir=cache,
        )
        ds.save_to_disk(str(partial), num_shards=PARTITIONS)
        del ds
    _finish(partial, path)


def write_mds(layout: Layout, dataset: str) -> None:
    from streaming import MDSWriter

    kind = kind_of(dataset)
    if kind == "images":
        columns = {"label": "int", "data": "bytes", "file_name": "str"}
        rows: Iterable[dict[str, Any]] = image_rows(str(layout.source(dataset)))
        total = sum(p.stat().st_size for p, _, _ in list_images(layout.source(dataset)))
    else:
        columns = {"label": "int", "x": f"ndarray:uint8:{','.join(map(str, SHAPE))}"}
        rows = tensor_rows(layout.tensor_count)
        total = layout.tensor_count * int(np.prod(SHAPE))
    path = layout.path("mds", dataset)
    partial = _fresh(path)
    size_limit = max(1 << 16, int(total * 1.05) // PARTITIONS)  # about 4 shards
    with MDSWriter(out=str(partial), columns=columns, size_limit=size_limit) as writer:
        for row in rows:
            writer.write(row)
    _finish(partial, path)


def ensure_images(layout: Layout, double: bool) -> None:
    images = layout.source("images")
    if not images.is_dir():
        command = [sys.executable, str(HERE / "make_imagefolder.py"), str(images)]
        if layout.small:
            command += ["--classes", "4", "--per-class", "75"]
        subprocess.run(command, check=True)
    doubled = layout.source("images-x2")
    if double and not doubled.is_dir():
        # Twice the class folders, hard links to the same files: twice the rows, no extra disk.
        for copy in range(2):
            for folder in sorted(images.iterdir()):
                target = doubled / f"{folder.name}-{copy}"
                target.mkdir(parents=True)
                for f in folder.iterdir():
                    os.link(f, target / f.name)


def prepare(layout: Layout, cases: list[tuple[str, str, str]], rewrite: bool) -> None:
    """Write every dataset the cases need that is not there yet (all of them with ``rewrite``)."""
    layout.root.mkdir(parents=True, exist_ok=True)
    ensure_images(layout, any(d == "images-x2" for _, d, _ in cases))
    needed = {(r, d) for r, d, _ in cases}
    if any(d == "tensors" for _, d, _ in cases):
        needed.add(("floor", "tensors"))  # the tensors' source of the expected figures
    writers: dict[str, Callable[[Layout, str], None]] = {
        "parquet": lambda lay, d: write_recordmill(lay, d, "parquet"),
        "arrow": lambda lay, d: write_recordmill(lay, d, "arrow"),
        "arrow-unchecked": lambda lay, d: write_recordmill(lay, d, "arrow"),
        "arrow-torch-loader": lambda lay, d: write_recordmill(lay, d, "arrow"),
        "hf": write_hf,
        "mds": write_mds,
    }
    for reader, dataset in sorted(needed):
        if reader == "floor" and dataset != "tensors":
            continue  # the image folder itself
        path = layout.path(reader, dataset)
        if rewrite and path.exists():
            shutil.rmtree(path)
        if not path.exists():
            if reader == "floor":
                write_floor_tensors(layout)
            else:
                writers[reader](layout, dataset)


def fill_cache(layout: Layout, datasets: Iterable[str]) -> None:
    """Touch every part of the Parquet datasets read through the disk cache once: the
    ``parquet-cache`` figures are those after the first touch."""
    import recordmill

    for dataset in datasets:
        recordmill.open(str(layout.path("parquet", dataset)), cache_dir=layout.cache).to_arrow()


def warm(paths: Iterable[Path]) -> None:
    """Read every file once, so that every round finds the page cache warm."""
    for root in paths:
        for folder, _, names in os.walk(root):
            for name in names:
                with open(os.path.join(folder, name), "rb") as f:
                    while f.read(1 << 24):
                        pass


# --- running and reporting --------------------------------------------------------------------


def mds_missing() -> str | None:
    """Why MDS cannot be benchmarked here, or None."""
    try:
        import streaming  # noqa: F401
    except Exception as e:  # an import error, or a version clash inside its imports
        return f"mosaicml-streaming is not importable ({type(e).__name__}: {e})"
    return None


def run_case(
    layout: Layout, case: tuple[str, str, str], timeout: float
) -> tuple[dict[str, Any], list[str]]:
    """One case in a fresh process: its result (``timed_out`` after ``timeout`` seconds, when its
    process and DataLoader workers are killed) and the warnings it printed."""
    command = [sys.executable, __file__, "--one", *case, "--root", str(layout.root)]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        reader, dataset, measure = case
        timed_out = {"reader": reader, "dataset": dataset, "measure": measure}
        return {**timed_out, "seconds": timeout, "timed_out": True}, []
    if process.returncode:
        sys.stderr.write(stderr)
        raise SystemExit(f"FAILED: {' '.join(case)} exited with {process.returncode} (see above)")
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"FAILED: {' '.join(case)} printed no result:\n{stdout}")
    warned = [line.strip() for line in stderr.splitlines() if "Warning" in line]
    return json.loads(lines[-1]), warned


def check(result: dict[str, Any], want: Tally) -> None:
    got = Tally(result["rows"], result["labels"], result["values"])
    if got != want:
        case = f"{result['reader']} {result['dataset']} {result['measure']}"
        raise SystemExit(f"MISMATCH in {case}: read {got}, expected {want}")


Key = tuple[str, str, str]  # reader, dataset, measure


def median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else None


MEASURE_NAMES = {
    "sequential": "sequential",
    "shuffled": "shuffled",
    "random": "random ds[i]",
    "map": "DataLoader map-style",
    "iter": "DataLoader IterableDataset",
}


def report(
    results: dict[Key, list[dict[str, Any]]],
    readers: Sequence[str],
    datasets: Sequence[str],
    runs: int,
) -> list[str]:
    """The Markdown tables: one per dataset, the goals, and the doubled images."""

    def med(case: Key, key: str = "seconds") -> float | None:
        return median(results.get(case, []), key)

    def slow(case: Key) -> bool:
        return any(r.get("timed_out") for r in results.get(case, []))

    def cell(case: Key) -> str:
        seconds = med(case)
        if seconds is None:
            return "-"
        if slow(case):
            return f"> {seconds:g} s (timed out)"
        dagger = "†" if case[2] == "iter" and case[0] in ("hf", "mds") else ""
        floor = med(("floor", *case[1:])) if case[0] != "floor" else None
        return f"{seconds:.2f}{dagger}" + (f" ({seconds / floor:.1f}x)" if floor else "")

    out = [f"Median of {runs} round(s); seconds, (x the floor's time for the same measure).", ""]
    for dataset in datasets:
        every = [v for k, v in results.items() if k[1] == dataset and k[2] != "random"]
        rows = max((r.get("rows", 0) for runs in every for r in runs), default=0)
        out += [
            f"**{dataset}**" + (f" ({rows:,} rows)" if rows else ""),
            "",
            "| reader | sequential | shuffled | 2,000 random ds[i] | DataLoader map-style "
            "| DataLoader IterableDataset | peak RSS (anon) MB: shuffled / map worker / iter worker |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for reader in readers:
            if not any(k[:2] == (reader, dataset) for k in results):
                continue
            cells = [cell((reader, dataset, m)) for m in MEASURES]
            memory = [
                (med((reader, dataset, m), key), med((reader, dataset, m), anon))
                for m, key, anon in (
                    ("shuffled", "rss_peak_mb", "anon_peak_mb"),
                    ("map", "worker_peak_mb", "worker_anon_peak_mb"),
                    ("iter", "worker_peak_mb", "worker_anon_peak_mb"),
                )
            ]
            rss = " / ".join("-" if a is None else f"{a:.0f} ({b:.0f})" for a, b in memory)
            out.append(f"| {READER_NAMES[reader]} | {' | '.join(cells)} | {rss} |")
        out.append("")
    out += ["† a shard-and-buffer shuffle, not a permutation of all rows.", ""]

    goals = ["| goal | measured | met |", "| --- | ---: | --- |"]

    def goal(text: str, a: Key, b: Key, limit: float, key: str = "seconds") -> None:
        x, y = med(a, key), med(b, key)
        if slow(a) or slow(b):
            goals.append(f"| {text} | timed out | {'no' if slow(a) else '-'} |")
        elif x is None or y is None:
            goals.append(f"| {text} | not measured | - |")
        else:
            goals.append(f"| {text} | {x / y:.2f}x | {'yes' if x / y <= limit else 'no'} |")

    base = [d for d in datasets if d != "images-x2"]
    for d in base:
        for m in MEASURES:
            vs = " (vs HF's map-style)" if m == "iter" else ""
            hf = ("hf", d, "map" if m == "iter" else m)
            goal(f"{d}: arrow <= HF, {MEASURE_NAMES[m]}{vs}", ("arrow", d, m), hf, 1.0)
        for m in ("map", "iter"):  # recordmill's datasets in torch's own loader, as HF's are
            hf = ("hf", d, "map")
            name = f"{d}: arrow in torch's own DataLoader <= HF, {MEASURE_NAMES[m]}"
            goal(name, ("arrow-torch-loader", d, m), hf, 1.0)
    for d in base:
        goal(
            f"{d}: arrow random ds[i] <= 1.5x MDS's",
            ("arrow", d, "random"),
            ("mds", d, "random"),
            1.5,
        )
        goal(
            f"{d}: parquet random ds[i] <= 3x arrow's",
            ("parquet", d, "random"),
            ("arrow", d, "random"),
            3.0,
        )
        goal(
            f"{d}: parquet shuffled <= 2x parquet sequential",
            ("parquet", d, "shuffled"),
            ("parquet", d, "sequential"),
            2.0,
        )
    if "tensors" in base:
        for m in ("map", "iter"):
            goal(
                f"tensors: parquet {MEASURE_NAMES[m]} <= 1.5x arrow's",
                ("parquet", "tensors", m),
                ("arrow", "tensors", m),
                1.5,
            )
    for d in base:
        for fmt in ("parquet", "arrow"):
            goal(
                f"{d}: {fmt} peak RSS, shuffled <= 1.5x HF's",
                (fmt, d, "shuffled"),
                ("hf", d, "shuffled"),
                1.5,
                "rss_peak_mb",
            )
            for m in ("map", "iter"):
                goal(
                    f"{d}: {fmt} peak RSS, {MEASURE_NAMES[m]} worker <= 1.5x HF's map-style worker",
                    (fmt, d, m),
                    ("hf", d, "map"),
                    1.5,
                    "worker_peak_mb",
                )
    if "images-x2" not in datasets:
        return out + goals
    doubled = [
        "",
        "| images x1 -> x2 | seconds | peak RSS MB | peak anon RSS MB |",
        "| --- | ---: | ---: | ---: |",
    ]
    for fmt in ("parquet", "arrow"):
        for m, key, anon in (
            ("shuffled", "rss_peak_mb", "anon_peak_mb"),
            ("map", "worker_peak_mb", "worker_anon_peak_mb"),
            ("iter", "worker_peak_mb", "worker_anon_peak_mb"),
        ):
            one, two = (fmt, "images", m), (fmt, "images-x2", m)
            text = []
            for field, digits in (("seconds", 2), (key, 0), (anon, 0)):
                a, b = med(one, field), med(two, field)
                if slow(one) or slow(two):
                    text.append("timed out")
                else:
                    text.append(
                        f"{a:.{digits}f} -> {b:.{digits}f} ({b / a:.2f}x)" if a and b else "-"
                    )
            what = "shuffled" if m == "shuffled" else f"{MEASURE_NAMES[m]} worker"
            doubled.append(f"| {fmt} {what} | {' | '.join(text)} |")
            goal(f"images x2 / x1: {fmt} peak RSS, {what} <= {RSS_FLAT}x", two, one, RSS_FLAT, key)
            goal(
                f"images x2 / x1: {fmt} peak anon RSS, {what} <= {RSS_FLAT}x",
                two,
                one,
                RSS_FLAT,
                anon,
            )
    return out + goals + doubled


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds (default: 5)")
    parser.add_argument("--datasets", default=",".join(DATASETS), help="images,tensors")
    parser.add_argument("--readers", default=",".join(READERS), help=",".join(READERS))
    parser.add_argument("--measures", default=",".join(MEASURES), help=",".join(MEASURES))
    parser.add_argument("--double", action="store_true", help="also images x2 (recordmill only)")
    parser.add_argument("--small", action="store_true", help="a few hundred rows, own folder")
    parser.add_argument("--rewrite", action="store_true", help="write the datasets again")
    parser.add_argument("--json", type=Path, help="also save every run's result here (JSON lines)")
    parser.add_argument(
        "--timeout", type=float, default=300, help="seconds a case may take (default: 300)"
    )
    parser.add_argument("--one", nargs=3, metavar=("READER", "DATASET", "MEASURE"))
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    root = args.root or DATA / ("bench_read_small" if args.small else "bench_read")
    layout = Layout(root, small=args.small or root.name.endswith("_small"))

    if args.one:
        print(json.dumps(run_one(layout, *args.one)))
        return 0

    def chosen(value: str, allowed: Sequence[str]) -> list[str]:
        items = [v.strip() for v in value.split(",") if v.strip()]
        unknown = [v for v in items if v not in allowed]
        if unknown:
            parser.error(f"unknown {unknown[0]!r}; choose from {', '.join(allowed)}")
        return items

    readers = chosen(args.readers, READERS)
    datasets = chosen(args.datasets, DATASETS)
    measures = chosen(args.measures, MEASURES)
    if "mds" in readers and (reason := mds_missing()):
        print(f"MDS skipped: {reason}", file=sys.stderr)
        readers.remove("mds")
    cases = [(r, d, m) for d in datasets for r in readers for m in measures]
    if args.double:
        datasets.append("images-x2")
        cases += [
            (fmt, "images-x2", m)
            for fmt in ("parquet", "arrow")
            if fmt in readers
            for m in ("shuffled", "map", "iter")
            if m in measures
        ]
    prepare(layout, cases, args.rewrite)
    warm({layout.path(r, d) for r, d, _ in cases})
    fill_cache(layout, {d for r, d, _ in cases if r == "parquet-cache"})
    want = {d: expected(layout, d) for d in datasets}
    results: dict[tuple[str, str, str], list[dict[str, Any]]] = {c: [] for c in cases}
    warnings_seen: dict[str, set[str]] = {}
    started = time.perf_counter()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text("")
    for round_ in range(1, args.runs + 1):
        for case in cases:
            result, warned = run_case(layout, case, args.timeout)
            if not result.get("timed_out"):
                check(result, want[case[1]].of(case[2]))
            results[case].append(result)
            for line in warned:
                warnings_seen.setdefault(re.sub(r"^.*?:\d+: ", "", line), set()).add(" ".join(case))
            elapsed = time.perf_counter() - started
            note = "TIMED OUT" if result.get("timed_out") else f"{result['seconds']:.2f} s"
            print(
                f"[round {round_}/{args.runs}, {elapsed:.0f} s] {' '.join(case)}: {note}",
                file=sys.stderr,
            )
            if args.json:
                with args.json.open("a") as f:
                    f.write(json.dumps(result) + "\n")
    print("\n".join(report(results, readers, datasets, args.runs)))
    if warnings_seen:
        print("\nWarnings printed by the runs:")
        for text, where in sorted(warnings_seen.items()):
            print(f"- {text}\n  in: {', '.join(sorted(where))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
