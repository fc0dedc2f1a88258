"""MosaicML MDS datasets, as ``streaming.MDSWriter`` writes them, read without mosaicml-streaming.

A dataset is a folder with ``index.json`` (version 2: one entry per shard, naming its columns,
their encodings and fixed sizes, its sample count, compression and files) and the shards,
``shard.00000.mds`` (or ``shard.00000.mds.zstd``, ``.gz``, ``.bz2``, ``.br``, ``.snappy`` where
compressed; a merged index names shards in sub-folders). A shard is ``count``, ``offsets``, the
writer's JSON config, then the samples; a sample is the sizes of its variable-size columns
(uint32 each) and then every column's bytes, in the index's column order.

Each encoding becomes a column (:func:`field`): ``int``/``int64``..``uint8``/``float16``.. their
type; ``str`` a string, ``bytes`` bytes; ``ndarray`` (``ndarray:DTYPE[:SHAPE]``) an array of its
dtype (a fixed shape when the encoding gives one; else the first sample's dtype and number of
dimensions, any length each); ``jpeg``/``png`` the image's bytes as stored, ``pil`` its pixels as
PNG bytes (lossless), ``list[jpeg]``/``list[png]``/``list[pil]``/``jpeg_array`` arrays of such
bytes; ``json`` the JSON text; ``str_int`` an int64, ``str_float`` a float64, ``str_decimal`` the
decimal's exact text; ``pkl`` as ``--pickles`` says (:mod:`recordmill.inputs.packed`).
"""

from __future__ import annotations

import functools
import json
import os
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from recordmill.errors import InputError
from recordmill.inputs import packed

INDEX = "index.json"
SCALARS = (
    "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
    "float16", "float32", "float64",
)  # fmt: skip
IMAGES = ("jpeg", "png", "pil")
LISTS = {"list[jpeg]": "jpeg", "list[png]": "png", "list[pil]": "pil"}
# NDArray's value dtypes by their code in a sample, and its shape dtypes by theirs.
VALUE_DTYPES = {
    8: "uint8", 9: "int8", 16: "uint16", 17: "int16", 18: "float16", 32: "uint32", 33: "int32",
    34: "float32", 64: "uint64", 65: "int64", 66: "float64",
}  # fmt: skip
SHAPE_DTYPES = ("<u1", "<u2", "<u4", "<u8")


@dataclass(frozen=True)
class Shard:
    """One shard of an index: where its file is and what its samples hold."""

    path: str  # the file as stored (compressed where the index says so)
    samples: int
    names: tuple[str, ...]
    encodings: tuple[str, ...]
    sizes: tuple[int | None, ...]
    compression: str | None
    raw_bytes: int


def read_index(folder: str) -> list[Shard]:
    """The shards ``folder/index.json`` lists, checked: one line naming what is wrong."""
    path = os.path.join(folder, INDEX)
    try:
        with open(path, "rb") as f:
            index = json.load(f)
        shards = [_shard(folder, entry) for entry in index["shards"]]
    except FileNotFoundError:
        raise InputError(f"{folder}: no {INDEX} (expected an MDS dataset's folder)") from None
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: not an MDS index ({type(e).__name__}: {e})") from None
    if not shards:
        raise InputError(f"{path}: lists no shard")
    first = shards[0]
    for shard in shards[1:]:
        if (shard.names, shard.encodings) != (first.names, first.encodings):
            raise InputError(
                f"{shard.path}: columns {dict(zip(shard.names, shard.encodings, strict=True))}, "
                f"the first shard's are {dict(zip(first.names, first.encodings, strict=True))}"
            )
    return shards


def _shard(folder: str, entry: dict[str, Any]) -> Shard:
    if entry["format"] != "mds" or entry["version"] != 2:
        raise ValueError(f"a shard of format {entry['format']!r} version {entry['version']}")
    stored = entry["zip_data"] or entry["raw_data"]
    name = stored["basename"]
    parts = name.split("/")
    if posixpath.isabs(name) or ".." in parts or "" in parts:
        raise ValueError(f"shard name {name!r} leads out of the dataset's folder")
    names, encodings = entry["column_names"], entry["column_encodings"]
    if not len(names) == len(encodings) == len(entry["column_sizes"]):
        raise ValueError("its column names, encodings and sizes are not as many")
    if not all(s is None or (type(s) is int and s >= 0) for s in entry["column_sizes"]):
        raise ValueError(f"column sizes {entry['column_sizes']!r}; expected whole numbers or null")
    return Shard(
        path=os.path.join(folder, *parts),
        samples=int(entry["samples"]),
        names=tuple(entry["column_names"]),
        encodings=tuple(entry["column_encodings"]),
        sizes=tuple(entry["column_sizes"]),
        compression=entry["compression"] if entry["zip_data"] else None,
        raw_bytes=int(entry["raw_data"]["bytes"]),
    )


def samples(shard: Shard) -> list[memoryview]:
    """The bytes of each sample of a shard (decompressed); :class:`packed.Damaged` if the file
    does not hold what the index says."""
    with open(shard.path, "rb") as f:
        data = f.read()
    if shard.compression:
        data = packed.inflate(shard.compression, data, shard.raw_bytes, shard.path)
    return packed.sample_table(data, shard.samples, shard.path)


def columns(shard: Shard, sample: memoryview) -> list[memoryview]:
    """A sample's bytes, one view per column."""
    variable = sum(size is None for size in shard.sizes)
    if len(sample) < 4 * variable:
        raise ValueError(f"{len(sample)} bytes, too short for its {variable} sizes")
    head = np.frombuffer(sample[: 4 * variable], "<u4").tolist() if variable else []
    sizes, at, values = iter(head), 4 * variable, []
    for size in shard.sizes:
        size = next(sizes) if size is None else size
        values.append(sample[at : at + size])
        at += size
    if at != len(sample):
        raise ValueError(f"its columns take {at:,} bytes, the sample has {len(sample):,}")
    return values


