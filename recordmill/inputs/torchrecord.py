"""Reading TorchRecord datasets without caffe2 or protobuf: LMDB databases of caffe2
``TensorProtos``.

TorchRecord's ``Writer(data_list, output_dir, db_num=N, ...)`` splits its list into N consecutive
parts and writes part i to the LMDB database ``output_dir/db{i}`` (a folder holding
``data.mdb``), under the keys ``b"0"``, ``b"1"``, ... (the item's position in its part, as
decimal text). Each value is a serialized caffe2 ``TensorProtos``: ``repeated TensorProto protos
= 1``. Its default ``data_process_func`` writes two tensors: the image, ``data_type`` BYTE with
``dims`` = Pillow's ``img.size`` (width, height) and ``byte_data`` its RGB pixels, row by row;
and the label, ``data_type`` BYTE with the label's text (``b"3"``) in ``byte_data`` and no dims.

``TensorProto`` (pytorch's caffe2/proto/caffe2.proto): dims = 1 (int64, unpacked in proto2),
data_type = 2 (enum, default FLOAT), float_data = 3, int32_data = 4, byte_data = 5,
string_data = 6, name = 7, double_data = 9, int64_data = 10 (the numeric ones declared packed;
both forms are read, as protobuf parsers must). BOOL, UINT8, INT8, UINT16, INT16 and FLOAT16 (its
16 bits) are kept in int32_data.

The databases are read with the ``lmdb`` package (``pip install "recordmill[torchrecord]"``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from recordmill.errors import ConfigError, InputError
from recordmill.inputs.protobuf import ProtobufError, encode_varint, fields, message, varint

# caffe2's TensorProto.DataType: name, the field holding the values, the numpy type they become.
DATA_TYPES: dict[int, tuple[str, str, str]] = {
    1: ("FLOAT", "float_data", "float32"),
    2: ("INT32", "int32_data", "int32"),
    3: ("BYTE", "byte_data", "uint8"),
    4: ("STRING", "string_data", "bytes"),
    5: ("BOOL", "int32_data", "bool"),
    6: ("UINT8", "int32_data", "uint8"),
    7: ("INT8", "int32_data", "int8"),
    8: ("UINT16", "int32_data", "uint16"),
    9: ("INT16", "int32_data", "int16"),
    10: ("INT64", "int64_data", "int64"),
    12: ("FLOAT16", "int32_data", "float16"),
    13: ("DOUBLE", "double_data", "float64"),
}
BYTE = 3
FLOAT = 1  # proto2's default for an unset data_type
_FIELDS = {1: "dims", 3: "float_data", 4: "int32_data", 9: "double_data", 10: "int64_data"}
_FIXED = {"float_data": "<f4", "double_data": "<f8"}
INSTALL = (
    'the torchrecord plugin reads LMDB with the lmdb package: pip install "recordmill[torchrecord]"'
)


class TorchRecordError(ValueError):
    """A damaged database or record; the message names the database (and key and record)."""


@dataclass
class Tensor:
    """One caffe2 ``TensorProto``, its values as they are stored."""

    dims: list[int]
    data_type: int
    float_data: np.ndarray
    int32_data: list[int]
    byte_data: bytes
    string_data: list[bytes]
    double_data: np.ndarray
    int64_data: list[int]
    name: str = ""

    @property
    def type_name(self) -> str:
        return DATA_TYPES.get(self.data_type, (f"data_type {self.data_type}",))[0]

    def values(self) -> np.ndarray | list[bytes]:
        """The values of its data type, flat: a numpy array, or a list of bytes for STRING."""
        if self.data_type not in DATA_TYPES:
            raise ValueError(f"a tensor of {self.type_name}, which caffe2 does not define")
        _, field, dtype = DATA_TYPES[self.data_type]
        if field == "byte_data":
            return np.frombuffer(self.byte_data, np.uint8)
        if field == "string_data":
            return list(self.string_data)
        if field in _FIXED:
            return getattr(self, field)
        raw = getattr(self, field)
        if dtype == "float16":  # the 16 bits of each value, as an int
            return np.array(raw, np.uint16).view(np.float16)
        info = np.iinfo(np.int64 if dtype == "bool" else dtype)
        if raw and (min(raw) < info.min or max(raw) > info.max):
            raise ValueError(f"a {self.type_name} tensor holds a value out of its range")
        return np.array(raw, dtype)

    def array(self) -> np.ndarray:
        """The values shaped by ``dims`` (a scalar's dims are empty); STRING gives bytes objects."""
        values = self.values()
        count = math.prod(self.dims)
        if len(values) != count:
            raise ValueError(
                f"a {self.type_name} tensor of dims {self.dims} holds {len(values)} values, "
                f"not {count}"
            )
        if isinstance(values, list):
            return np.array(values, dtype=object).reshape(self.dims)
        return values.reshape(self.dims)


def _signed(value: int, bits: int) -> int:
    # int32 and int64 fields carry negative numbers as 64-bit two's complement varints.
    value &= (1 << 64) - 1
    value = value - (1 << 64) if value >= 1 << 63 else value
    if bits == 32 and not -(1 << 31) <= value < 1 << 31:
        raise ProtobufError(f"an int32 value {value} out of range")
    return value


def parse_tensor(buf: bytes) -> Tensor:
    """One serialized ``TensorProto``; raises :class:`ProtobufError` for a damaged message."""
    ints: dict[str, list[int]] = {"dims": [], "int32_data": [], "int64_data": []}
    fixed: dict[str, list[bytes]] = {"float_data": [], "double_data": []}
    data_type, byte_data, strings, name = FLOAT, b"", [], ""
    for number, wire, value in fields(buf):
        field = _FIELDS.get(number)
        if number == 2 and wire == 0:
            data_type = value
        elif number == 5 and wire == 2:
            byte_data = value
        elif number == 6 and wire == 2:
            strings.append(value)
        elif number == 7 and wire == 2:
            name = value.decode("utf-8", "replace")
        elif field in ints:
            bits = 32 if field == "int32_data" else 64
            if wire == 0:
                ints[field].append(_signed(value, bits))
            elif wire == 2:  # packed
                pos = 0
                while pos < len(value):
                    item, pos = varint(value, pos)
                    ints[field].append(_signed(item, bits))
            else:
                raise ProtobufError(f"field {number} ({field}) has wire type {wire}")
        elif field in fixed:
            size = 4 if field == "float_data" else 8
            # Unpacked values come one by one (wire 5 or 1), packed ones as a run of them (wire 2).
            if wire not in (2, 5 if size == 4 else 1) or len(value) % size:
                raise ProtobufError(f"field {number} ({field}) holds {len(value)} bytes")
            fixed[field].append(value)
        elif number in (1, 2, 5, 6, 7):
            raise ProtobufError(f"field {number} has wire type {wire}, not its declared one")
        # other fields (device_detail, segment, later additions) say nothing of the values
    return Tensor(
        dims=ints["dims"],
        data_type=data_type,
        float_data=np.frombuffer(b"".join(fixed["float_data"]), "<f4"),
        int32_data=ints["int32_data"],
        byte_data=byte_data,
        string_data=strings,
        double_data=np.frombuffer(b"".join(fixed["double_data"]), "<f8"),
        int64_data=ints["int64_data"],
        name=name,
    )


def parse_tensor_protos(buf: bytes) -> list[Tensor]:
    """A serialized ``TensorProtos``: its tensors in order."""
    tensors = []
    for number, wire, value in fields(buf):
        if number != 1:
            continue
        if wire != 2:
            raise ProtobufError(f"field 1 (protos) has wire type {wire}, not a message")
        tensors.append(parse_tensor(value))
    return tensors


def rgb_image(tensor: Tensor) -> np.ndarray:
    """The image tensor TorchRecord's Writer makes, as [height, width, 3] uint8: BYTE data with
    dims (width, height), Pillow's ``img.size``, and the RGB pixels row by row."""
    if tensor.data_type != BYTE:
        raise ValueError(f"the image tensor is {tensor.type_name}, not BYTE")
    if len(tensor.dims) != 2 or min(tensor.dims) < 1:
        raise ValueError(f"the image tensor has dims {tensor.dims}, not [width, height]")
    width, height = tensor.dims
    if len(tensor.byte_data) != width * height * 3:
        raise ValueError(
            f"the image tensor of dims [width {width}, height {height}] holds "
            f"{len(tensor.byte_data)} bytes, not {width * height * 3} (RGB)"
        )
    return np.frombuffer(tensor.byte_data, np.uint8).reshape(height, width, 3)


def label_value(tensor: Tensor) -> int | float | str | np.ndarray:
    """The label tensor: TorchRecord's BYTE text (``b"3"`` -> 3, as its ``default_transform``
    does with ``int(byte_data)``; other text stays a str), or the one value (or the values) of a
    numeric tensor."""
    text = None
    if tensor.data_type == BYTE and not tensor.dims:
        text = tensor.byte_data
    elif tensor.data_type == 4 and len(tensor.string_data) == 1:
        text = tensor.string_data[0]
    if text is not None:
        try:
            decoded = text.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"the label tensor holds {text[:20]!r}, which is not text") from None
        return int(decoded) if re.fullmatch(r"\s*[-+]?\d+\s*", decoded) else decoded
    if tensor.data_type == 4:
        raise ValueError(f"the label tensor holds {len(tensor.string_data)} strings, not one")
    values = tensor.array().reshape(-1)
    return values[0] if len(values) == 1 else values


