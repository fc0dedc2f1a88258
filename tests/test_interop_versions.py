"""A dataset that grew by ``--append`` is still the folder: after each append, the tools users
already have (pyarrow, pandas, Polars, DuckDB's glob, Hugging Face datasets, daft), given the
folder, read exactly the latest version's rows, in order, and nothing else. (An appended
version's rejects file, ``_rejects-v0002``, is an empty part to them, as ``_rejects`` is.)"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

import recordmill
from tests.conftest import make_plugin

PLUGIN = """
    import recordmill

    def add_options(parser):
        parser.add_argument("--start", type=int, default=0)

    def task_number(options):
        return 3

    def schema(options):
        return {"id": {"type": "int64"}, "name": {"type": "string"}, "blob": {"type": "bytes"},
                "v": {"type": "float32", "shape": [2]}}

    def dict_data(task_id, options):
        yield recordmill.Reject(f"input {options.start + task_id}", "a reject in every version")
        for i in range(4):
            n = options.start + task_id * 4 + i
            yield {"id": n, "name": f"row {n}", "blob": bytes([n % 256]), "v": [n, -n]}
"""

STARTS = [0, 100, 200]


def expected(version: int) -> list[int]:
    return [s + i for s in STARTS[:version] for i in range(12)]


@pytest.fixture(scope="module", params=["parquet", "arrow"])
def grown(request, tmp_path_factory):
    """The folder after each write: a function that writes version k (1, 2, 3) and returns it."""
    root = tmp_path_factory.mktemp(f"grown-{request.param}")
    plugin = make_plugin(root / "grow", PLUGIN)
    path = root / "ds"

    def write(version: int):
        recordmill.write(
            plugin,
            path,
            options={"start": STARTS[version - 1]},
            partitions=version,  # another partition count each time
            format=request.param if version == 1 else None,
            append=version > 1,
            on_bad_input="skip",
            workers=1,
            progress=False,
        )
        return path

    return write, request.param


def readers(path, fmt, tmp_path):
    """Each tool's ids, given the folder (ordered, but daft's: it reads files in parallel)."""
    import pyarrow.dataset as ds

    found = {"pyarrow.dataset": ds.dataset(path, format=fmt).to_table()["id"].to_pylist()}
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    datasets = pytest.importorskip("datasets")
    if fmt == "parquet":
        pd = pytest.importorskip("pandas")
        found["pq.read_table"] = pq.read_table(path)["id"].to_pylist()
        found["pandas"] = pd.read_parquet(path)["id"].tolist()
        found["polars"] = pl.read_parquet(path)["id"].to_list()
        found["polars scan"] = pl.scan_parquet(path).collect()["id"].to_list()
        glob = f"select id from read_parquet('{path}/*.parquet')"
        found["duckdb glob"] = [row[0] for row in duckdb.sql(glob).fetchall()]
        daft = pytest.importorskip("daft")
        found["daft"] = sorted(daft.read_parquet(str(path)).to_pydict()["id"])
    else:
        found["polars"] = pl.read_ipc(path)["id"].to_list()
        dataset = ds.dataset(path, format="arrow")  # DuckDB reads Arrow IPC through pyarrow
        scanner = dataset.scanner(columns=["id"])  # noqa: F841
        found["duckdb"] = [row[0] for row in duckdb.sql("select id from scanner").fetchall()]
    builder = "parquet" if fmt == "parquet" else "arrow"
    cache = tmp_path / f"hf-{len(list(tmp_path.iterdir()))}"
    hf = datasets.load_dataset(builder, data_dir=str(path), split="train", cache_dir=str(cache))
    found["datasets"] = hf["id"]
    return found


def test_every_tool_reads_the_latest_version_after_each_append(grown, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    write, fmt = grown
    for version in (1, 2, 3):
        path = write(version)
        ours = recordmill.open(str(path))
        assert ours.version == version and ours.to_arrow()["id"].to_pylist() == expected(version)
        for tool, ids in readers(path, fmt, tmp_path).items():
            wanted = expected(version) if tool != "daft" else sorted(expected(version))
            assert list(ids) == wanted, f"{tool} after version {version}"
        assert len(recordmill.read_rejects(path)) == 3 * version
    # and each earlier version, through recordmill
    for version in (1, 2):
        assert recordmill.open(str(path), version=version).to_arrow()["id"].to_pylist() == (
            expected(version)
        )
