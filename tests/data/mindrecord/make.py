"""Writes the MindRecord files beside it with MindSpore's own ``FileWriter`` (mindspore 2.10.0 on
PyPI, Python 3.11, numpy 1.26); tests/test_mindrecord_plugin.py reads them without MindSpore.
Run again with mindspore installed (in a separate venv: ``pip install mindspore "numpy<2"``):

    python tests/data/mindrecord/make.py

Two datasets, every value a function of the row's number (``expected_*`` in the test):

- ``all_types.mindrecord``: one shard, every MindRecord type (scalars, string, bytes, int32,
  int64, float32 and float64 arrays of shape [-1] and fixed shapes); 32 KB pages, so the rows
  span several pages;
- ``shards.mindrecord0..2``: three shards of an id and an int64 array, the only blob field (so
  the whole blob is one compressed integer array).

The ``.db`` index files are removed: the reader does not need them, and it is tested so.
"""

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
HEADER_SIZE, PAGE_SIZE = 1 << 14, 1 << 15  # the smallest MindSpore accepts: small files

ALL_TYPES_SCHEMA = {
    "id": {"type": "int64"},
    "i32": {"type": "int32"},
    "f32": {"type": "float32"},
    "f64": {"type": "float64"},
    "name": {"type": "string"},
    "data": {"type": "bytes"},
    "a_i32": {"type": "int32", "shape": [-1]},
    "a_i64": {"type": "int64", "shape": [-1]},
    "a_f32": {"type": "float32", "shape": [3]},
    "a_f64": {"type": "float64", "shape": [2, 2]},
    "m_i32": {"type": "int32", "shape": [2, 3]},
}
ALL_TYPES_ROWS = 120


def all_types_row(i: int) -> dict:
    return {
        "id": i - 2**40 if i % 2 else i + 2**40,
        "i32": -(2**31) if i == 0 else i * 1000 - 7,
        "f32": np.float32(i / 3),
        "f64": i / 7 - 1e10,
        "name": f"row {i} é" * (i % 3),
        "data": bytes((i + k) % 256 for k in range(200 + i % 100)),
        "a_i32": np.array([i, -300, 70000, -(2**31), 2**31 - 1][: i % 6], np.int32),
        "a_i64": np.array([2**62, -i, 5, -(2**15)][: 1 + i % 4], np.int64),
        "a_f32": np.array([i, -i / 2, 1e-3], np.float32),
        "a_f64": np.arange(4, dtype=np.float64).reshape(2, 2) * i - 0.5,
        "m_i32": np.arange(6, dtype=np.int32).reshape(2, 3) * (i - 60),
    }


SHARDS_SCHEMA = {"id": {"type": "int64"}, "tokens": {"type": "int64", "shape": [-1]}}
SHARDS_ROWS = 20


def shards_row(i: int) -> dict:
    return {"id": i, "tokens": np.array([i, 1 - 2**33, 130, -129][: 1 + i % 4], np.int64)}


def write(name: str, shards: int, schema: dict, rows: list, batch: int, folder=HERE) -> None:
    from mindspore.mindrecord import FileWriter  # here: the test imports this file without it

    for old in folder.glob(name + "*"):
        old.unlink()
    writer = FileWriter(str(folder / name), shard_num=shards, overwrite=True)
    writer.set_header_size(HEADER_SIZE)
    writer.set_page_size(PAGE_SIZE)
    writer.add_schema(schema, name)
    for start in range(0, len(rows), batch):  # several writes: each adds to every shard
        writer.write_raw_data(rows[start : start + batch])
    writer.commit()
    if folder == HERE:  # only the committed files lose their .db
        for db in HERE.glob(name + "*.db"):
            db.unlink()


if __name__ == "__main__":
    write(
        "all_types.mindrecord",
        1,
        ALL_TYPES_SCHEMA,
        [all_types_row(i) for i in range(ALL_TYPES_ROWS)],
        50,
    )
    write("shards.mindrecord", 3, SHARDS_SCHEMA, [shards_row(i) for i in range(SHARDS_ROWS)], 8)
