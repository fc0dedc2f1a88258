"""Outputs on object storage: an S3 server on 127.0.0.1 (moto), written and read back by URI."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest

import recordmill
from recordmill.storage import Store
from recordmill.verify import verify
from tests.conftest import make_plugin, run_writer

pafs = pytest.importorskip("pyarrow.fs")

PLUGIN = """
    import numpy as np

    def task_number():
        return 5

    def schema():
        return {"task": {"type": "int32"}, "i": {"type": "int32"}, "v": {"type": "float32", "shape": [3]}}

    def dict_data(task_id):
        for i in range(17 * task_id):
            yield {"task": task_id, "i": i, "v": np.full(3, i, dtype=np.float32)}
"""


CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}


@pytest.fixture(scope="module")
def s3():
    if shutil.which("moto_server") is None:
        pytest.skip("moto_server is not installed (pip install 'moto[server]<5.2')")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        ["moto_server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "moto_server did not start"
            time.sleep(0.1)
    query = f"endpoint_override=127.0.0.1:{port}&scheme=http&region=us-east-1"
    pafs.S3FileSystem(
        endpoint_override=f"127.0.0.1:{port}",
        scheme="http",
        access_key="test",
        secret_key="test",
        region="us-east-1",
        allow_bucket_creation=True,
    ).create_dir("data")
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)  # S3 credentials come from the environment, as usual
    yield lambda path: f"s3://data/{path}?{query}"
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    server.kill()
    server.wait()


# The same rows with their counts announced: partitions written straight from the rows.
COUNTED = (
    PLUGIN
    + """
    def task_rows(task_id):
        return 17 * task_id
"""
)


@pytest.mark.parametrize(
    ("source", "fmt"),
    [(PLUGIN, "parquet"), (COUNTED, "parquet"), (COUNTED, "arrow")],
    ids=["staged", "direct", "direct-arrow"],
)
def test_write_to_s3_and_read_back(s3, tmp_path, source, fmt):
    plugin = make_plugin(tmp_path / "xyz", source)
    common = ["--script", plugin, "--partitions", "3", "--format", fmt, "--quiet"]
    local = run_writer(*common, "--output", tmp_path / "local")
    assert local.returncode == 0, local.stderr
    uri = s3(f"runs/xyz-{fmt}-{source is COUNTED}")
    remote = run_writer(*common, "--output", uri, "--workers", "2")
    assert remote.returncode == 0, remote.stderr
    assert "s3://data/runs/xyz" in remote.stdout
    store = Store.at(uri)
    assert store.listdir() == [
        f"_manifest.{fmt}",
        f"part-00000-of-00003.{fmt}",
        f"part-00001-of-00003.{fmt}",
        f"part-00002-of-00003.{fmt}",
    ]
    assert not store.sibling(f".{store.name}.recordmill-partial").exists()
    ours = recordmill.open(uri)
    theirs = recordmill.open(str(tmp_path / "local"))
    assert ours.to_arrow().equals(theirs.to_arrow())
    assert [p["checksum"] for p in ours.manifest["partitions"]] == [
        p["checksum"] for p in theirs.manifest["partitions"]
    ]
    assert ours[40]["v"].tolist() == theirs[40]["v"].tolist()


def test_s3_overwrite_and_refusal(s3, tmp_path):
    plugin = make_plugin(tmp_path / "xyz", PLUGIN)
    uri = s3("again")
    first = run_writer("--script", plugin, "--output", uri, "--quiet", "--workers", "1")
    assert first.returncode == 0, first.stderr
    refused = run_writer("--script", plugin, "--output", uri, "--quiet", "--workers", "1")
    assert refused.returncode == 1 and "--overwrite" in refused.stderr
    again = run_writer(
        "--script", plugin, "--output", uri, "--partitions", "2", "--overwrite", "--quiet"
    )
    assert again.returncode == 0, again.stderr
    assert len(recordmill.open(uri).manifest["partitions"]) == 2
    assert len(Store.at(uri).listdir()) == 3


def test_verify_info_and_rejects_on_s3(s3, tmp_path):
    plugin = make_plugin(tmp_path / "tasks", PLUGIN)
    uri = s3("runs/checked")
    result = run_writer("--script", plugin, "--output", uri, "--partitions", "2", "--quiet")
    assert result.returncode == 0, result.stderr
    assert verify(uri) == []
    assert recordmill.read_manifest(uri)["total_rows"] == 170
    assert recordmill.read_rejects(uri) == []
    cli = subprocess.run(
        ["recordmill", "verify", uri], capture_output=True, text=True, env=os.environ
    )
    assert cli.returncode == 0 and "170 rows in 2 partitions match" in cli.stdout
    store = Store.at(uri)
    name = "part-00001-of-00002.parquet"
    with store.fs.open_input_stream(store.path(name)) as f:
        data = f.read()
    with store.output(name) as f:
        f.write(data[:-100])  # truncated
    problems = verify(uri)
    assert any(p.startswith(f"{name}: {len(data) - 100} bytes") for p in problems)


def test_a_hashing_sink_gives_the_checksum_of_what_it_wrote(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from recordmill.storage import HashingSink, Store

    store = Store.at(str(tmp_path))
    sink = HashingSink(store.output("t.parquet"))
    pq.write_table(pa.table({"x": list(range(1000)), "b": [b"y" * 100] * 1000}), sink)
    sink.close()
    assert sink.checksum == store.sha256("t.parquet") and sink.size == store.size("t.parquet")
    assert pq.read_table(tmp_path / "t.parquet")["x"].to_pylist() == list(range(1000))