# ---- the databases ----------------------------------------------------------------------------


def lmdb_module() -> Any:
    """The ``lmdb`` package, or a one-line error saying how to install it."""
    try:
        import lmdb
    except ImportError:
        raise ConfigError(INSTALL) from None
    return lmdb


def databases(path: str | os.PathLike[str]) -> tuple[str, ...]:
    """The LMDB databases of ``--input``: itself when it holds ``data.mdb`` (or is one), else the
    folders in it that do, in natural order (db2 before db10)."""
    path = os.fspath(path)
    if os.path.basename(path) == "data.mdb" and os.path.isfile(path):
        return (os.path.dirname(path) or ".",)
    if not os.path.isdir(path):
        raise InputError(f"--input {path} is not a folder")
    if os.path.isfile(os.path.join(path, "data.mdb")):
        return (path,)
    names = [n for n in os.listdir(path) if os.path.isfile(os.path.join(path, n, "data.mdb"))]
    if not names:
        raise InputError(
            f"--input {path} is not an LMDB database (no data.mdb) and holds none (db0/, db1/...)"
        )
    return tuple(os.path.join(path, n) for n in sorted(names, key=natural_key))


def natural_key(text: str) -> list[Any]:
    """``db10`` after ``db9``: the digit runs compared as numbers."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text) if p]


class Database:
    """One LMDB database, opened read-only (no lock file is made, so a read-only copy works)."""

    def __init__(self, path: str):
        self.path = path
        lmdb = lmdb_module()
        data = os.path.join(path, "data.mdb")
        try:
            self.env = lmdb.open(
                path, readonly=True, lock=False, readahead=False, subdir=True, max_dbs=0
            )
        except lmdb.Error as e:
            raise TorchRecordError(f"{data}: not a readable LMDB database: {e}") from None
        # LMDB maps the file: a page past its end would kill the process (SIGBUS), not raise.
        size = os.path.getsize(data)
        need = (self.env.info()["last_pgno"] + 1) * self.env.stat()["psize"]
        if size < need:
            self.env.close()
            raise TorchRecordError(
                f"{data}: the file ends at byte {size}, before its last page ends at byte {need} "
                "(truncated)"
            )

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.env.close()

    def entries(self) -> int:
        return self.env.stat()["entries"]

    def keys(self) -> list[bytes]:
        """Every key, in the Writer's order: by number when all are decimal (``b"10"`` after
        ``b"9"``, where LMDB's own order puts it after ``b"1"``), else in LMDB's order."""
        lmdb = lmdb_module()
        try:
            with self.env.begin(buffers=False) as txn:
                keys = list(txn.cursor().iternext(keys=True, values=False))
        except lmdb.Error as e:
            raise TorchRecordError(f"{self.path}: cannot list its keys: LMDB says {e}") from None
        if all(k.isdigit() for k in keys):
            keys.sort(key=lambda k: (len(k.lstrip(b"0")), k.lstrip(b"0"), k))
        return keys

    def values(self, keys: list[bytes]) -> Iterator[tuple[bytes, bytes | None]]:
        """(key, value) of each key (None for a key that has gone)."""
        lmdb = lmdb_module()
        with self.env.begin(buffers=False) as txn:
            for key in keys:
                try:
                    value = txn.get(key)
                except lmdb.Error as e:
                    raise TorchRecordError(f"{self.path}: key {key!r}: LMDB says {e}") from None
                yield key, value


# ---- writing (demo data and tests; recordmill itself only reads them) -------------------------


def encode_tensor(array: Any, data_type: int | None = None, dims: list[int] | None = None) -> bytes:
    """A serialized ``TensorProto`` of a numpy array (bytes -> BYTE; a list of bytes -> STRING)."""
    if isinstance(array, bytes):
        data_type, payload = data_type or BYTE, message(5, array)
        dims = [] if dims is None else dims
        body = b"".join(encode_varint(1 << 3) + encode_varint(d) for d in dims)
        return body + encode_varint(2 << 3) + encode_varint(data_type) + payload
    array = np.asarray(array)
    names = {v[2]: k for k, v in DATA_TYPES.items() if k != BYTE}
    data_type = data_type or names[array.dtype.name]
    _, field, _ = DATA_TYPES[data_type]
    dims = list(array.shape) if dims is None else dims
    body = b"".join(encode_varint(1 << 3) + encode_varint(d) for d in dims)
    body += encode_varint(2 << 3) + encode_varint(data_type)
    flat = array.reshape(-1)
    number = {v: k for k, v in _FIELDS.items()}.get(field)
    if field in _FIXED:
        body += message(number, flat.astype(_FIXED[field]).tobytes())
    elif field == "byte_data":
        body += message(5, flat.astype(np.uint8).tobytes())
    elif field == "string_data":
        body += b"".join(message(6, bytes(v)) for v in flat)
    else:
        if flat.dtype == np.float16:
            flat = flat.view(np.uint16)
        body += message(number, b"".join(encode_varint(int(v)) for v in flat))
    return body


def encode_tensor_protos(tensors: list[bytes]) -> bytes:
    """A serialized ``TensorProtos`` of serialized ``TensorProto`` messages."""
    return b"".join(message(1, t) for t in tensors)


def encode_record(pixels: np.ndarray, label: int) -> bytes:
    """What TorchRecord's ``default_data_process_func`` writes for an RGB image and its label."""
    height, width, _ = pixels.shape
    image = encode_tensor(np.ascontiguousarray(pixels, np.uint8).tobytes(), BYTE, [width, height])
    return encode_tensor_protos([image, encode_tensor(str(label).encode(), BYTE)])


