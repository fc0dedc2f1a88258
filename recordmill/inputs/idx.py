"""Reading the idx files of MNIST and its relatives (big-endian header, then raw arrays)."""

from __future__ import annotations

import gzip
import os

import numpy as np

_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """The array in an idx file, gzipped or not; ValueError naming the file when it is not one."""
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _DTYPES:
        raise ValueError(f"{path} is not an idx file (header {data[:4]!r})")
    ndim = data[3]
    header = 4 + 4 * ndim
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", ndim, offset=4))
    dtype = np.dtype(_DTYPES[data[2]])
    expected = header + int(np.prod(shape)) * dtype.itemsize
    if len(data) != expected:
        raise ValueError(f"{path}: header says {shape} ({expected} bytes), file has {len(data)}")
    array = np.frombuffer(data, dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="), copy=False)


def write_idx(path: str | os.PathLike[str], array: np.ndarray) -> None:
    """Write ``array`` as an idx file (gzipped when the name ends in .gz); for tests and tools."""
    codes = {np.dtype(v).newbyteorder("="): k for k, v in _DTYPES.items()}
    code = codes[array.dtype.newbyteorder("=")]
    header = bytes([0, 0, code, array.ndim]) + np.array(array.shape, ">u4").tobytes()
    payload = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    opener = gzip.open if os.fspath(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(payload)
