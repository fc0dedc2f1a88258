"""Converting the datasets users hold today, against reading them once with the peer's own reader.

    python benchmarks/bench_importers.py               # median of 3 interleaved rounds
    python benchmarks/bench_importers.py --rows 2000 --runs 1

Data (made on first use under ``benchmarks/data/importers/``, git-ignored): ``--rows`` (10,000)
image-text pairs, a JPEG of 64 x 64 to 160 x 160 (seeded noise and gradient, about 6-12 KB), a
caption and a class, written as

- **WebDataset**: 8 shards by webdataset's own ``ShardWriter`` (``KEY.jpg``, ``KEY.txt``,
  ``KEY.cls``);
- **Hugging Face**: ``Dataset.from_dict(...).save_to_disk(num_shards=8)`` with an ``Image``, a
  ``Value("string")`` and a ``ClassLabel``;
- **MDS** (``MDSWriter``, columns ``bytes``/``str``/``int``, about 8 shards) and **LitData**
  (``litdata.optimize``, about 8 chunks), by ``--peer-python`` (default: this Python): a venv with
  ``mosaicml-streaming`` and ``litdata``, kept apart because litdata pulls a CUDA build of torch.
  Where it lacks them, these rows are left out, said so.

Each command is a whole process, timed from its start to its end (imports included), the page
cache warm; rounds interleaved, medians printed:

- ``webdataset: iterate``: ``wds.WebDataset(brace pattern)`` iterated, every sample's bytes
  touched (what reading the input once costs with the peer's reader);
- ``recordmill --script webdataset --workers N``: the conversion to Parquet, 4 partitions;
- ``HF: load_from_disk + iterate``: every row read, the image as its bytes (``decode=False``);
- ``recordmill --script huggingface --workers N``;
- ``MDS: StreamingDataset iterate`` / ``LitData: StreamingDataset iterate``: the peer's own
  reader over every sample, in ``--peer-python``; ``recordmill --script mds|litdata``.
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "importers"
SHARDS = 8

ITERATE_WDS = """
import sys, webdataset as wds
n = 0
for sample in wds.WebDataset(sys.argv[1], shardshuffle=False):
    n += len(sample["jpg"]) + len(sample["txt"]) + len(sample["cls"])
print(n)
"""

ITERATE_HF = """
import sys, datasets
ds = datasets.load_from_disk(sys.argv[1]).cast_column("image", datasets.Image(decode=False))
n = 0
for row in ds:
    n += len(row["image"]["bytes"]) + len(row["caption"]) + row["label"]
print(n)
"""


PEERS_WRITE = """
import os, shutil, sys, tarfile

def item(path):  # one shard's pairs; litdata's workers import this file to call it
    with tarfile.open(path) as tar:
        files = {}
        for member in tar:
            files[member.name.split(".", 1)[1]] = tar.extractfile(member).read()
            if len(files) == 3:
                yield {"image": files["jpg"], "caption": files["txt"].decode(),
                       "label": int(files["cls"])}
                files = {}

def shards(folder):
    return [os.path.join(folder, "wds", n) for n in sorted(os.listdir(os.path.join(folder, "wds")))]

if __name__ == "__main__":
    from streaming import MDSWriter
    import litdata
    folder, per_chunk = sys.argv[1], int(sys.argv[2])
    shutil.rmtree(os.path.join(folder, "mds"), ignore_errors=True)
    columns = {"image": "bytes", "caption": "str", "label": "int"}
    with MDSWriter(out=os.path.join(folder, "mds"), columns=columns, size_limit=per_chunk) as out:
        for shard in shards(folder):
            for pair in item(shard):
                out.write(pair)
    litdata.optimize(item, shards(folder), os.path.join(folder, "litdata"), chunk_bytes=per_chunk,
                     num_workers=1, mode="overwrite")
"""

ITERATE_MDS = """
import sys
from streaming import StreamingDataset
n = 0
for row in StreamingDataset(local=sys.argv[1], shuffle=False, batch_size=256):
    n += len(row["image"]) + len(row["caption"]) + row["label"]
print(n)
"""

ITERATE_LITDATA = """
import sys, litdata
n = 0
for row in litdata.StreamingDataset(sys.argv[1]):  # (its bytes are views of the chunk: copied)
    n += len(bytes(row["image"])) + len(row["caption"]) + row["label"]
