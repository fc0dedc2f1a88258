"""Training from object storage: recordmill's disk cache against LitData and MosaicML streaming.

    python benchmarks/bench_cache.py --litdata-python /tmp/venv-litdata/bin/python \\
        --mds-python /tmp/venv-mds/bin/python            # median of 3 interleaved rounds
    python benchmarks/bench_cache.py --rows 1000 --runs 1  # a quick end-to-end check
    python benchmarks/bench_cache.py ... --workers 2 --cases e1,e2   # DataLoaders, 2 workers
    python benchmarks/bench_cache.py ... --mds-shuffle-block 1500 --cases s1,s2,s3 \\
        --readers "recordmill parquet,litdata (2,shuffle_block_size"  # MDS with a tuned block

One run, side by side, on the same rows from the same S3 server: a moto server started here on
127.0.0.1 (stopped at the end), read through ``tests/s3proxy.py``'s ``CountingProxy``, which
counts every request and every response byte on the wire. Writing goes to moto directly and is
not counted.

Data: ``--rows`` (10,000) rows ``{label: int64, x: uint8 [64, 64, 3]}``, the label being the
row's number (so the order a reader hands out is known), the pixels seeded random bytes (they
do not compress): 123 MB. ``--shape 32,64,3`` makes rows of 6 KB (the issue's 20,000 x 6 KB
with ``--rows 20000``). Written to bucket ``data`` by

- recordmill: ``recordmill.write`` with a small plugin, 4 partitions, Parquet and Arrow IPC,
  default row groups (about 1 MB);
- LitData: ``litdata.optimize(fn, inputs, output_dir="s3://...", chunk_bytes=...)``, one row a
  dict ``{"label": int, "x": np.ndarray}``; with chunks of 64 MB (its README's value) and of
  ``--small-chunk`` (2 MB: about the size of recordmill's parts, 1/64 of the dataset);
- MDS: ``MDSWriter(out="s3://...", columns={"label": "int64", "x": "ndarray:uint8:64,64,3"})``,
  no compression (its default), ``size_limit`` 64 MB (its default) and ``--small-chunk``.

Readers, each epoch in a fresh process (``bench_cache.py child ...``, under the reader's own
interpreter), every row read and checked (row count, each label once, label sum, pixel sum):

- recordmill: ``recordmill.open(uri, cache_dir=..., cache_limit=...)``, ``ds.shuffled(seed,
  epoch)`` then ``ds.take`` of 256 rows at a time (``--workers N``: ``recordmill.torch.DataLoader``
  with ``num_workers=N`` instead, over a ``MapDataset`` of the URI; ``--iterable``: over
  ``recordmill.torch.IterableDataset(uri, shuffle=True)``); "no disk cache": ``recordmill.open(uri, cache_bytes=32 << 20)``
  and ``iter_batches(256, shuffle=True)``, as before the cache;
- LitData: ``StreamingDataset(url, cache_dir=..., shuffle=True, max_cache_size=...,
  storage_options={"endpoint_url": ...})`` and ``StreamingDataLoader(batch_size=256,
  num_workers=N)``, its ``current_epoch`` set to the epoch (obstore, which LitData fetches
  with, is allowed plain http for the local server; see :func:`litdata_env`);
- MDS: ``StreamingDataset(remote=url, local=..., shuffle=True, batch_size=256,
  cache_limit=...)`` (``S3_ENDPOINT_URL`` set) with its ``load_state_dict`` at the epoch, and
  ``torch.utils.data.DataLoader(batch_size=256, num_workers=N)``; shuffle ``py1e`` (default).

Cases (``--cases``): ``e1`` epoch 1 into an empty cache folder; ``e2`` epoch 2 in a new process,
same folder; with a cache limit of 30% of the reader's dataset bytes, ``s1``, ``s2``, ``s3``:
epochs 1, 2, 3 (each a new process, one folder); ``nocache``: recordmill Parquet without a disk
cache. ``--mds-shuffle-block N`` adds MDS over its small shards with ``shuffle_block_size=N``.
The rounds (``--runs``) interleave every reader within each case; counts are the medians (they
are the same in every round for recordmill), seconds the medians, timed from opening the
dataset to the last batch (interpreter start-up and imports not counted). The neighbour figure
is the fraction of adjacent rows of an epoch that come from one fetch unit (recordmill's cache
part, LitData's chunk, MDS's shard): about 1 / units for a full shuffle, 1.0 for none.

LitData and MDS run under the interpreters given by ``--litdata-python`` / ``--mds-python``
(their own virtual environments: MDS pins numpy<2.2); a peer not given is skipped, with the
reason printed. ``--json FILE`` saves every run's result, one JSON line each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# --shape sets it for this process and every child (the plugin's workers, the peers' epochs)
SHAPE = tuple(int(n) for n in os.environ.get("BENCH_CACHE_SHAPE", "64,64,3").split(","))
BLOCK = 100  # rows a task / input makes
SEED = 23  # the pixels
SHUFFLE_SEED = 7
BATCH = 256
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
REGION = "us-east-1"
BUCKET = "data"
BIG_CHUNK = 64 << 20  # LitData's README and MDS's default size_limit


# --- the rows ---------------------------------------------------------------------------------


def block(b: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``b * BLOCK`` to the next block's start: labels (the row numbers) and pixels."""
    lo, hi = b * BLOCK, min(rows, (b + 1) * BLOCK)
    x = np.random.default_rng([SEED, b]).integers(0, 256, (hi - lo, *SHAPE), dtype=np.uint8)
    return np.arange(lo, hi, dtype=np.int64), x


