"""Written datasets open in the tools users already have, given the folder itself, with the same
rows and types: pyarrow, pandas, Polars, DuckDB, Hugging Face datasets and daft, compared value by
value, for Parquet and Arrow IPC. Tensor columns are raw bytes to other tools; each test rebuilds
the arrays from the dtype and shape that the file itself records."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import recordmill
from tests.conftest import make_plugin

ALL_TYPES = """
    import numpy as np
    import recordmill

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
            "img": {"type": "uint8", "shape": [4, 4, 3]},
            "feat": {"type": "float32", "shape": [32], "nullable": True},
            "tags": {"type": "string", "shape": [-1]}, "blobs": {"type": "bytes", "shape": [-1]},
            "nv": {"type": "int16", "shape": [-1], "nullable": True},
        }

    def dict_data(task_id):
        if task_id == 1:
            yield recordmill.Reject("input 7", "a reject, so that the folder holds _rejects too")
        for i in range(7):
            n = task_id * 7 + i
            yield {
                "id": n, "i8": -n, "i16": n * 100, "i32": -n * 1000, "u8": 250 + n % 5,
                "u16": 65535 - n, "u32": 2**32 - 1 - n, "u64": 2**64 - 1 - n, "f16": n / 2,
                "f32": n / 4, "f64": n / 8, "flag": n % 2 == 0, "s": f"s{n} é", "b": bytes([n, 0, 255]),
                "t": np.arange(6, dtype=np.float32).reshape(2, 3) + n, "v": list(range(n % 3)),
                "vv": [[n, 1]] * (n % 2), "n": None if n % 3 == 0 else n,
                "img": np.full((4, 4, 3), n, dtype=np.uint8) + np.arange(3, dtype=np.uint8),
                "feat": None if n % 4 == 1 else np.linspace(0, n, 32, dtype=np.float32),
                "tags": [f"t{k}" for k in range(n % 3)], "blobs": [bytes([n])] * (n % 2),
                "nv": None if n % 5 == 2 else [n, -n],
            }
