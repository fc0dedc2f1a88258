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
