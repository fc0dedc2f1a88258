"""Writes the MDS datasets beside it with MosaicML's own ``MDSWriter`` (mosaicml-streaming 0.13.0,
Python 3.11, numpy 2.1); tests/plugin/builtin/test_mds.py reads them without the package.
Run again with it installed (in a separate venv: ``pip install mosaicml-streaming``):

    python tests/data/mds/make.py

Every value is a function of the row's number (``expected`` in the test):

- ``every_encoding/``: 30 rows of every encoding but pickle, in shards of at most 8 KB (several
  shards, uncompressed);
- ``zstd/``, ``gz/``: 40 rows of an id, a string and an array, compressed shards;
- ``pickled/``: 5 rows with a ``pkl`` column, refused unless the plugin is told to unpickle.

Beside each, ``expected.json``: every sample as mosaicml-streaming's own ``StreamingDataset``
gives it, each value made JSON by :func:`plain` (an image: its mode, size and the SHA-256 of its
pixels; an array: its dtype, shape and values).
"""

import hashlib
import io
import json
import shutil
from decimal import Decimal
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
ENCODINGS = {
    "id": "int",
    "name": "str",
    "data": "bytes",
    "u8": "uint8",
    "i16": "int16",
    "u32": "uint32",
    "i64": "int64",
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
    "arr": "ndarray",
    "arr_typed": "ndarray:int16",
    "arr_fixed": "ndarray:float32:2,3",
    "jpeg": "jpeg",
    "png": "png",
    "pil": "pil",
    "meta": "json",
    "si": "str_int",
    "sf": "str_float",
    "sd": "str_decimal",
    "jpegs": "list[jpeg]",
}


def picture(i: int, mode: str = "RGB") -> Image.Image:
    pixels = (np.arange(8 * 6 * 3).reshape(8, 6, 3) * (i + 1) % 256).astype(np.uint8)
    return Image.fromarray(pixels).convert(mode)


def reopened(image: Image.Image, fmt: str) -> Image.Image:
    out = io.BytesIO()
    image.save(out, fmt)
    return Image.open(io.BytesIO(out.getvalue()))


def row(i: int) -> dict:
    return {
        "id": i,
        "name": f"row {i} é",
        "data": bytes(range(i % 7)),
        "u8": i % 256,
        "i16": -i,
        "u32": i * 1000,
        "i64": -(2**40) - i,
        "f16": i / 4,
        "f32": i / 8,
        "f64": i / 3,
        "arr": np.arange(1 + i % 5, dtype=np.float64).reshape(1, -1) * i,
        "arr_typed": np.arange(1 + i % 4, dtype=np.int16) - i,
        "arr_fixed": np.full((2, 3), i, np.float32),
        "jpeg": reopened(picture(i), "JPEG"),
        "png": picture(i, "L"),
        "pil": picture(i),
        "meta": {"i": i, "tags": ["a", str(i)]},
        "si": 10**12 + i,
        "sf": i + 0.5,
        "sd": Decimal(i) / 8,
        "jpegs": [reopened(picture(i + k), "JPEG") for k in range(1 + i % 2)],
    }


def plain(value):
    """A value as JSON: what the tests compare recordmill's rows with."""
    if isinstance(value, Image.Image):
        pixels = np.asarray(value)
        return {
            "image": [value.mode, list(value.size), hashlib.sha256(pixels.tobytes()).hexdigest()]
        }
    if hasattr(value, "numpy"):  # a torch tensor
        value = value.numpy()
    if isinstance(value, np.ndarray):
        return {"array": [str(value.dtype), list(value.shape), value.tolist()]}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (bytes, memoryview)):  # (litdata's bytes are memoryviews)
        return {"bytes": bytes(value).hex()}
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def write(name: str, columns: dict, rows, **options) -> None:
    from streaming import MDSWriter, StreamingDataset

    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    with MDSWriter(out=str(out), columns=columns, **options) as writer:
        for r in rows:
            writer.write(r)
    theirs = StreamingDataset(local=str(out), shuffle=False, allow_unsafe_types=True)
    samples = [json.dumps(plain(theirs[i]), ensure_ascii=False) for i in range(len(theirs))]
    (out / "expected.json").write_text("[\n" + ",\n".join(samples) + "\n]\n")
    if options.get("compression"):  # the reader left the shards it decompressed beside them
        for shard in out.glob("shard.*.mds"):
            shard.unlink()


if __name__ == "__main__":
    write("every_encoding", ENCODINGS, (row(i) for i in range(30)), size_limit=8192)
    small = {"id": "int", "name": "str", "arr": "ndarray"}
    for codec in ("zstd", "gz"):
        rows = ({k: row(i)[k] for k in small} for i in range(40))
        write(codec, small, rows, compression=codec, size_limit=1024)
    write("pickled", {"id": "int", "obj": "pkl"}, ({"id": i, "obj": {"i": i}} for i in range(5)))