def ndarray(encoding: str, data: memoryview) -> np.ndarray:
    """An ``ndarray`` value: its dtype and shape from the encoding, else from the sample."""
    given = encoding.split(":")[1:]
    at = 0
    if given:
        dtype = given[0]
    elif data[0] in VALUE_DTYPES:
        dtype, at = VALUE_DTYPES[data[0]], 1
    else:
        raise ValueError(f"dtype code {data[0]} is not one MDSWriter writes")
    if len(given) == 2:
        shape = [int(d) for d in given[1].split(",")]
    else:
        ndim, code = data[at] >> 2, data[at] & 3
        width = 1 << code
        shape = np.frombuffer(data[at + 1 : at + 1 + ndim * width], SHAPE_DTYPES[code]).tolist()
        at += 1 + ndim * width
    return np.frombuffer(data[at:], "<" + np.dtype(dtype).str[1:]).reshape(shape)


def field(encoding: str, first: memoryview | None, pickles: str) -> dict[str, Any]:
    """The column an encoding becomes; ``first``: the first sample's value of it."""
    name = encoding.split(":")[0]
    if name == "int":
        return {"type": "int64"}
    if name in SCALARS:
        return {"type": name}
    if name == "ndarray":
        given = encoding.split(":")[1:2]
        if given and given[0] not in VALUE_DTYPES.values():
            raise ValueError(f"{encoding!r}: dtype {given[0]!r} is not one MDSWriter writes")
        assert first is not None, "the plugin reads the first sample where an array needs it"
        array = ndarray(encoding, first)
        fixed = len(encoding.split(":")) == 3
        return {
            "type": str(array.dtype),
            "shape": list(array.shape) if fixed else [-1] * array.ndim,
        }
    kinds = {"str": "string", "json": "string", "str_decimal": "string", "bytes": "bytes"}
    kinds.update({"str_int": "int64", "str_float": "float64", **dict.fromkeys(IMAGES, "bytes")})
    if name in kinds:
        return {"type": kinds[name]}
    if name in LISTS or name in ("jpeg_array", "jpegarray"):
        return {"type": "bytes", "shape": [-1]}
    if name == "pkl":
        return packed.pickle_field(pickles)
    raise ValueError(f"encoding {encoding!r} is not one MDSWriter writes")


def decoder(encoding: str, spec: dict[str, Any], pickles: str) -> Callable[[memoryview], Any]:
    """The function from a column's bytes to the value it stores."""
    name = encoding.split(":")[0]
    if name == "ndarray":
        return lambda data: packed.checked_array(ndarray(encoding, data), spec, "first sample")
    if name == "int" or name in SCALARS:
        return functools.partial(
            _scalar, np.dtype("<i8" if name == "int" else name).newbyteorder("<")
        )
    simple: dict[str, Callable[[memoryview], Any]] = {
        "str": packed.text, "json": packed.text, "str_decimal": packed.text, "bytes": bytes, "jpeg": bytes,
        "png": bytes, "pil": packed.pil_png, "str_int": lambda d: int(packed.text(d)),
        "str_float": lambda d: float(packed.text(d)),
    }  # fmt: skip
    if name in simple:
        return simple[name]
    if name in LISTS:
        element = simple[LISTS[name]]
        return lambda data: [element(v) for v in _listed(data, 4)]
    if name in ("jpeg_array", "jpegarray"):
        return lambda data: [bytes(v) for v in _listed(data, 0)]
    return packed.pickled(pickles)


def _scalar(dtype: np.dtype, data: memoryview) -> Any:
    if len(data) != dtype.itemsize:
        raise ValueError(f"{len(data)} bytes, where {dtype.name} takes {dtype.itemsize}")
    return np.frombuffer(data, dtype)[0].item()


def _listed(data: memoryview, skip: int) -> list[memoryview]:
    """The elements of a list encoding: ``skip`` bytes, a count, the sizes, the elements."""
    if len(data) < skip + 4:
        raise ValueError(f"a list of {len(data)} bytes, too short for its count")
    count = int(np.frombuffer(data[skip : skip + 4], "<u4")[0])
    return packed.sized(data, skip + 4, count, "elements")


def make_demo(folder: str | os.PathLike[str], pairs: list[tuple[bytes, str, int]]) -> None:
    """An MDS dataset of (JPEG, caption, label) pairs in two shards, laid out as MDSWriter does
    (columns sorted by name: caption, image, label)."""
    os.makedirs(folder, exist_ok=True)
    names, encodings, sizes = ["caption", "image", "label"], ["str", "jpeg", "int"], [None, None, 8]
    entries = []
    for k in range(2):
        samples = [
            np.array([len(c.encode()), len(j)], "<u4").tobytes() + c.encode() + j
            + np.int64(label).tobytes()
            for j, c, label in pairs[k::2]
        ]  # fmt: skip
        data = packed.laid_out(samples)
        name = f"shard.{k:05d}.mds"
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
        entries.append({
            "column_encodings": encodings, "column_names": names, "column_sizes": sizes,
            "compression": None, "format": "mds", "hashes": [], "samples": len(samples),
            "raw_data": {"basename": name, "bytes": len(data), "hashes": {}},
            "size_limit": 1 << 26, "version": 2, "zip_data": None,
        })  # fmt: skip
    with open(os.path.join(folder, INDEX), "w") as f:
        json.dump({"shards": entries, "version": 2}, f)
