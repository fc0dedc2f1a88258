"""How a dataset is read: the options every reader passes on to :func:`recordmill.open` (``open``,
``mix``, the PyTorch datasets, ``TokenBlocks`` and ``DataLoader`` take them by the same names),
one default each, and where its disk cache is (:class:`CachePlace`, built once per open).

``cache_limit`` takes what users write: bytes (``200 << 30``), a size (``"50GB"``, ``"1.5 TiB"``),
or a fraction of the free space of the cache folder's disk (``0.3``; the default is half).
"""

from __future__ import annotations

import numbers
import re
from dataclasses import asdict, dataclass
from typing import Any

# Decoded Parquet row groups kept for random access and shuffles (Arrow IPC needs none), and
# what a sequential pass decodes ahead.
CACHE_BYTES = 256 << 20
READ_AHEAD_BYTES = 64 << 20
# The disk cache's default limit: this fraction of the free space of its folder's disk.
DEFAULT_CACHE_FRACTION = 0.5

# What ``cache_limit`` takes (see :func:`cache_limit_bytes`).
CacheLimit = int | str | float | None

_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_FRACTION = re.compile(r"\s*0?\.\d+\s*|\s*1\.0*\s*")
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)b?\s*", re.I)


@dataclass(frozen=True)
class ReadOptions:
    """What :func:`recordmill.open` was given besides the path: what another process (a
    DataLoader worker the dataset is pickled into) opens it with again, to read it alike."""

    filesystem: Any = None
    cache_bytes: int = CACHE_BYTES
    read_ahead_bytes: int = READ_AHEAD_BYTES
    checksums: bool = True
    cache_dir: str | bool | None = None
    cache_limit: int | str | float | None = None
    version: int | None = None
    on_error: str = "raise"

    def given(self) -> dict[str, Any]:
        """The options as keyword arguments of ``open()``."""
        return asdict(self)


@dataclass(frozen=True)
class CachePlace:
    """Where a dataset's disk cache is: the ``folder``, the ``limit`` as given (see
    :func:`cache_limit_bytes`), and whether the folder is the ``default`` one (which, when it
    cannot be made, is a warning and a read without it; a folder given is an error)."""

    folder: str
    limit: int | str | float | None
    default: bool

    def given(self) -> str | None:
        """``cache_dir`` as another process must be given it to read through the same cache."""
        return None if self.default else self.folder


def check_cache_limit(limit: int | str | float | None) -> None:
    """Refuse, in one line, a ``cache_limit`` that is no size (checked when a dataset is opened,
    whether or not it then reads through a cache)."""
    cache_limit_bytes(limit, free=0)


def cache_limit_bytes(limit: int | str | float | None, free: int) -> int:
    """``cache_limit`` in bytes, for a folder whose disk has ``free`` bytes free: bytes as
    they are, a size with a unit (``"50GB"``: 10**9 a GB; ``"50GiB"``: 2**30), or a fraction of
    ``free`` (a float from 0 to 1); None: ``DEFAULT_CACHE_FRACTION`` of ``free``."""
    if limit is None:
        return int(free * DEFAULT_CACHE_FRACTION)
    if isinstance(limit, str) and _FRACTION.fullmatch(limit):  # "0.3" from a CLI or YAML
        limit = float(limit)
    if isinstance(limit, float) and 0 < limit <= 1:
        return int(free * limit)
    if isinstance(limit, numbers.Integral) and not isinstance(limit, bool) and limit >= 0:
        return int(limit)
    if (
        isinstance(limit, str)
        and (m := _SIZE.fullmatch(limit))
        and (m.group(2) or "." not in m.group(1))
    ):
        number, unit, binary = float(m.group(1)), m.group(2).lower(), m.group(3)
        scale = 1024 ** "_kmgt".index(unit) if binary and unit else _UNITS[unit]
        return int(number * scale)
    raise ValueError(
        f"cache_limit must be bytes (an int), a size such as '50GB' or '1.5TiB', or a fraction "
        f"of the disk's free space from 0 to 1 (a float), got {limit!r}"
    )
