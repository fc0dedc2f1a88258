"""Converting files that another tool packed: recordmill against the loop a user would write.

    python benchmarks/bench_convert.py --runs 3
    python benchmarks/bench_convert.py --runs 3 --formats recordio,mindrecord \\
        --mxnet-python /tmp/venv-mxnet/bin/python --mindspore-python /tmp/venv-ms/bin/python
    python benchmarks/bench_convert.py --small --runs 1    # a few hundred records, end to end

For the four built-in plugins that read packed files (recordio, mindrecord, ofrecord,
torchrecord), it makes the inputs once under benchmarks/data/convert-20k/ (git-ignored): the
JPEGs of bench_write's image folder (100 classes of 200 files, or the same files made anew with
make_imagefolder.py and removed once packed: 20,000 JPEGs, about 590 MB) packed as an im2rec
``train.rec`` + ``train.idx``, a 4-shard MindRecord dataset (label int32, data bytes, file_name
string; MindSpore's default 32 MB pages), 4 OFRecord part files (images bytes, labels int32), and a
TorchRecord LMDB of ``Writer(db_num=2)`` (40,000 RGB images of 64 x 64 pixels: TorchRecord stores
decoded pixels). About 2.5 GB on disk in all.

Each command is a whole process, timed with the page cache warm, and its peak memory is the largest
sum of the RSS of the process and its children, sampled every 20 ms; rounds are interleaved and the
table shows medians. The commands, for each format:

- recordmill ``writer.py --script NAME --partitions 4`` with ``--workers 2`` and ``--workers 1``
  (recordio also with ``--tasks 4``: its default is a task per 32 MB of the file);
- the plain loop (``convert_baseline.py``): one process reading the records the simple way, batches
  of 1,000 dicts -> ``pa.Table.from_pylist`` -> one ``pq.ParquetWriter``, as ``baseline.py``;
- the original tool's own reader writing the same Parquet, when its Python is given
  (``--mxnet-python``: ``MXIndexedRecordIO``; ``--mindspore-python``: ``FileReader``);
- the floors: ``cat`` of the input files, and Python reading their bytes.

Every output is checked against the inputs (row count, sum of the labels, total bytes of the image
column); a run that wrote other data stops the benchmark.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / "data"
FORMATS = ("recordio", "mindrecord", "ofrecord", "torchrecord")
# (label column, image column) of each format's output, recordmill's and the loops' alike.
COLUMNS = {
    "recordio": ("label", "data"),
    "mindrecord": ("label", "data"),
    "ofrecord": ("labels", "images"),
    "torchrecord": ("label", "image"),
}
SIZES = {
    # classes x JPEGs per class (the first classes of bench_write's folder), TorchRecord records
    False: {"classes": 100, "per_class": 200, "tensors": 40_000, "side": 64},
    True: {"classes": 4, "per_class": 50, "tensors": 400, "side": 64},
}


# ---- the inputs -----------------------------------------------------------------------------------


def jpeg_rows(root: Path, small: bool) -> list[tuple[int, bytes, str]]:
    """(label, JPEG bytes, file name) of the source images, in sorted order."""
    size = SIZES[small]
    images = DATA / "images"  # bench_write's folder: the same generator, seed and names
    if small or not images.is_dir():
        images = root / "images"
        if not images.is_dir():
            subprocess.run(
                [
                    sys.executable,
                    HERE / "make_imagefolder.py",
                    images,
                    "--classes",
                    str(size["classes"]),
                    "--per-class",
                    str(size["per_class"]),
                ],
                check=True,
            )
    folders = sorted(d for d in images.iterdir() if d.is_dir())[: size["classes"]]
    rows = []
    for label, folder in enumerate(folders):
        for path in sorted(folder.iterdir())[: size["per_class"]]:
            rows.append((label, path.read_bytes(), f"{folder.name}/{path.name}"))
    return rows


def quarters(items: list, parts: int = 4) -> list[list]:
    bounds = [len(items) * k // parts for k in range(parts + 1)]
    return [items[bounds[k] : bounds[k + 1]] for k in range(parts)]


def make_inputs(root: Path, small: bool) -> dict:
    """Make the four inputs under ``root`` unless made already; their files and expected figures."""
    done = root / "expected.json"
    if done.is_file():
        return json.loads(done.read_text())
    from recordmill.inputs import mindrecord_writer, ofrecord, recordio, torchrecord

    start = time.perf_counter()
    for name in FORMATS:
        shutil.rmtree(root / name, ignore_errors=True)
    rows = jpeg_rows(root, small)
    labels = sum(label for label, _, _ in rows)
    jpeg_bytes = sum(len(data) for _, data, _ in rows)
    expected = {}

    rec = root / "recordio" / "train.rec"
    rec.parent.mkdir(parents=True)
    payloads = [recordio.pack(float(label), i, data) for i, (label, data, _) in enumerate(rows)]
    recordio.write_records(rec, payloads, keys=list(range(len(rows))))
    expected["recordio"] = {"input": rec, "files": [rec, rec.with_suffix(".idx")]}

    schema = {
        "label": {"type": "int32"},
        "data": {"type": "bytes"},
        "file_name": {"type": "string"},
    }
    shards = mindrecord_writer.write_dataset(
        root / "mindrecord" / "train.mindrecord",
        schema,
        [{"label": label, "data": data, "file_name": name} for label, data, name in rows],
        shard_num=4,
        page_size=1 << 25,  # MindSpore's FileWriter defaults: 32 MB pages, a 16 MB header
        header_size=1 << 24,
    )
    expected["mindrecord"] = {"input": shards[0], "files": shards}

    folder = root / "ofrecord"
    folder.mkdir(parents=True)
    parts = []
    for k, chunk in enumerate(quarters(rows)):
        payloads = [
            ofrecord.encode_ofrecord({"images": ("bytes", [data]), "labels": ("int32", [label])})
            for label, data, _ in chunk
        ]
        ofrecord.write_records(folder / f"part-{k}", payloads)
        parts.append(folder / f"part-{k}")
    expected["ofrecord"] = {"input": folder, "files": parts}
    for name in ("recordio", "mindrecord", "ofrecord"):
        expected[name] |= {"rows": len(rows), "label_sum": labels, "image_bytes": jpeg_bytes}

    # TorchRecord: decoded RGB pixels, a label-coloured gradient with seeded noise.
    count, side = SIZES[small]["tensors"], SIZES[small]["side"]
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:side, 0:side]
    tensor_labels = [i % 20 for i in range(count)]
    records = []
    for label in tensor_labels:
        base = np.stack([xx * 4, yy * 4, np.full_like(xx, 12 * label)], axis=-1)
        pixels = np.clip(base + rng.integers(0, 32, size=(side, side, 3)), 0, 255)
        records.append(torchrecord.encode_record(pixels.astype(np.uint8), label))
    folder = root / "torchrecord"
    dbs = []
    for k, chunk in enumerate(quarters(records, 2)):  # Writer(db_num=2): db0, db1
        torchrecord.write_database(folder / f"db{k}", chunk)
        dbs.append(folder / f"db{k}" / "data.mdb")
    expected["torchrecord"] = {
        "input": folder,
        "files": dbs,
        "rows": count,
        "label_sum": sum(tensor_labels),
        "image_bytes": count * side * side * 3,
    }
    for spec in expected.values():
        spec["input"] = str(spec["input"])
        spec["files"] = [str(f) for f in spec["files"]]
    done.write_text(json.dumps(expected, indent=1))
    if (root / "images").is_dir():  # made only to be packed: the packed copies are what is read
        shutil.rmtree(root / "images")
    print(f"made the inputs in {root} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return expected


# ---- running and checking -------------------------------------------------------------------------


def measure(command: list[str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and peak summed RSS (MB) of the command's process tree."""
    with tempfile.TemporaryFile() as errors:  # not a pipe: a chatty tool must not block on it
        start = time.perf_counter()
        process = psutil.Popen(command, stdout=subprocess.DEVNULL, stderr=errors, cwd=cwd)
        peak = 0
        while process.poll() is None:
            try:
                tree = [process, *process.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
            except psutil.Error:
                pass
            time.sleep(0.02)
        seconds = time.perf_counter() - start
        if process.returncode != 0:
            errors.seek(0)
            message = errors.read().decode(errors="replace")[-4000:]
            raise SystemExit(f"{' '.join(map(str, command))} failed:\n{message}")
    return seconds, peak / 1e6


def image_bytes(column: pa.ChunkedArray) -> int:
    """The bytes of an image column: JPEG bytes, pixel bytes, or a fixed-shape tensor's values."""
    total = 0
    for chunk in column.chunks:
        if isinstance(chunk, pa.ExtensionArray):
            chunk = chunk.storage
        kind = chunk.type
        valid = len(chunk) - chunk.null_count
        if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            total += pc.sum(pc.binary_length(chunk)).as_py() or 0
        elif pa.types.is_fixed_size_binary(kind):
            total += kind.byte_width * valid
        elif pa.types.is_fixed_size_list(kind):
            total += kind.list_size * kind.value_type.bit_width // 8 * valid
        else:
            raise SystemExit(f"no image bytes in a column of {kind}")
    return total


def output_figures(path: Path, fmt: str) -> dict:
    """rows, label_sum, image_bytes of a Parquet file or of recordmill's dataset folder."""
    files = [path] if path.is_file() else sorted(path.glob("*.parquet"))
    files = [f for f in files if not f.name.startswith(("_", "."))]
    label, image = COLUMNS[fmt]
    rows = labels = size = 0
    for f in files:
        table = pq.read_table(f, columns=[label, image])
        rows += table.num_rows
        labels += round(pc.sum(table[label]).as_py() or 0)
        size += image_bytes(table[image])
    return {"rows": rows, "label_sum": labels, "image_bytes": size}


def writer(*args: object) -> list[str]:
    return [sys.executable, str(REPO / "writer.py"), "--quiet", "--overwrite", *map(str, args)]


def commands(
    inputs: dict, formats: list[str], work: Path, mxnet: str | None, mindspore: str | None
) -> dict[str, tuple[list[str], str, Path | None]]:
    """name -> (command, format, output to check or None)."""
    out, plain = work / "dataset", work / "plain.parquet"
    baseline = str(HERE / "convert_baseline.py")
    found = {}
    for fmt in formats:
        spec = inputs[fmt]
        ours = ["--script", fmt, "--input", spec["input"], "--output", out, "--partitions", 4]
        runs = {
            "recordmill --workers 2": writer(*ours, "--workers", 2),
            "recordmill --workers 1": writer(*ours, "--workers", 1),
        }
        if fmt == "recordio":  # one .rec is one task by default: no second worker without --tasks
            runs["recordmill --workers 2 --tasks 4"] = writer(*ours, "--workers", 2, "--tasks", 4)
        for name, command in runs.items():
            found[f"{fmt}: {name}"] = (command, fmt, out)
        found[f"{fmt}: plain loop"] = (
            [sys.executable, baseline, fmt, spec["input"], str(plain)],
            fmt,
            plain,
        )
        if fmt == "recordio" and mxnet:
            found["recordio: MXNet 1.9 MXIndexedRecordIO loop"] = (
                [mxnet, baseline, "mxnet", spec["input"], str(plain)],
                fmt,
                plain,
            )
        if fmt == "mindrecord" and mindspore:
            found["mindrecord: MindSpore 2.10 FileReader loop (num_consumer=2)"] = (
                [mindspore, baseline, "mindspore", spec["input"], str(plain)],
                fmt,
                plain,
            )
        found[f"{fmt}: cat the input files (floor)"] = (["cat", *spec["files"]], fmt, None)
        found[f"{fmt}: Python reads the input files (floor)"] = (
            [sys.executable, baseline, "read", *spec["files"]],
            fmt,
            None,
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--mxnet-python", help="a Python with MXNet and pyarrow (the MXNet row)")
    parser.add_argument(
        "--mindspore-python", help="a Python with MindSpore and pyarrow (the MindSpore row)"
    )
    parser.add_argument(
        "--small", action="store_true", help="a few hundred records: checks every command works"
    )
    args = parser.parse_args()
    formats = args.formats.split(",")
    unknown = set(formats) - set(FORMATS)
    if unknown:
        parser.error(f"unknown formats {sorted(unknown)}; choose from {', '.join(FORMATS)}")
    root = DATA / ("convert-small" if args.small else "convert-20k")
    work = DATA / "convert-out"
    inputs = make_inputs(root, args.small)
    for fmt in formats:  # warm the page cache
        for f in inputs[fmt]["files"]:
            Path(f).read_bytes()
    todo = commands(inputs, formats, work, args.mxnet_python, args.mindspore_python)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in todo}
    for _ in range(args.runs):  # interleaved, so that a noisy moment hits every command alike
        for name, (command, fmt, output) in todo.items():
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            results[name].append(measure(command, work))
            if output is not None:
                got = output_figures(output, fmt)
                want = {k: inputs[fmt][k] for k in got}
                if got != want:
                    raise SystemExit(f"{name} wrote other data: {got}, the inputs hold {want}")
    shutil.rmtree(work, ignore_errors=True)

    for fmt in formats:
        spec = inputs[fmt]
        # On disk: MindRecord's 16 MB header and the ends of its 32 MB pages are holes.
        spec["mb"] = sum(Path(f).stat().st_blocks * 512 for f in spec["files"]) / 1e6
        print(
            f"- {fmt}: {spec['rows']:,} records, {spec['mb']:.0f} MB on disk in "
            f"{len(spec['files'])} files ({spec['image_bytes'] / 1e6:.0f} MB of image bytes)"
        )
    print()
    print("| workload | median wall s | min | max | peak RSS MB (all processes) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    medians = {}
    for name, runs in results.items():
        walls = [w for w, _ in runs]
        medians[name] = statistics.median(walls)
        print(
            f"| {name} | {medians[name]:.2f} | {min(walls):.2f} | {max(walls):.2f} "
            f"| {max(r for _, r in runs):.0f} |"
        )
    print()
    for fmt in formats:
        rows = inputs[fmt]["rows"]
        tools = [
            n for n in medians if n.startswith(f"{fmt}: ") and ("MXNet" in n or "MindSpore" in n)
        ]
        for ours in (f"{fmt}: recordmill --workers 2", f"{fmt}: recordmill --workers 2 --tasks 4"):
            for other in (f"{fmt}: plain loop", *tools):
                if ours in medians and other in medians:
                    print(
                        f"- {ours} / {other.split(': ', 1)[1]}: "
                        f"{medians[ours] / medians[other]:.2f} ({medians[ours] / rows * 1e6:.0f} "
                        f"us a record against {medians[other] / rows * 1e6:.0f})"
                    )


if __name__ == "__main__":
    main()