def blocks(rows: int) -> int:
    return -(-rows // BLOCK)


def expected(rows: int) -> dict[str, int]:
    pixels = sum(int(block(b, rows)[1].sum(dtype=np.int64)) for b in range(blocks(rows)))
    return {"rows": rows, "label_sum": rows * (rows - 1) // 2, "pixel_sum": pixels}


class Tally:
    """What an epoch read: the labels in order and the sum of every pixel."""

    def __init__(self) -> None:
        self.labels: list[np.ndarray] = []
        self.pixels = 0

    def add(self, labels, x=None) -> None:
        labels = np.asarray(labels)
        self.labels.append(labels.astype(np.int64))
        if x is None:  # --transform: only the labels come back
            return
        x = np.asarray(x)
        assert x.dtype == np.uint8 and x.shape[1:] == SHAPE, (x.dtype, x.shape)
        assert len(labels) == len(x)
        self.pixels += int(x.sum(dtype=np.int64))

    def result(self, seconds: float, **extra) -> dict:
        labels = np.concatenate(self.labels) if self.labels else np.zeros(0, np.int64)
        return {
            "rows": len(labels),
            "label_sum": int(labels.sum()),
            "pixel_sum": self.pixels,
            "seconds": seconds,
            "labels": labels.tolist(),
            **extra,
        }


def label_of(row: dict) -> int:
    """--transform: what each row becomes (every reader decodes the whole row first)."""
    return int(row["label"])


def tally_batch(tally: Tally, batch) -> None:
    if isinstance(batch, dict):
        tally.add(batch["label"].numpy(), batch["x"].numpy())
    else:  # a tensor of the transform's labels
        tally.add(batch.numpy())


def emit(result: dict) -> None:
    print("RESULT " + json.dumps(result), flush=True)


# --- recordmill (in this environment) ---------------------------------------------------------

PLUGIN = """
import sys

sys.path.insert(0, {here!r})
from bench_cache import SHAPE, block, blocks

ROWS = {rows}


def task_number():
    return blocks(ROWS)


def schema():
    return {{"label": {{"type": "int64"}}, "x": {{"type": "uint8", "shape": list(SHAPE)}}}}


def dict_data(task_id):
    labels, x = block(task_id, ROWS)
    for i in range(len(labels)):
        yield {{"label": int(labels[i]), "x": x[i]}}
"""


def write_recordmill(root: Path, uri: str, fmt: str, rows: int) -> None:
    import recordmill

    plugin = root / "plugin"
    plugin.mkdir(parents=True, exist_ok=True)
    (plugin / "plugin.py").write_text(PLUGIN.format(here=str(HERE), rows=rows))
    recordmill.write(plugin, uri, partitions=4, workers=2, format=fmt, progress=False)


def epoch_recordmill(args: dict) -> dict:
    import recordmill.torch  # as a training script does, before it opens anything

    import recordmill
    import recordmill.read.dataset  # recordmill imports its names when first used

    uri, workers = args["uri"], args["workers"]
    tally = Tally()
    start = time.perf_counter()
    if args["cache_dir"] is None:  # the "before": the in-memory group cache only
        ds = recordmill.open(uri, cache_bytes=32 << 20)
        for batch in ds.iter_batches(BATCH, shuffle=True, seed=SHUFFLE_SEED):
            tally.add(batch["label"], batch["x"])
        return tally.result(time.perf_counter() - start, fetched_parts=0)
    if workers or args["loader"] or args["iterable"] or args["transform"]:
        from recordmill.torch import DataLoader, IterableDataset, MapDataset

        cache = {"cache_dir": args["cache_dir"], "cache_limit": args["limit"]}
        transform = label_of if args["transform"] else None
        if args["iterable"]:
            data = IterableDataset(
                uri, shuffle=True, seed=SHUFFLE_SEED, transform=transform, **cache
            )
            loader = DataLoader(data, batch_size=BATCH, num_workers=workers)
        else:
            data = MapDataset(uri, transform=transform, **cache)
            shuffle = {"shuffle": True, "seed": SHUFFLE_SEED}
            loader = DataLoader(data, batch_size=BATCH, num_workers=workers, **shuffle)
        loader.set_epoch(args["epoch"])
        for batch in loader:
            tally_batch(tally, batch)
        return tally.result(time.perf_counter() - start, fetched_parts=-1)
    from recordmill.dataset.columns import to_numpy

    ds = recordmill.open(uri, cache_dir=args["cache_dir"], cache_limit=args["limit"])
    order = ds.shuffled(SHUFFLE_SEED, args["epoch"])
    field = ds.schema.field("x")
    for lo in range(0, len(order), BATCH):
        table = ds.take(order[lo : lo + BATCH])
        tally.add(table.column("label").to_numpy(), to_numpy(table.column("x"), field))
    return tally.result(time.perf_counter() - start, fetched_parts=ds.cache.fetched_parts)


def recordmill_units(uri: str, cache: Path) -> list[int]:
    """Each row's cache part (recordmill's fetch unit)."""
    import recordmill

    ds = recordmill.open(uri, cache_dir=cache)
    unit = np.zeros(len(ds), np.int64)
    for k, part in enumerate(ds.cache.parts):
        unit[part.rows.start : part.rows.stop] = k
    return unit.tolist()


# --- LitData (under --litdata-python) ---------------------------------------------------------


def litdata_env(endpoint: str) -> None:
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    # LitData moves chunks with obstore, which refuses plain http (the local server has no
    # TLS) unless its client options allow it; LitData passes them from this constant.
    from litdata.streaming import downloader

    downloader._OBSTORE_CLIENT_OPTIONS = {**downloader._OBSTORE_CLIENT_OPTIONS, "allow_http": True}
    os.environ["LITDATA_DISABLE_VERSION_CHECK"] = "1"  # no look-up on PyPI from the reader


def litdata_options(endpoint: str) -> dict:
    return {
        "endpoint_url": endpoint,
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": REGION,
    }


def litdata_rows(b: int):
    labels, x = block(b, int(os.environ["BENCH_CACHE_ROWS"]))
    for i in range(len(labels)):
        yield {"label": int(labels[i]), "x": x[i]}


def write_litdata(args: dict) -> dict:
    from litdata import StreamingDataset, optimize

    litdata_env(args["endpoint"])
    os.environ["BENCH_CACHE_ROWS"] = str(args["rows"])
    os.environ["DATA_OPTIMIZER_CACHE_FOLDER"] = args["tmp"] + "/optimizer-cache"
    os.environ["DATA_OPTIMIZER_DATA_CACHE_FOLDER"] = args["tmp"] + "/optimizer-data"
    sys.path.insert(0, str(HERE))
    import bench_cache  # fn must be importable by optimize's workers

    optimize(
        fn=bench_cache.litdata_rows,
        inputs=list(range(blocks(args["rows"]))),
        output_dir=args["url"],
        chunk_bytes=args["chunk"],
        num_workers=1,
        storage_options=litdata_options(args["endpoint"]),
    )
    ds = StreamingDataset(
        args["url"],
        cache_dir=args["tmp"] + "/check",
        storage_options=litdata_options(args["endpoint"]),
    )
    return {"order": [int(item["label"]) for item in ds], "units": unit_sizes(args, "chunks")}


def epoch_litdata(args: dict) -> dict:
    from litdata import StreamingDataLoader, StreamingDataset

    litdata_env(args["endpoint"])
    tally = Tally()
    start = time.perf_counter()
    ds = StreamingDataset(
        args["url"],
        cache_dir=args["cache_dir"],
        shuffle=True,
        seed=SHUFFLE_SEED,
        max_cache_size=args["limit"],
        storage_options=litdata_options(args["endpoint"]),
        transform=label_of if args["transform"] else None,
    )
    loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=args["workers"])
    loader.current_epoch = args["epoch"]  # __iter__ adds one: LitData counts epochs from 1
    for batch in loader:
        tally_batch(tally, batch)
    return tally.result(time.perf_counter() - start)


# --- MDS (under --mds-python) -----------------------------------------------------------------


def write_mds(args: dict) -> dict:
    from streaming import MDSWriter, StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    os.environ["S3_ENDPOINT_URL"] = args["endpoint"]
    columns = {"label": "int64", "x": "ndarray:uint8:" + ",".join(map(str, SHAPE))}
    with MDSWriter(out=args["url"], columns=columns, size_limit=args["chunk"]) as out:
        for b in range(blocks(args["rows"])):
            labels, x = block(b, args["rows"])
            for i in range(len(labels)):
                out.write({"label": labels[i], "x": x[i]})
    clean_stale_shared_memory()
    ds = StreamingDataset(remote=args["url"], local=args["tmp"] + "/check", batch_size=BATCH)
    order = [int(ds[i]["label"]) for i in range(len(ds))]
    return {"order": order, "units": unit_sizes(args, "shards")}


def epoch_mds(args: dict) -> dict:
    import torch.utils.data
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    os.environ["S3_ENDPOINT_URL"] = args["endpoint"]
    clean_stale_shared_memory()
    tally = Tally()
    start = time.perf_counter()
    ds = StreamingDataset(
        remote=args["url"],
        local=args["cache_dir"],
        shuffle=True,
        shuffle_seed=SHUFFLE_SEED,
        batch_size=BATCH,
        cache_limit=args["limit"],
        **args.get("options", {}),
    )
    ds.load_state_dict(
        {
            "epoch": args["epoch"],
            "sample_in_epoch": 0,
            "num_canonical_nodes": 1,
            "shuffle_seed": SHUFFLE_SEED,
            "initial_physical_nodes": 1,
        }
    )
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=args["workers"])
    for batch in loader:  # (--transform: only the labels are tallied)
        tally.add(batch["label"].numpy(), None if args["transform"] else batch["x"].numpy())
    return tally.result(time.perf_counter() - start)