def write_database(path: str | os.PathLike[str], records: list[bytes]) -> None:
    """An LMDB database as TorchRecord's Writer makes one: the records under b"0", b"1", ..."""
    lmdb = lmdb_module()
    os.makedirs(path, exist_ok=True)
    size = sum(len(r) + 64 for r in records) * 3 + (1 << 16)
    env = lmdb.open(os.fspath(path), map_size=max(size, 1 << 20), lock=False)
    with env.begin(write=True) as txn:
        for index, record in enumerate(records):
            txn.put(str(index).encode(), record)
    env.close()


DEMO_DATABASES, DEMO_RECORDS = 2, 16  # databases, records in each


def demo_rows(rng: np.random.Generator) -> list[dict[str, Any]]:
    """The records :func:`make_demo` writes, database by database in key order: ``database``,
    ``key``, ``image`` (RGB pixels [16, 24, 3]: a label-coloured gradient) and ``label``."""
    yy, xx = np.mgrid[0:16, 0:24]
    rows = []
    for db in range(DEMO_DATABASES):
        for key in range(DEMO_RECORDS):
            label = int(rng.integers(0, 10))
            pixels = np.stack(
                [xx * 10 + label * 5, yy * 15, np.full_like(xx, 25 * label)], axis=-1
            ) + rng.integers(0, 8, size=(16, 24, 3))
            image = np.clip(pixels, 0, 255).astype(np.uint8)
            rows.append({"database": f"db{db}", "key": str(key), "image": image, "label": label})
    return rows


def make_demo(folder: Path, rng: np.random.Generator) -> None:
    """Two databases (``db0``, ``db1``) of 16 RGB images of 24 x 16 pixels and their labels, as
    TorchRecord's ``Writer(db_num=2)`` writes them (see :func:`demo_rows`). Needs ``lmdb``."""
    rows = demo_rows(rng)
    for db in range(DEMO_DATABASES):
        chosen = rows[db * DEMO_RECORDS : (db + 1) * DEMO_RECORDS]
        records = [encode_record(row["image"], row["label"]) for row in chosen]
        write_database(Path(folder) / f"db{db}", records)


__all__ = [
    "DATA_TYPES",
    "Database",
    "Tensor",
    "TorchRecordError",
    "databases",
    "demo_rows",
    "encode_record",
    "encode_tensor",
    "encode_tensor_protos",
    "label_value",
    "make_demo",
    "parse_tensor",
    "parse_tensor_protos",
    "rgb_image",
    "write_database",
]
