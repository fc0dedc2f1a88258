"""Writes the LitData datasets beside it with Lightning's own ``litdata.optimize`` (litdata 0.2.76,
torch 2.14.1, Python 3.11, numpy 2.1); tests/plugin/builtin/test_litdata.py reads them without
litdata or torch. Run again with litdata installed (in a separate venv: ``pip install litdata``;
it pulls a CUDA build of torch, which is why CI does not install it):

    python tests/data/litdata/make.py

Every value is a function of the row's number (``item`` below); beside each dataset,
``expected.json`` holds every item as litdata's own ``StreamingDataset`` gives it, made JSON by
``tests/data/mds/make.py``'s ``plain``:

- ``every_format/``: 30 items of every format optimize infers for these values (int, float,
  bool, str, bytes, numpy arrays with and without header, tensors, a PIL image, a JPEG, nested
  dicts and a tuple), in chunks of at most 2 KB, uncompressed;
- ``zstd_batch/`` (the default of ``compression="zstd"``: framed zstd in ``.bin``) and
  ``zstd_chunk/`` (``compression_level="chunk"``: whole ``.zstd.bin`` files): 40 small items;
- ``tokens/``: 1-D token arrays written with ``TokensLoader`` (blocks of 8 tokens);
- ``pickled/``: 5 items whose value only pickle serializes, refused unless asked for.
"""

import io
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from tests.data.mds.make import plain

HERE = Path(__file__).resolve().parent


def picture(i: int) -> Image.Image:
    return Image.fromarray((np.arange(8 * 6 * 3).reshape(8, 6, 3) * (i + 1) % 256).astype(np.uint8))


def jpeg(i: int) -> Image.Image:
    out = io.BytesIO()
    picture(i).save(out, "JPEG")
    return Image.open(io.BytesIO(out.getvalue()))


def item(i: int, as_tensor=None) -> dict:
    """Item ``i``; ``as_tensor`` makes the tensors (torch.as_tensor; the tests give np.asarray)."""
    if as_tensor is None:
        import torch

        as_tensor = torch.as_tensor
    return {
        "id": i,
        "score": i / 3,
        "flag": i % 2 == 0,
        "name": f"row {i} é",
        "data": bytes(range(i % 7)),
        "grid": np.arange(6, dtype=np.int16).reshape(2, 3) - i,
        "vec": np.arange(1 + i % 5, dtype=np.float32) * i,
        "t2": as_tensor(np.full((2, 2), i, np.float32)),
        "t1": as_tensor(np.arange(1 + i % 3, dtype=np.int64)),
        "image": picture(i),
        "photo": jpeg(i),
        "meta": {"depth": i % 4, "tag": f"t{i}"},
        "pair": (i, f"p{i}"),
    }


def small(i: int) -> dict:
    return {"id": i, "name": f"row {i}", "vec": np.arange(1 + i % 5, dtype=np.int32) + i}


def tokens(i: int) -> np.ndarray:
    return np.arange(10 * i, 10 * i + 8 + i % 3 * 8, dtype=np.int32)


class Opaque:
    def __init__(self, i):
        self.i = i


def opaque(i: int) -> dict:
    return {"id": i, "obj": Opaque(i)}


def write(name: str, fn, count: int, **options) -> None:
    from litdata import StreamingDataset, optimize

    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    optimize(fn, list(range(count)), str(out), num_workers=1, mode="overwrite", **options)
    for leftover in out.glob("*.lock"):
        leftover.unlink()
    if name == "pickled":  # (its values are of a class of this script's)
        return
    with tempfile.TemporaryDirectory() as scratch:  # (the reader inflates .zstd.bin in place)
        copy = shutil.copytree(out, Path(scratch) / name)
        theirs = StreamingDataset(str(copy), item_loader=options.get("item_loader"))
        samples = [json.dumps(plain(theirs[i]), ensure_ascii=False) for i in range(len(theirs))]
        (out / "expected.json").write_text("[\n" + ",\n".join(samples) + "\n]\n")


if __name__ == "__main__":
    from litdata.streaming.item_loader import TokensLoader

    write("every_format", item, 30, chunk_bytes=2048)
    write("zstd_batch", small, 40, chunk_bytes=1024, compression="zstd")
    write("zstd_chunk", small, 40, chunk_bytes=1024, compression="zstd", compression_level="chunk")
    write("tokens", tokens, 12, chunk_size=64, item_loader=TokensLoader(block_size=8))
    write("pickled", opaque, 5, chunk_bytes=2048)
