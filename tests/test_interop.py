"""Written datasets open in the tools users already have, with the same rows and types:
DuckDB, Polars and Hugging Face datasets (Parquet loader), compared value by value."""

from __future__ import annotations

import numpy as np
import pytest

import recordmill
from tests.conftest import make_plugin

ALL_TYPES = """
    import numpy as np

    def task_number():
        return 3

    def schema():
        return {
            "id": {"type": "int64"}, "i8": {"type": "int8"}, "i16": {"type": "int16"},
            "i32": {"type": "int32"}, "u8": {"type": "uint8"}, "u16": {"type": "uint16"},
            "u32": {"type": "uint32"}, "u64": {"type": "uint64"}, "f16": {"type": "float16"},
            "f32": {"type": "float32"}, "f64": {"type": "float64"}, "flag": {"type": "bool"},
            "s": {"type": "string"}, "b": {"type": "bytes"},
            "t": {"type": "float32", "shape": [2, 3]}, "v": {"type": "int32", "shape": [-1]},
            "vv": {"type": "uint8", "shape": [-1, 2]}, "n": {"type": "int32", "nullable": True},
        }

    def dict_data(task_id):
        for i in range(7):
            n = task_id * 7 + i
            yield {
                "id": n, "i8": -n, "i16": n * 100, "i32": -n * 1000, "u8": 250 + n % 5,
                "u16": 65535 - n, "u32": 2**32 - 1 - n, "u64": 2**64 - 1 - n, "f16": n / 2,
                "f32": n / 4, "f64": n / 8, "flag": n % 2 == 0, "s": f"s{n} é", "b": bytes([n, 0, 255]),
                "t": np.arange(6, dtype=np.float32).reshape(2, 3) + n, "v": list(range(n % 3)),
                "vv": [[n, 1]] * (n % 2), "n": None if n % 3 == 0 else n,
            }
"""


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("interop")
    plugin = make_plugin(root / "all_types", ALL_TYPES)
    recordmill.write(plugin, root / "ds", partitions=2, workers=2, progress=False)
    source = recordmill.load_plugin(str(plugin))
    expected = [
        {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in row.items()}
        for t in range(3)
        for row in source.dict_data(t, recordmill.Options())
    ]
    return root / "ds", expected


def as_plain(value):
    if isinstance(value, dict):
        return {k: as_plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [as_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def test_duckdb(written):
    duckdb = pytest.importorskip("duckdb")
    path, expected = written
    relation = duckdb.sql(f"select * from read_parquet('{path}/part-*.parquet') order by id")
    types = dict(zip(relation.columns, map(str, relation.types), strict=True))
    assert types["u64"] == "UBIGINT" and types["t"] == "FLOAT[][]" and types["b"] == "BLOB"
    assert types["f16"] == "FLOAT" and types["vv"] == "UTINYINT[][]"
    rows = [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]
    assert [as_plain(r) for r in rows] == [as_plain(r) for r in expected]


def test_polars(written):
    pl = pytest.importorskip("polars")
    path, expected = written
    frame = pl.read_parquet(f"{path}/part-*.parquet")
    assert str(frame.schema["t"]) == "Array(Float32, shape=(2, 3))"
    assert str(frame.schema["u64"]) == "UInt64" and str(frame.schema["f16"]) == "Float16"
    assert [as_plain(r) for r in frame.to_dicts()] == [as_plain(r) for r in expected]


def test_hugging_face_datasets(written, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path, expected = written
    files = sorted(str(p) for p in path.glob("part-*.parquet"))
    ds = datasets.load_dataset("parquet", data_files=files, split="train", cache_dir=str(tmp_path))
    assert str(ds.features["t"]) == "List(List(Value('float32'), length=3), length=2)"
    assert str(ds.features["b"]) == "Value('binary')"
    assert [as_plain(ds[i]) for i in range(len(ds))] == [as_plain(r) for r in expected]


def test_recordmill_open_gives_numpy(written):
    path, expected = written
    ds = recordmill.open(str(path))
    assert [as_plain(ds[i]) for i in range(len(ds))] == [as_plain(r) for r in expected]
    assert ds[4]["t"].dtype == np.float32 and ds[4]["vv"].dtype == np.uint8