"""


@pytest.fixture(scope="module", params=["parquet", "arrow"])
def written(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"interop-{request.param}")
    plugin = make_plugin(root / "all_types", ALL_TYPES)
    recordmill.write(
        plugin, root / "ds", partitions=2, workers=2, format=request.param,
        on_bad_input="skip", progress=False,
    )  # fmt: skip
    source = recordmill.load_plugin(str(plugin))
    expected = [
        as_plain(row)
        for t in range(3)
        for row in source.dict_data(t, recordmill.Options())
        if isinstance(row, dict)
    ]
    return root / "ds", request.param, expected


def tensors_from_file(path, fmt) -> dict[str, tuple[str, list[int]]]:
    """The tensors' dtypes and shapes, as the dataset's first partition records them."""
    first = sorted(path.glob(f"part-*.{fmt}"))[0]
    if fmt == "parquet":
        schema = pq.read_schema(first)
    else:
        schema = pa.ipc.open_file(pa.memory_map(str(first))).schema
    fields = json.loads(schema.metadata[b"recordmill.tensors"])
    assert all(schema.field(name).metadata[b"recordmill.tensor"] for name in fields)
    return {name: (f["dtype"], f["shape"]) for name, f in fields.items()}


def as_plain(value):
    if isinstance(value, dict):
        return {k: as_plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return [as_plain(v) for v in value] if value.dtype == object else value.tolist()
    if isinstance(value, (list, tuple)):
        return [as_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and math.isnan(value):
        return None  # pandas shows a null in a number column as NaN
    return value


def check_rows(rows, path, fmt, expected, ordered=True, without=()):
    """Compare a tool's rows with the plugin's, rebuilding tensors from their bytes."""
    tensors = tensors_from_file(path, fmt)
    expected = [{k: v for k, v in row.items() if k not in without} for row in expected]
    got = []
    for row in rows:
        row = as_plain(dict(row))
        for name, (dtype, shape) in tensors.items():
            if row[name] is not None:
                row[name] = np.frombuffer(row[name], dtype).reshape(shape).tolist()
        got.append(row)
    if not ordered:
        got.sort(key=lambda r: r["id"])
    assert len(got) == len(expected)
    assert got == expected


def parquet_only(written):
    path, fmt, expected = written
    if fmt != "parquet":
        pytest.skip("a Parquet reader")
    return path, fmt, expected


def test_the_folder_holds_partitions_and_empty_sidecars(written):
    path, fmt, _ = written
    names = sorted(p.name for p in path.iterdir())
    assert names == [
        f"_manifest.{fmt}",
        f"_rejects.{fmt}",
        f"part-00000-of-00002.{fmt}",
        f"part-00001-of-00002.{fmt}",
    ]
    assert [r["source"] for r in recordmill.read_rejects(path)] == ["input 7"]
    assert recordmill.read_manifest(path)["format_version"] == 2


def test_pyarrow_dataset(written):
    import pyarrow.dataset as ds

    path, fmt, expected = written
    table = ds.dataset(path, format=fmt).to_table()
    check_rows(table.to_pylist(), path, fmt, expected)


def test_pyarrow_parquet_read_table(written):
    path, fmt, expected = parquet_only(written)
    check_rows(pq.read_table(path).to_pylist(), path, fmt, expected)


def test_pandas(written):
    pd = pytest.importorskip("pandas")
    path, fmt, expected = parquet_only(written)
    frame = pd.read_parquet(path)
    check_rows(frame.to_dict("records"), path, fmt, expected)


def test_polars(written):
    pl = pytest.importorskip("polars")
    path, fmt, expected = written
    if fmt == "parquet":
        frames = [pl.read_parquet(path), pl.scan_parquet(path).collect()]
        assert str(frames[0].schema["t"]) == "Array(Float32, shape=(2, 3))"
        kv = pl.read_parquet_metadata(sorted(path.glob("part-*"))[0])
        assert json.loads(kv["recordmill.tensors"])["img"] == {"dtype": "uint8", "shape": [4, 4, 3]}
    else:
        frames = [pl.read_ipc(path), pl.scan_ipc(path).collect()]
    for frame in frames:
        assert str(frame.schema["u64"]) == "UInt64" and str(frame.schema["f16"]) == "Float16"
        check_rows(frame.to_dicts(), path, fmt, expected)


def test_duckdb(written):
    duckdb = pytest.importorskip("duckdb")
    path, fmt, expected = written
    if fmt == "parquet":
        relation = duckdb.sql(f"select * from read_parquet('{path}/*.parquet')")
        kv = duckdb.sql(
            f"select value from parquet_kv_metadata('{path}/part-00000-of-00002.parquet') "
            "where key = 'recordmill.tensors'"
        ).fetchall()[0][0]
        assert json.loads(kv)["feat"] == {"dtype": "float32", "shape": [32]}
    else:
        import pyarrow.dataset as ds

        # DuckDB reads Arrow IPC through pyarrow, found by the variable's name; it has no
        # float16 there ("Unsupported Internal Arrow Type e"), so that column stays out.
        dataset = ds.dataset(path, format="arrow")
        scanner = dataset.scanner(columns=[n for n in dataset.schema.names if n != "f16"])  # noqa: F841
        relation = duckdb.sql("select * from scanner")
    types = dict(zip(relation.columns, map(str, relation.types), strict=True))
    assert (
        types["u64"] == "UBIGINT"
        and types["t"] in ("FLOAT[][]", "FLOAT[3][2]")
        and types["b"] == "BLOB"
    )
    assert types["img"] == "BLOB" and types["tags"] == "VARCHAR[]"
    rows = [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]
    check_rows(rows, path, fmt, expected, without=() if fmt == "parquet" else ("f16",))


@pytest.mark.parametrize("how", ["data_dir", "data_files"])
def test_hugging_face_datasets(written, how, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path, fmt, expected = written
    where = {"data_dir": str(path)} if how == "data_dir" else {"data_files": f"{path}/*"}
    builder = "parquet" if fmt == "parquet" else "arrow"
    ds = datasets.load_dataset(builder, **where, split="train", cache_dir=str(tmp_path))
    assert str(ds.features["tags"]) == "List(Value('string'))"
    check_rows([ds[i] for i in range(len(ds))], path, fmt, expected)


def test_daft(written):
    # daft pins pyarrow < 26: kept out of the test extra so that the tests run on the pyarrow
    # users get; its own extra, in an environment of its own: pip install -e ".[test,daft]".
    daft = pytest.importorskip(
        "daft",
        reason='daft is not installed here (it pins pyarrow<26): pip install -e ".[test,daft]" '
        "in an environment of its own",
    )
    path, fmt, expected = parquet_only(written)
    frame = daft.read_parquet(str(path)).to_pydict()
    rows = [dict(zip(frame, values, strict=True)) for values in zip(*frame.values(), strict=True)]
    check_rows(rows, path, fmt, expected, ordered=False)  # daft reads files in parallel


def test_recordmill_open_gives_numpy(written):
    path, _, expected = written
    ds = recordmill.open(str(path))
    assert [as_plain(ds[i]) for i in range(len(ds))] == expected  # one row at a time
    assert [as_plain(row) for row in ds.iter_rows(batch_size=4)] == expected  # in order
    order = np.random.default_rng(0).permutation(len(ds))  # gathered, in any order
    assert [as_plain(row) for row in ds.iter_rows(order, batch_size=4)] == [
        expected[i] for i in order
    ]
    assert ds[4]["t"].dtype == np.float32 and ds[4]["vv"].dtype == np.uint8
    assert ds[0]["vv"].shape == (0, 2) and ds[1]["vv"].shape == (1, 2)
    assert ds[1]["feat"] is None and ds[2]["nv"] is None and ds[0]["n"] is None
    batch = next(ds.iter_batches(batch_size=8))
    assert batch["img"].shape == (8, 4, 4, 3) and batch["img"].dtype == np.uint8
    assert batch["img"].base is not None  # a view of the read bytes, not a copy per row
    assert not batch["img"].flags.writeable and not ds[3]["img"].flags.writeable
