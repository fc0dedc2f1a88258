"""Tensor benchmark: a fixed-shape tensor column against the same bytes in a plain binary column.

    python benchmarks/bench_tensors.py              # median of 5 interleaved rounds
    python benchmarks/bench_tensors.py --runs 3

For uint8 [128, 128, 3] (2,000 rows, 98 MB) and float32 [3, 224, 224] (200 rows, 120 MB), in
Parquet and in Arrow IPC, each round writes three datasets with ``recordmill.write`` (one
partition, ``--workers 1``, so the format is timed rather than the pool):

- **binary**: the plugin yields ``array.tobytes()`` into a ``bytes`` field: the floor;
- **tensor**: the plugin yields the numpy array into a ``{"type", "shape"}`` field (the default
  tensor layout: raw bytes, dtype and shape in the schema);
- **lists**: the same field with ``"layout": "list"``, nested fixed-size lists (format 1's layout).

and reads each back twice: ``pyarrow`` (``pq.read_table`` / ``ipc.open_file(OSFile).read_all()``),
and
``recordmill.open(...).iter_batches(format="numpy")``, which hands out ``(rows, *shape)`` arrays for
tensors and a list of ``bytes`` for the binary column. Prints each time and its ratio to binary.

Then, with ``--sweep``, where the line between lists and tensors lies: 16 MB of arrays of 2 to
1,024 float32 or uint8 elements, written and read by pyarrow alone (no compression, best of 3
interleaved rounds) as fixed-size lists and as fixed-size binary.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import recordmill

PLUGIN = """
import numpy as np

def add_options(parser):
    parser.add_argument("--dtype", default="uint8")
    parser.add_argument("--shape", default="128,128,3")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--as", dest="kind", default="tensor")

def task_number():
    return 1

def _shape(options):
    return [int(d) for d in options.shape.split(",")]

def schema(options):
    if options.kind == "binary":
        return {"id": "int64", "x": "bytes"}
    layout = {"layout": "list"} if options.kind == "lists" else {}
    return {"id": "int64", "x": {"type": options.dtype, "shape": _shape(options), **layout}}

def dict_data(task_id, options):
    rng = np.random.default_rng(0)
    pool = [(rng.random(_shape(options)) * 255).astype(options.dtype) for _ in range(16)]
    for i in range(options.rows):
        x = pool[i % 16]
        yield {"id": i, "x": x.tobytes() if options.kind == "binary" else x}
"""

CASES = {
    "uint8 [128, 128, 3] x 2,000": {"dtype": "uint8", "shape": "128,128,3", "rows": 2000},
    "float32 [3, 224, 224] x 200": {"dtype": "float32", "shape": "3,224,224", "rows": 200},
}
KINDS = ("binary", "tensor", "lists")


def write(plugin: Path, out: Path, case: dict, kind: str, fmt: str) -> float:
    started = time.perf_counter()
    recordmill.write(
        plugin,
        out,
        options={**case, "kind": kind},
        partitions=1,
        workers=1,
        format=fmt,
        overwrite=True,
        progress=False,
    )
    return time.perf_counter() - started


def read_pyarrow(out: Path, fmt: str) -> float:
    started = time.perf_counter()
    (part,) = out.glob(f"part-*.{fmt}")
    if fmt == "parquet":
        pq.read_table(part)
    else:
        with pa.OSFile(str(part)) as source:  # read, not mapped: the bytes are really fetched
            pa.ipc.open_file(source).read_all()
    return time.perf_counter() - started


def read_recordmill(out: Path) -> float:
    started = time.perf_counter()
    for batch in recordmill.open(str(out)).iter_batches(batch_size=256, columns=["x"]):
        batch["x"]
    return time.perf_counter() - started


def sweep(rounds: int = 3) -> None:
    """Lists against bytes by array size, pyarrow alone: the cost per element of the levels."""
    sizes = (2, 4, 8, 16, 32, 64, 256, 1024)
    best: dict[tuple, float] = {}
    for _ in range(rounds):
        for dtype in ("float32", "uint8"):
            for size in sizes:
                rows = (16 << 20) // (size * np.dtype(dtype).itemsize)
                values = (np.random.default_rng(0).random(rows * size) * 200).astype(dtype)
                columns = {
                    "lists": pa.FixedSizeListArray.from_arrays(pa.array(values), size),
                    "bytes": pa.Array.from_buffers(
                        pa.binary(values.nbytes // rows), rows, [None, pa.py_buffer(values)]
                    ),
                }
                for kind, column in columns.items():
                    table = pa.table({"x": column})
                    sink = pa.BufferOutputStream()
                    started = time.perf_counter()
                    pq.write_table(table, sink, compression="none", use_dictionary=False)
                    written = time.perf_counter() - started
                    data = sink.getvalue()
                    started = time.perf_counter()
                    pq.read_table(pa.BufferReader(data))
                    read = time.perf_counter() - started
                    for step, seconds in (("write", written), ("read", read)):
                        key = (dtype, size, kind, step)
                        best[key] = min(best.get(key, seconds), seconds)
    print("\n| dtype | elements | lists / bytes, write | lists / bytes, read |")
    print("| --- | ---: | ---: | ---: |")
    for dtype in ("float32", "uint8"):
        for size in sizes:
            ratio = {
                step: best[(dtype, size, "lists", step)] / best[(dtype, size, "bytes", step)]
                for step in ("write", "read")
            }
            print(f"| {dtype} | {size} | {ratio['write']:.1f}x | {ratio['read']:.1f}x |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sweep", action="store_true", help="only the lists-or-bytes sweep")
    args = parser.parse_args()
    if args.sweep:
        sweep()
        return 0
    root = Path(tempfile.mkdtemp(prefix="bench-tensors-"))
    try:
        plugin = root / "tensors"
        plugin.mkdir()
        (plugin / "plugin.py").write_text(PLUGIN)
        times: dict[tuple, list[float]] = {}
        for round_ in range(args.runs + 1):  # round 0 warms the page cache and the allocator
            for name, case in CASES.items():
                for fmt in ("parquet", "arrow"):
                    for kind in KINDS:
                        out = root / f"{fmt}-{kind}"
                        measured = {
                            "write": write(plugin, out, case, kind, fmt),
                            "read (pyarrow)": read_pyarrow(out, fmt),
                            "read (recordmill numpy)": read_recordmill(out),
                        }
                        if round_:
                            for step, seconds in measured.items():
                                times.setdefault((name, fmt, step, kind), []).append(seconds)
            print(f"round {round_} done", file=sys.stderr)
        print(f"median of {args.runs} rounds; x = the time over binary's\n")
        print("| tensor | format | step | binary s | tensor s | lists s |")
        print("| --- | --- | --- | ---: | ---: | ---: |")
        for name in CASES:
            for fmt in ("parquet", "arrow"):
                for step in ("write", "read (pyarrow)", "read (recordmill numpy)"):
                    med = {k: statistics.median(times[(name, fmt, step, k)]) for k in KINDS}
                    cells = [f"{med['binary']:.3f}"] + [
                        f"{med[k]:.3f} ({med[k] / med['binary']:.2f}x)" for k in KINDS[1:]
                    ]
                    print(f"| {name} | {fmt} | {step} | " + " | ".join(cells) + " |")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
