"""The plain loops recordmill is measured against: one process, dicts -> pyarrow tables -> Parquet.

    python benchmarks/baseline.py images DIR OUT.parquet
    python benchmarks/baseline.py smallrows OUT.parquet
    python benchmarks/baseline.py read DIR          # only read every file: Python's own floor

Written the way a user would without recordmill: batches of dicts through
``pa.Table.from_pylist`` and one ``pq.ParquetWriter`` with pyarrow's default settings.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

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


def small_rows():
    spec = importlib.util.spec_from_file_location("smallrows", HERE / "smallrows" / "plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=["images", "smallrows", "read"])
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args()
    if args.workload == "read":
        print(sum(len(row["data"]) for row in image_rows(args.paths[0])), "bytes")
    elif args.workload == "images":
        print(write(image_rows(args.paths[0]), args.paths[1]), "rows")
    else:
        print(write(small_rows(), args.paths[0]), "rows")


if __name__ == "__main__":
    main()