print(n)
"""


def jpeg(rng: np.random.Generator) -> bytes:
    from PIL import Image

    side = int(rng.integers(64, 161))
    pixels = rng.integers(0, 256, (side, side, 3), dtype=np.uint8) // 2
    pixels += np.linspace(0, 120, side, dtype=np.uint8)[:, None, None]
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", quality=85)
    return buf.getvalue()


def make(rows: int) -> None:
    """The same rows as WebDataset shards and as a Hugging Face save_to_disk folder."""
    import datasets
    import webdataset as wds

    if (DATA / f"done-{rows}").exists():
        return
    shutil.rmtree(DATA, ignore_errors=True)
    (DATA / "wds").mkdir(parents=True)
    rng = np.random.default_rng(0)
    images = [jpeg(rng) for _ in range(rows)]
    captions = [f"a photo number {i} of class {i % 10}" for i in range(rows)]
    per_shard = -(-rows // SHARDS)
    with wds.ShardWriter(str(DATA / "wds" / "shard-%06d.tar"), maxcount=per_shard) as sink:
        for i in range(rows):
            sink.write({"__key__": f"{i:09d}", "jpg": images[i], "txt": captions[i], "cls": i % 10})
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "caption": datasets.Value("string"),
            "label": datasets.ClassLabel(names=[f"c{k}" for k in range(10)]),
        }
    )
    table = {
        "image": [{"bytes": b, "path": None} for b in images],
        "caption": captions,
        "label": [i % 10 for i in range(rows)],
    }
    hf = datasets.Dataset.from_dict(table, features=features)
    hf.save_to_disk(str(DATA / "hf"), num_shards=SHARDS)
    (DATA / f"done-{rows}").touch()


def make_packed(peer: str) -> bool:
    """MDS and LitData of the same rows, by ``peer`` (a Python with both); False if it lacks them."""
    found = subprocess.run([peer, "-c", "import streaming, litdata"], capture_output=True)
    if found.returncode != 0:
        print(f"MDS and LitData left out: {peer} has no mosaicml-streaming and litdata")
        return False
    if not (DATA / "litdata" / "index.json").exists():
        size = sum(p.stat().st_size for p in (DATA / "wds").glob("*.tar"))
        script = DATA / "peers_write.py"  # a file: litdata's workers import its function
        script.write_text(PEERS_WRITE)
        subprocess.run([peer, str(script), str(DATA), str(size // SHARDS)], check=True)
    return True


def commands(workers: list[int], peer: str | None) -> dict[str, list[str]]:
    shards = len(list((DATA / "wds").glob("shard-*.tar")))
    pattern = str(DATA / "wds" / f"shard-{{000000..{shards - 1:06d}}}.tar")
    writer = [sys.executable, str(HERE.parent / "writer.py"), "--partitions", "4", "--quiet"]
    out = str(DATA / "out")
    cases = {"webdataset: iterate": [sys.executable, "-c", ITERATE_WDS, pattern]}
    for n in workers:
        cases[f"recordmill --script webdataset --workers {n}"] = [
            *writer, "--script", "webdataset", "--input", pattern, "--workers", str(n),
            "--output", out, "--overwrite",
        ]  # fmt: skip
    cases["HF: load_from_disk + iterate"] = [sys.executable, "-c", ITERATE_HF, str(DATA / "hf")]
    for n in workers:
        cases[f"recordmill --script huggingface --workers {n}"] = [
            *writer, "--script", "huggingface", "--input", str(DATA / "hf"), "--workers", str(n),
            "--output", out, "--overwrite",
        ]  # fmt: skip
    packed = {"MDS": (ITERATE_MDS, "mds"), "LitData": (ITERATE_LITDATA, "litdata")}
    for peer_name, (iterate, script) in packed.items() if peer else ():
        cases[f"{peer_name}: StreamingDataset iterate"] = [peer, "-c", iterate, str(DATA / script)]
        for n in workers:
            cases[f"recordmill --script {script} --workers {n}"] = [
                *writer, "--script", script, "--input", str(DATA / script), "--workers", str(n),
                "--output", out, "--overwrite",
            ]  # fmt: skip
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", default="1,2", help="worker counts (default: 1,2)")
    parser.add_argument(
        "--peer-python", default=sys.executable, help="a Python with mosaicml-streaming and litdata"
    )
    args = parser.parse_args()
    make(args.rows)
    peer = args.peer_python if make_packed(args.peer_python) else None
    cases = commands([int(n) for n in args.workers.split(",")], peer)
    for command in cases.values():  # once untimed: the page cache warm, .pyc files made
        subprocess.run(command, check=True, capture_output=True)
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, command in cases.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            seconds[name].append(time.perf_counter() - start)
    size = sum(p.stat().st_size for p in (DATA / "wds").glob("*.tar")) / 1e6
    print(f"{args.rows:,} image-text pairs, {size:.0f} MB of shards; median of {args.runs}")
    print("| command | median s | min | max |\n| --- | ---: | ---: | ---: |")
    for name, values in seconds.items():
        print(
            f"| {name} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
