"""LitData optimized datasets, as ``litdata.optimize`` writes them, read without litdata or torch.

A dataset is a folder with ``index.json`` (its ``config``: the leaves' formats in
``data_format``, the tree they came from in ``data_spec``, the item loader, compression; its
``chunks``: each file's name and item count) and the chunks, ``chunk-W-N.bin``. A chunk is
``count``, ``offsets``, then the items; an item of the default ``PyTreeLoader`` is the size of each
leaf (uint32 each) and the leaves' bytes; an item of ``TokensLoader`` is one array's bytes.
Compressed (``compression="zstd"``), a chunk is either a whole ``.zstd.bin`` file (level
``chunk``), framed zstd inside ``.bin`` (level ``batch``, the default: a directory, then frames of
items) or each item a zstd frame (level ``sample``).

Each leaf is a column, named by its path in the item (``{"meta": {"tag": ...}}``: ``meta_tag``;
a tuple's leaves ``pair_0``, ``pair_1``; an item that is one value: ``value``, tokens:
``tokens``). ``int`` is an int64, ``float`` a float64, ``bool``, ``str``/``text`` strings,
``bytes``; ``jpeg`` and ``image:EXT`` the image's bytes as stored, ``pil`` its pixels as PNG
bytes; ``numpy``/``tensor`` arrays of the first item's dtype and number of dimensions,
``no_header_numpy:K``/``no_header_tensor:K`` 1-D arrays of their dtype; ``pickle`` as
``--pickles`` says. Other formats (video, audio, files, litdata's binary JSON) are refused by name.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from recordmill.errors import ConfigError, InputError
from recordmill.inputs import packed

INDEX = "index.json"
LOADERS = ("PyTreeLoader", "TokensLoader")
NUMPY = {
    0: "int8", 1: "int16", 2: "int32", 3: "int64", 4: "uint8", 5: "uint16", 6: "uint32",
    7: "uint64", 8: "float16", 9: "float32", 10: "float64", 13: "bool",
}  # fmt: skip
TORCH = {
    0: "float32", 1: "float32", 2: "float64", 3: "float64", 8: "float16", 9: "float16",
    11: "uint8", 12: "int8", 13: "int16", 14: "int16", 15: "int32", 16: "int32", 17: "int64",
    18: "int64", 19: "bool", 20: "uint16",
}  # fmt: skip
SCALARS = {"int": "int64", "float": "float64", "bool": "bool", "str": "string", "text": "string"}
SCALARS.update({"bytes": "bytes", "jpeg": "bytes", "pil": "bytes"})
FRAMED = b"LDFZ01\0\0"
_PREFIX, _FRAME = struct.Struct("<8sHHIII"), struct.Struct("<IIQII")


@dataclass(frozen=True)
class Layout:
    """What every chunk of a dataset holds: its leaves and how the chunks are compressed."""

    names: tuple[str, ...]
    formats: tuple[str, ...]
    tokens: bool
    compression: str | None
    level: str  # chunk, batch or sample: what one zstd frame holds
    chunks: tuple[tuple[str, int], ...]  # (path, items)


def read_index(folder: str) -> Layout:
    """The dataset ``folder/index.json`` describes, checked: one line naming what is wrong."""
    path = os.path.join(folder, INDEX)
    try:
        with open(path, "rb") as f:
            index = json.load(f)
        config = index["config"]
        chunks = tuple(
            (_chunk_path(folder, c["filename"]), int(c["chunk_size"])) for c in index["chunks"]
        )
        formats, loader = tuple(config["data_format"]), config["item_loader"]
        names = leaf_names(json.loads(config["data_spec"]), loader == "TokensLoader")
        compression, level = config.get("compression"), config.get("compression_level") or "chunk"
    except FileNotFoundError:
        raise InputError(f"{folder}: no {INDEX} (expected a LitData optimized dataset)") from None
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: not a LitData index ({type(e).__name__}: {e})") from None
    if config.get("encryption"):
        raise ConfigError(f"{path}: its chunks are encrypted ({config['encryption']}); not read")
    if loader not in LOADERS:
        raise ConfigError(f"{path}: item loader {loader!r} is not read (expected one of {LOADERS})")
    if len(names) != len(formats) or not chunks:
        raise InputError(
            f"{path}: {len(names)} leaves, {len(formats)} formats, {len(chunks)} chunks"
        )
    return Layout(names, formats, loader == "TokensLoader", compression, level, chunks)


def _chunk_path(folder: str, name: str) -> str:
    if os.path.basename(name) != name or name in ("", ".", ".."):
        raise ValueError(f"chunk name {name!r} leads out of the dataset's folder")
    return os.path.join(folder, name)


def leaf_names(spec: list[Any], tokens: bool) -> tuple[str, ...]:
    """The column name of each leaf of a tree spec (torch's ``treespec_dumps``), in order."""
    node = spec[1]
    if node["type"] is None:
        return ("tokens" if tokens else "value",)
    return tuple(_leaves(node, "item" if "dict" not in node["type"] else ""))


def _leaves(node: dict[str, Any], prefix: str) -> list[str]:
    if node["type"] is None:
        return [prefix]
    children = node["children_spec"]
    keys = json.loads(node["context"]) if "dict" in node["type"] else list(range(len(children)))
    if not isinstance(keys, list) or len(keys) != len(children):
        raise ValueError(f"a {node['type']} node whose keys are {keys!r}")
    joined = [f"{prefix}_{k}" if prefix else str(k) for k in keys]
    return [
        name for child, key in zip(children, joined, strict=True) for name in _leaves(child, key)
    ]


def items(layout: Layout, chunk: int) -> list[memoryview]:
    """The bytes of each item of a chunk, decompressed; :class:`packed.Damaged` if the file does
    not hold what the index says."""
    path, count = layout.chunks[chunk]
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".zstd.bin"):
        data = packed.inflate("zstd", data, None, path)
    if data[:8] == FRAMED:
        return _framed(memoryview(data), count, path)
    found = packed.sample_table(data, count, path)
    if layout.compression and layout.level == "sample":
        return [memoryview(packed.inflate("zstd", item, None, path)) for item in found]
    return found