def unit_sizes(args: dict, key: str) -> list[int]:
    """Rows per chunk / shard, in the order of the peer's index.json."""
    import boto3

    s3 = boto3.client(
        "s3", endpoint_url=args["endpoint"], region_name=REGION, **client_credentials()
    )
    prefix = args["url"].split(f"s3://{BUCKET}/", 1)[1]
    index = json.loads(s3.get_object(Bucket=BUCKET, Key=f"{prefix}/index.json")["Body"].read())
    if key == "chunks":
        return [c["chunk_size"] for c in index["chunks"]]
    return [s["samples"] for s in index["shards"]]


def client_credentials() -> dict:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    }


CHILDREN = {
    "epoch-recordmill": epoch_recordmill,
    "write-litdata": write_litdata,
    "epoch-litdata": epoch_litdata,
    "write-mds": write_mds,
    "epoch-mds": epoch_mds,
}


# --- the run ----------------------------------------------------------------------------------


class Server:
    """moto_server on a free port of 127.0.0.1, bucket ``data``, and the counting proxy."""

    def __init__(self) -> None:
        moto = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.process = subprocess.Popen(
            [moto, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("moto_server did not start") from None
                time.sleep(0.1)
        os.environ.update(CREDENTIALS)
        self.s3 = self.client(self.direct)
        self.s3.create_bucket(Bucket=BUCKET)
        sys.path.insert(0, str(REPO))
        from tests.s3proxy import CountingProxy

        self.proxy = CountingProxy(self.port)

    @property
    def direct(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def counted(self) -> str:
        return f"http://127.0.0.1:{self.proxy.port}"

    def client(self, endpoint: str):
        import boto3

        return boto3.client("s3", endpoint_url=endpoint, region_name=REGION, **client_credentials())

    def uri(self, path: str, counted: bool) -> str:
        """A recordmill (pyarrow) URI of ``path`` in the bucket."""
        port = self.proxy.port if counted else self.port
        query = f"endpoint_override=127.0.0.1:{port}&scheme=http&region={REGION}"
        return f"s3://{BUCKET}/{path}?{query}"

    def size(self, prefix: str) -> int:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return sum(o["Size"] for page in pages for o in page.get("Contents", []))

    def close(self) -> None:
        self.proxy.close()
        self.process.kill()
        self.process.wait()


def child(python: str, kind: str, args: dict, timeout: float) -> dict:
    """Run ``kind`` in a fresh process of ``python``; its RESULT line, or {"error": ...}."""
    env = {**os.environ, **CREDENTIALS, "AWS_DEFAULT_REGION": REGION, "PYTHONPATH": str(HERE)}
    env.pop("RECORDMILL_CACHE_DIR", None)
    if Path(python).resolve() != Path(sys.executable).resolve():
        env.pop("VIRTUAL_ENV", None)
        env["PATH"] = f"{Path(python).parent}{os.pathsep}{env['PATH']}"
    command = [python, str(Path(__file__).resolve()), "child", kind, json.dumps(args)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=env, cwd=args["tmp"]
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    lines = [x for x in done.stderr.strip().splitlines() if x.strip()] or ["no output"]
    return {"error": f"exit {done.returncode}: {lines[-1][:300]}", "stderr": done.stderr[-4000:]}


class Reader:
    """One line of the table: a dataset on S3 and how one library reads it."""

    def __init__(self, name: str, kind: str, python: str, url: str, size: int, units: list[int]):
        self.name, self.kind, self.python, self.url = name, kind, python, url
        self.size = size
        self.units = np.asarray(units, np.int64)  # each label's fetch unit
        self.options: dict = {}  # more arguments of the reader's dataset

    def neighbours(self, labels: list[int]) -> float:
        owner = self.units[np.asarray(labels, np.int64)]
        return float(np.mean(owner[1:] == owner[:-1])) if len(owner) > 1 else 0.0


NO_CACHE = "no disk cache (cache_bytes=32 MB): one shuffled epoch"
CASES = {  # key: name, folder, limit (fraction of the dataset; None: no limit), epoch
    "e1": ("epoch 1", "full", None, 0),
    "e2": ("epoch 2, new process", "full", None, 1),
    "s1": ("30%: epoch 1", "small", 0.3, 0),
    "s2": ("30%: epoch 2", "small", 0.3, 1),
    "s3": ("30%: epoch 3", "small", 0.3, 2),
    "nocache": (NO_CACHE, "none", None, 0),  # recordmill Parquet only
}


def units_from(order: list[int], sizes: list[int]) -> list[int]:
    """Each label's unit, from the labels read in unit order and the rows per unit."""
    unit = np.zeros(len(order), np.int64)
    owner = np.repeat(np.arange(len(sizes)), sizes)
    assert len(owner) == len(order), (len(owner), len(order))
    unit[np.asarray(order)] = owner
    return unit.tolist()


def write_all(server: Server, args, root: Path) -> list[Reader]:
    rows, readers = args.rows, []
    for fmt in ("parquet", "arrow"):
        path = f"recordmill/{fmt}"
        print(f"writing recordmill {fmt} ...", flush=True)
        write_recordmill(root / f"write-{fmt}", server.uri(path, counted=False), fmt, rows)
        uri = server.uri(path, counted=True)
        units = recordmill_units(uri, root / "units")
        name = f"recordmill {'Parquet' if fmt == 'parquet' else 'Arrow IPC'}"
        size = server.size(path + "/")
        readers.append(Reader(name, "recordmill", sys.executable, uri, size, units))
    server.proxy.counts.take()
    small = args.small_chunk
    peers = [
        ("litdata", args.litdata_python, "LitData", "chunks"),
        ("mds", args.mds_python, "MDS", "shards"),
    ]
    for kind, python, label, unit in peers:
        if not python:
            print(f"skipping {label}: no --{kind}-python given", flush=True)
            continue
        for chunk in (BIG_CHUNK, small):
            path = f"{kind}/{chunk >> 20}MB"
            print(f"writing {label} ({chunk >> 20} MB {unit}) ...", flush=True)
            folder = root / f"write-{kind}-{chunk >> 20}"
            folder.mkdir(parents=True)
            done = child(
                python,
                f"write-{kind}",
                {
                    "url": f"s3://{BUCKET}/{path}",
                    "endpoint": server.direct,
                    "rows": rows,
                    "chunk": chunk,
                    "tmp": str(folder),
                },
                args.timeout * 4,
            )
            if "error" in done:
                print(f"skipping {label}: writing failed: {done['error']}", flush=True)
                print(done.get("stderr", ""), file=sys.stderr)
                break
            if sorted(done["order"]) != list(range(rows)):
                raise SystemExit(f"{label} wrote other rows than it was given")
            name = f"{label} ({chunk >> 20} MB {unit}, {len(done['units'])} of them)"
            size = server.size(path + "/")
            units = units_from(done["order"], done["units"])
            readers.append(Reader(name, kind, python, f"s3://{BUCKET}/{path}", size, units))
            shutil.rmtree(folder, ignore_errors=True)
            if kind == "mds" and chunk == small and args.mds_shuffle_block:
                block_ = args.mds_shuffle_block
                name = name[:-1] + f", shuffle_block_size={block_})"
                extra = Reader(name, kind, python, f"s3://{BUCKET}/{path}", size, units)
                extra.options = {"shuffle_block_size": block_}
                readers.append(extra)
    server.proxy.counts.take()
    return readers


def run_epoch(server, reader, case, root, args) -> dict:
    name, folder, fraction, epoch = case
    limit = int(fraction * reader.size) if fraction is not None else None
    if name == NO_CACHE:
        cache_dir = None
    else:
        slug = "".join(c if c.isalnum() else "-" for c in reader.name.lower())
        cache_dir = str(root / f"{slug}-{folder}")
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    args_ = {
        "uri": reader.url,
        "url": reader.url,
        "endpoint": server.counted,
        "cache_dir": cache_dir,
        "limit": limit,
        "epoch": epoch,
        "workers": args.workers,
        "loader": args.loader,
        "iterable": args.iterable,
        "transform": args.transform,
        "tmp": str(work),
        "options": reader.options,
    }
    server.proxy.counts.take()
    result = child(reader.python, f"epoch-{reader.kind}", args_, args.timeout)
    requests, pulled = server.proxy.counts.take()
    result.update(requests=requests, bytes=pulled)
    return result


def check(result: dict, want: dict, what: str) -> None:
    got = {k: result[k] for k in want}
    if got != want:
        raise SystemExit(f"{what}: read {got}, expected {want}")
    if sorted(result["labels"]) != list(range(want["rows"])):
        raise SystemExit(f"{what}: not every row exactly once")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3, help="interleaved rounds (default: 3)")
    parser.add_argument("--workers", type=int, default=0, help="DataLoader workers (default 0)")
    parser.add_argument(
        "--loader",
        action="store_true",
        help="recordmill through recordmill.torch.DataLoader also with --workers 0 (as LitData "
        "and MDS always are); else ds.shuffled() and ds.take()",
    )
    parser.add_argument(
        "--iterable",
        action="store_true",
        help="recordmill through recordmill.torch.IterableDataset (shuffle=True) in its "
        "DataLoader, instead of a MapDataset",
    )
    parser.add_argument(
        "--transform",
        action="store_true",
        help="each reader's dataset turns a row into its label (transform=lambda r: "
        'int(r["label"])) and the loader collates the labels; pixels are not summed',
    )
    parser.add_argument(
        "--shape", default="64,64,3", help="each row's uint8 array (default 64,64,3: 12 KB)"
    )
    parser.add_argument("--litdata-python", help="an interpreter with litdata installed")
    parser.add_argument("--mds-python", help="an interpreter with mosaicml-streaming installed")
    parser.add_argument(
        "--small-chunk", type=int, default=2 << 20, help="the peers' small chunks, bytes (2 MB)"
    )
    parser.add_argument("--readers", help="only readers whose name contains one of these (a,b)")
    parser.add_argument(
        "--cases", default=",".join(CASES), help=f"some of {','.join(CASES)} (default: all)"
    )
    parser.add_argument(
        "--mds-shuffle-block",
        type=int,
        help="also MDS over its small shards with this shuffle_block_size (rows)",
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds for one epoch")
    parser.add_argument("--tmp", type=Path, help="folder for the caches (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="also save every run's result (JSON lines)")
    args = parser.parse_args()
    if args.shape != ",".join(map(str, SHAPE)):  # read again, in a process that has it set
        os.environ["BENCH_CACHE_SHAPE"] = args.shape
        return subprocess.call([sys.executable, *sys.argv])
    root = Path(tempfile.mkdtemp(prefix="bench_cache-", dir=args.tmp))
    server = Server()
    try:
        return run(server, args, root)
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)


def run(server: Server, args, root: Path) -> int:
    want = expected(args.rows)
    if args.transform:
        want["pixel_sum"] = 0
    readers = write_all(server, args, root / "written")
    if args.readers:
        keep = args.readers.lower().split(",")
        readers = [r for r in readers if any(k in r.name.lower() for k in keep)]
    print(f"rows: {args.rows}; every epoch must read {want}", flush=True)
    for r in readers:
        print(f"  {r.name}: {r.size / 1e6:.1f} MB on S3, {len(set(r.units.tolist()))} units")
    results: dict[tuple[str, str], list[dict]] = {}
    cases = [CASES[key] for key in args.cases.split(",")]
    for round_ in range(args.runs):
        caches = root / f"round-{round_}"
        for case in cases:
            for reader in readers:
                if case[0] == NO_CACHE and reader.name != "recordmill Parquet":
                    continue
                if args.workers and case[0] == NO_CACHE:
                    continue
                result = run_epoch(server, reader, case, caches, args)
                what = f"round {round_ + 1}, {reader.name}, {case[0]}"
                if "error" in result:
                    print(f"{what}: {result['error']}", flush=True)
                    if "stderr" in result and round_ == 0:
                        print(result["stderr"], file=sys.stderr)
                else:
                    check(result, want, what)
                    result["neighbours"] = reader.neighbours(result["labels"])
                    print(
                        f"{what}: {result['seconds']:.2f} s, {result['requests']} requests, "
                        f"{result['bytes'] / reader.size:.2f}x the dataset, "
                        f"neighbours {result['neighbours']:.3f}",
                        flush=True,
                    )
                result.pop("labels", None)
                result.pop("stderr", None)
                results.setdefault((reader.name, case[0]), []).append(result)
                if args.json:
                    with args.json.open("a") as f:
                        line = {"reader": reader.name, "case": case[0], "round": round_, **result}
                        f.write(json.dumps(line) + "\n")
        shutil.rmtree(caches, ignore_errors=True)
    table(readers, cases, results, args)
    return 0


def short(error: str) -> str:
    """An error's first sentence, for a table cell."""
    text = error.split(": ", 1)[1] if error.startswith("exit ") else error
    return "failed: " + text.split(". ")[0].replace("|", "/")[:100]


def table(readers, cases, results, args) -> None:
    load = os.getloadavg()
    print()
    print(
        f"{args.rows} rows, median of {args.runs} interleaved rounds, workers={args.workers}, "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end; each cell: "
        "bytes pulled / dataset bytes, requests, seconds"
    )
    print()
    names = [c[0] for c in cases]
    header = ["reader", "dataset MB", *names, "same-unit neighbours: epoch 1 / 30% epoch 1"]
    print("| " + " | ".join(header) + " |")
    print("| --- | " + " | ".join("---:" for _ in header[1:]) + " |")
    for reader in readers:
        cells = [reader.name, f"{reader.size / 1e6:.1f}"]
        for name in names:
            runs = results.get((reader.name, name))
            if not runs:
                cells.append("")
                continue
            good = [r for r in runs if "error" not in r]
            if not good:
                cells.append(short(runs[0]["error"]))
                continue
            ratio = statistics.median(r["bytes"] for r in good) / reader.size
            requests = statistics.median(r["requests"] for r in good)
            seconds = statistics.median(r["seconds"] for r in good)
            cells.append(f"{ratio:.2f}x, {requests:.0f}, {seconds:.2f} s")
        fractions = []
        for name in ("epoch 1", "30%: epoch 1"):
            good = [r for r in results.get((reader.name, name), []) if "error" not in r]
            fractions.append(f"{good[0]['neighbours']:.3f}" if good else "-")
        cells.append(" / ".join(fractions))
        print("| " + " | ".join(cells) + " |")
    for reader in readers:
        good = [r for r in results.get((reader.name, NO_CACHE), []) if "error" not in r]
        if good:
            print(f"\nrecordmill Parquet, {NO_CACHE}: neighbours {good[0]['neighbours']:.3f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        emit(CHILDREN[sys.argv[2]](json.loads(sys.argv[3])))
        sys.exit(0)
    sys.exit(main())
