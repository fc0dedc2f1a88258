"""The plain loops recordmill is measured against: one process, dicts -> pyarrow tables -> Parquet.

    python benchmarks/baseline.py images DIR OUT.parquet
    python benchmarks/baseline.py smallrows OUT.parquet
    python benchmarks/baseline.py read DIR          # only read every file: Python's own floor
    python benchmarks/baseline.py tensors DIR OUT.parquet   # decode + resize to 128 x 128, no draft
    python benchmarks/baseline.py emptytasks N      # call the emptytasks plugin's dict_data N times

Written the way a user would without recordmill: batches of dicts through
``pa.Table.from_pylist`` and one ``pq.ParquetWriter`` with pyarrow's default settings.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

HERE = Path(__file__).resolve().parent
BATCH = 1000


def image_rows(root: Path):
    for label, folder in enumerate(sorted(d for d in root.iterdir() if d.is_dir())):
        for path in sorted(folder.iterdir()):
            yield {
                "label": label,
                "data": path.read_bytes(),
                "file_name": f"{folder.name}/{path.name}",
            }


def plugin_module(name: str = "smallrows"):
    """A benchmark plugin, imported from its file."""
    spec = importlib.util.spec_from_file_location(name, HERE / name / "plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def small_rows():
    module = plugin_module()
    options = argparse.Namespace(rows=2_000_000, tasks=32)
    for task_id in range(options.tasks):
        yield from module.rows(task_id, options)


def write(rows, out: Path) -> int:
    writer = None
    batch, total = [], 0
    for row in rows:
        batch.append(row)
        if len(batch) == BATCH:
            table = pa.Table.from_pylist(batch)
            writer = writer or pq.ParquetWriter(out, table.schema)
            writer.write_table(table)
            total += len(batch)
            batch = []
    if batch:
        table = pa.Table.from_pylist(batch)
        writer = writer or pq.ParquetWriter(out, table.schema)
        writer.write_table(table)
        total += len(batch)
    writer.close()
    return total


def write_tensors(root: Path, out: Path, size: int = 128) -> int:
    """Open each file with PIL, convert to RGB, resize (no draft mode), write tensors to Parquet."""
    writer, batch, labels, total = None, [], [], 0

    def flush() -> None:
        nonlocal writer
        table = pa.table(
            {
                "label": pa.array(labels, pa.int32()),
                "image": pa.FixedShapeTensorArray.from_numpy_ndarray(np.stack(batch)),
            }
        )
        writer = writer or pq.ParquetWriter(out, table.schema)
        writer.write_table(table)
        batch.clear()
        labels.clear()

    for row in image_rows(root):
        image = Image.open(io.BytesIO(row["data"])).convert("RGB")
        batch.append(np.asarray(image.resize((size, size), Image.Resampling.BILINEAR)))
        labels.append(row["label"])
        total += 1
        if len(batch) == BATCH:
            flush()
    if batch:
        flush()
    writer.close()
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "workload", choices=["images", "smallrows", "read", "tensors", "emptytasks"]
    )
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args()
    if args.workload == "emptytasks":
        module = plugin_module("emptytasks")
        print(sum(len(list(module.dict_data(t))) for t in range(int(str(args.paths[0])))), "rows")
    elif args.workload == "tensors":
        print(write_tensors(args.paths[0], args.paths[1]), "rows")
    elif args.workload == "read":
        print(sum(len(row["data"]) for row in image_rows(args.paths[0])), "bytes")
    elif args.workload == "images":
        print(write(image_rows(args.paths[0]), args.paths[1]), "rows")
    else:
        print(write(small_rows(), args.paths[0]), "rows")


if __name__ == "__main__":
    main()