def _framed(view: memoryview, count: int, path: str) -> list[memoryview]:
    """The items of a framed zstd chunk: its offsets, its frames, each inflated once."""
    if len(view) < _PREFIX.size:
        raise packed.Damaged(f"{path}: its framed zstd header is cut short")
    _, version, _, items, _, frames = _PREFIX.unpack_from(view, 0)
    if version != 1 or items != count:
        raise packed.Damaged(
            f"{path}: framed zstd version {version} of {items} items, expected 1 of {count}"
        )
    at = _PREFIX.size + 4 * (items + 1)
    if len(view) < at + _FRAME.size * frames:
        raise packed.Damaged(f"{path}: its framed zstd directory is cut short")
    offsets = np.frombuffer(view[_PREFIX.size : at], "<u4")
    pieces, first = [], 0
    for k in range(frames):
        start, held, where, size, raw = _FRAME.unpack_from(view, at + k * _FRAME.size)
        if where + size > len(view):
            raise packed.Damaged(f"{path}: frame {k} runs past the file's end")
        if start != first:  # frames in order, each item in one
            raise packed.Damaged(f"{path}: frame {k} starts at item {start:,}, expected {first:,}")
        first += held
        pieces.append(packed.inflate("zstd", view[where : where + size], raw, path))
    if first != items:
        raise packed.Damaged(f"{path}: its frames hold {first:,} items, its header says {items:,}")
    return packed.items_at(memoryview(b"".join(pieces)), offsets, path)


def leaves(layout: Layout, item: memoryview) -> list[memoryview]:
    """An item's bytes, one view per leaf."""
    if layout.tokens:
        return [item]
    return packed.sized(item, 0, len(layout.formats), "leaves")


def array(fmt: str, data: memoryview) -> np.ndarray:
    """A ``numpy``, ``tensor`` or header-less array leaf."""
    kind, _, code = fmt.partition(":")
    if kind == "numpy":
        dtype, ndim = np.frombuffer(data[:8], "<u4").tolist()
        shape = np.frombuffer(data[8 : 8 + 4 * ndim], "<u4").tolist()
        return np.frombuffer(data[8 + 4 * ndim :], _dtype(NUMPY, dtype, fmt)).reshape(shape)
    if kind == "tensor":
        return _tensor(data, fmt)
    table = NUMPY if kind == "no_header_numpy" else TORCH
    return np.frombuffer(data, _dtype(table, int(code), fmt))


