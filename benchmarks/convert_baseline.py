"""What a user converts packed files with, without recordmill: one process, dicts -> Parquet.

    python benchmarks/convert_baseline.py recordio TRAIN.rec OUT.parquet
    python benchmarks/convert_baseline.py mindrecord SHARD0 OUT.parquet      # every shard of it
    python benchmarks/convert_baseline.py ofrecord DIR OUT.parquet          # DIR/part-*
    python benchmarks/convert_baseline.py torchrecord DIR OUT.parquet       # DIR/db0, DIR/db1, ...
    python benchmarks/convert_baseline.py mxnet TRAIN.rec OUT.parquet       # MXNet's reader
    python benchmarks/convert_baseline.py mindspore SHARD0 OUT.parquet      # MindSpore's reader
    python benchmarks/convert_baseline.py read FILE...                      # only read the bytes

The plain loops know the format as well as recordmill does and read it the simple way: RecordIO
record by record with ``struct`` (continuation parts joined), OFRecord length by length with
recordmill's protobuf parser, MindRecord with recordmill's row reader, TorchRecord with an LMDB
cursor and recordmill's ``TensorProtos`` parser. ``mxnet`` and ``mindspore`` are the original
tools' own readers (``MXIndexedRecordIO``, ``FileReader``), run with their environment's Python:
only pyarrow is needed there, recordmill is imported by the plain loops alone. Every loop writes
as ``baseline.py`` does: batches of 1,000 dicts through ``pa.Table.from_pylist``, one
``pq.ParquetWriter`` with pyarrow's defaults, and the same column names as recordmill's plugins.
"""

from __future__ import annotations

import argparse
import struct
from pathlib import Path

from baseline import write  # the same loop as the other plain baselines

MAGIC = 0xCED7230A


# ---- plain loops --------------------------------------------------------------------------------


def recordio_rows(path: Path):
    """im2rec records read with struct: magic, length (cflag in the top 3 bits), data, padding;
    parts of a record split around the magic number joined with it; then the IRHeader."""
    magic = struct.pack("<I", MAGIC)
    with open(path, "rb") as f:
        parts = []
        while header := f.read(8):
            found, lrecord = struct.unpack("<II", header)
            if found != MAGIC:
                raise ValueError(f"{path}: no magic number at byte {f.tell() - 8}")
            cflag, length = lrecord >> 29, lrecord & ((1 << 29) - 1)
            parts.append(f.read(length))
            f.read(-length % 4)
            if cflag in (0, 3):
                data = magic.join(parts)
                parts = []
                flag, label, image_id, _ = struct.unpack_from("<IfQQ", data)
                if flag:  # several labels: flag float32 values after the header
                    label = list(struct.unpack_from(f"<{flag}f", data, 24))
                yield {"index": image_id, "label": label, "data": data[24 + 4 * flag :]}


def ofrecord_rows(folder: Path):
    from recordmill.inputs.ofrecord import parse_ofrecord

    for path in sorted(folder.glob("part-*"), key=lambda p: int(p.name.split("-")[1])):
        with open(path, "rb") as f:
            while head := f.read(8):
                (length,) = struct.unpack("<q", head)
                features = parse_ofrecord(f.read(length))
                yield {
                    "images": features["images"][1][0],
                    "labels": int(features["labels"][1][0]),
                }


def mindrecord_rows(shard: Path):
    from recordmill.inputs.mindrecord import read_header, rows, shard_paths

    for path in shard_paths(shard):
        for _, row, problem in rows(read_header(path)):
            if problem:
                raise ValueError(problem)
            yield row


def torchrecord_rows(folder: Path):
    import lmdb

    from recordmill.inputs.torchrecord import parse_tensor_protos

    for db in sorted(d for d in folder.iterdir() if (d / "data.mdb").is_file()):
        env = lmdb.open(str(db), readonly=True, lock=False)
        with env.begin() as txn:
            for _, value in txn.cursor():
                image, label = parse_tensor_protos(value)
                yield {"label": int(label.byte_data), "image": image.byte_data}
        env.close()


# ---- the original tools -------------------------------------------------------------------------


def mxnet_rows(rec: Path):
    import mxnet as mx

    record = mx.recordio.MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
    for key in record.keys:
        header, image = mx.recordio.unpack(record.read_idx(key))
        yield {"index": header.id, "label": float(header.label), "data": image}
    record.close()


def mindspore_rows(shard: Path, consumers: int):
    from mindspore.mindrecord import FileReader

    reader = FileReader(str(shard), num_consumer=consumers)
    for item in reader.get_next():
        yield {
            "data": bytes(item["data"]),
            "file_name": str(item["file_name"]),
            "label": int(item["label"]),
        }
    reader.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "workload",
        choices=["recordio", "mindrecord", "ofrecord", "torchrecord", "mxnet", "mindspore", "read"],
    )
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument(
        "--consumers", type=int, default=2, help="FileReader's num_consumer (default: 2, the cores)"
    )
    args = parser.parse_args()
    if args.workload == "read":
        total = 0
        for path in args.paths:
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    total += len(chunk)
        print(total, "bytes")
        return
    source, out = args.paths
    rows = {
        "recordio": recordio_rows,
        "mindrecord": mindrecord_rows,
        "ofrecord": ofrecord_rows,
        "torchrecord": torchrecord_rows,
        "mxnet": mxnet_rows,
        "mindspore": lambda p: mindspore_rows(p, args.consumers),
    }[args.workload](source)
    print(write(rows, out), "rows")


if __name__ == "__main__":
    main()
