"""Sizes as people read them, in the words of every message and page that shows one."""

from __future__ import annotations


def human_size(nbytes: float) -> str:
    """``591.7 MB``, ``48.1 KB``, ``5 bytes``."""
    if nbytes < 1000:
        return f"{nbytes:,.0f} bytes"
    for unit in ("KB", "MB", "GB", "TB"):
        nbytes /= 1000
        if nbytes < 1000 or unit == "TB":
            return f"{nbytes:,.1f} {unit}"
    raise AssertionError("unreachable")


def human_count(n: float) -> str:
    """``3.4 M``, ``812.5 k``, ``12``: a count or a rate, short."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,.0f}"