def _tensor(data: memoryview, fmt: str) -> np.ndarray:
    """A ``tensor`` leaf: its dtype code, number of dimensions and shape as uint32s, big-endian
    (litdata 0.2.76) or, as earlier litdata wrote them, little-endian: the order whose header
    and shape account for every byte."""
    for order in (">", "<"):
        code, ndim = struct.unpack_from(f"{order}II", data)
        if code not in TORCH or len(data) < 8 + 4 * ndim:
            continue
        shape = struct.unpack_from(f"{order}{ndim}I", data, 8)
        if 8 + 4 * ndim + int(np.prod(shape)) * np.dtype(TORCH[code]).itemsize == len(data):
            return np.frombuffer(data[8 + 4 * ndim :], TORCH[code]).reshape(shape)
    raise ValueError(f"{fmt}: {len(data):,} bytes that no tensor header accounts for")


def _dtype(table: dict[int, str], code: int, fmt: str) -> str:
    if code not in table:
        raise ValueError(f"{fmt}: dtype code {code} is not a type recordmill stores")
    return table[code]


def field(fmt: str, first: memoryview | None, pickles: str) -> dict[str, Any]:
    """The column a leaf's format becomes; ``first``: the first item's leaf."""
    kind = fmt.partition(":")[0]
    if fmt in SCALARS or kind == "image":
        return {"type": SCALARS.get(fmt, "bytes")}
    if kind in ("numpy", "tensor", "no_header_numpy", "no_header_tensor"):
        if kind.startswith("no_header"):
            return {"type": array(fmt, memoryview(b"")).dtype.name, "shape": [-1]}
        assert first is not None, "the plugin reads the first sample where an array needs it"
        found = array(fmt, first)
        return {"type": found.dtype.name, "shape": [-1] * found.ndim}
    if kind == "pickle":
        return packed.pickle_field(pickles)
    raise ValueError(
        f"format {fmt!r} is not read (expected int, float, bool, str, text, bytes, jpeg, pil, "
        "image:EXT, numpy, tensor, their no_header forms, or pickle)"
    )


def decoder(fmt: str, spec: dict[str, Any], pickles: str) -> Callable[[memoryview], Any]:
    """The function from a leaf's bytes to the value it stores."""
    simple: dict[str, Callable[[memoryview], Any]] = {
        "int": lambda d: struct.unpack("<q", d)[0], "float": lambda d: struct.unpack("<d", d)[0],
        "bool": _bool, "str": packed.text, "text": packed.text, "bytes": bytes, "jpeg": bytes,
        "pil": packed.pil_png,
    }  # fmt: skip
    kind = fmt.partition(":")[0]
    if fmt in simple:
        return simple[fmt]
    if kind == "image":
        return bytes
    if kind == "pickle":
        return packed.pickled(pickles)
    return lambda data: packed.checked_array(array(fmt, data), spec, "first item")


def _bool(data: memoryview) -> bool:
    if len(data) != 1:
        raise ValueError(f"a bool of {len(data)} bytes")
    return data[0] != 0


def make_demo(folder: str | os.PathLike[str], pairs: list[tuple[bytes, str, int]]) -> None:
    """A LitData dataset of (JPEG, caption, label) items in two chunks, laid out as
    ``litdata.optimize`` does for ``{"image": jpeg, "caption": str, "label": int}``."""
    os.makedirs(folder, exist_ok=True)
    leaf = {"type": None, "context": None, "children_spec": []}
    keys = ["image", "caption", "label"]
    spec = [1, {"type": "builtins.dict", "context": json.dumps(keys), "children_spec": [leaf] * 3}]
    chunks = []
    for k in range(2):
        items = [
            np.array([len(j), len(c.encode()), 8], "<u4").tobytes() + j + c.encode()
            + struct.pack("<q", label)
            for j, c, label in pairs[k::2]
        ]  # fmt: skip
        data = packed.laid_out(items)
        name = f"chunk-0-{k}.bin"
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
        chunks.append(
            {"chunk_bytes": len(data), "chunk_size": len(items), "dim": None, "filename": name}
        )
    config = {
        "chunk_bytes": 1 << 26, "chunk_size": None, "compression": None, "encryption": None,
        "data_format": ["jpeg", "str", "int"], "data_spec": json.dumps(spec),
        "item_loader": "PyTreeLoader",
    }  # fmt: skip
    with open(os.path.join(folder, INDEX), "w") as f:
        json.dump({"chunks": chunks, "config": config}, f)
