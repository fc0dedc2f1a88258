"""The rows the page shows: which (seeded, spread over the dataset, or a few of each class), read
with ``ds[i]``, and turned into cells: thumbnails for images, text for the rest.

Without a label column the rows are one from each of ``n`` equal stretches of the dataset, drawn
at random within it, so that every partition and every part of the input order shows. With one,
each class keeps the rows of the ``k`` smallest random keys drawn during the statistics pass (a
seeded uniform choice among its rows), and the page shows a few of each.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from recordmill.dataset.columns import to_numpy
from recordmill.read.dataset import Dataset
from recordmill.read.decode import MAX_PIXELS
from recordmill.report import images
from recordmill.report.scan import Bar

MAX_PER_CLASS = 8
MAX_CLASSES = 10_000  # more distinct labels than this: sampled as if there were no label


def spread(total: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """One row drawn from each of ``n`` equal stretches of ``range(total)`` (all rows when there
    are no more than ``n``), in order."""
    if total <= n:
        return np.arange(total)
    bounds = np.arange(n + 1) * total // n
    return bounds[:-1] + (rng.random(n) * np.diff(bounds)).astype(np.int64)


class ClassSampler:
    """Up to ``k`` rows of each class, a seeded uniform choice: every row gets a random key,
    and each class keeps the rows with its ``k`` smallest keys (bottom-k sampling)."""

    def __init__(self, k: int, rng: np.random.Generator):
        self.k = k
        self._rng = rng
        self.classes: dict[Any, int] = {}
        self._kept = (np.empty(0, np.int64), np.empty(0), np.empty(0, np.int64))
        self.overflow = False

    def add(self, labels: pa.Array, offset: int) -> None:
        if self.overflow or not len(labels):
            return
        valid = labels.is_valid()
        encoded = pc.dictionary_encode(labels.filter(valid))
        mapping = np.array(
            [self.classes.setdefault(v, len(self.classes)) for v in encoded.dictionary.to_pylist()],
            dtype=np.int64,
        )
        if len(self.classes) > MAX_CLASSES:
            self.overflow = True
            return
        # recordmill's to_numpy, not pyarrow's: that one imports pandas (0.8 s).
        codes = mapping[to_numpy(encoded.indices)]
        rows = to_numpy(pc.indices_nonzero(valid)).astype(np.int64) + offset
        code, key, row = (
            np.concatenate([kept, new])
            for kept, new in zip(
                self._kept, (codes, self._rng.random(len(codes)), rows), strict=True
            )
        )
        order = np.lexsort((key, code))
        code, key, row = code[order], key[order], row[order]
        starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
        rank = np.arange(len(code)) - np.repeat(starts, np.diff(np.r_[starts, len(code)]))
        keep = rank < self.k
        self._kept = (code[keep], key[keep], row[keep])

    def rows(self) -> dict[Any, list[int]]:
        """The rows kept for each class, in row order."""
        names = {code: value for value, code in self.classes.items()}
        out: dict[Any, list[int]] = {}
        for code, row in zip(self._kept[0], self._kept[2], strict=True):
            out.setdefault(names[int(code)], []).append(int(row))
        return {value: sorted(rows) for value, rows in out.items()}


def per_class(kept: dict[Any, list[int]], rows: int) -> list[int]:
    """At most ``rows`` rows, the same number of each class shown (at least one), classes in
    their sorted order; with more classes than ``rows``, classes spread over that order."""
    classes = sorted(kept, key=sort_key)
    if not classes or rows <= 0:
        return []
    if len(classes) > rows:
        classes = [classes[i * len(classes) // rows] for i in range(rows)]
    each = max(1, min(MAX_PER_CLASS, rows // len(classes)))
    return [row for value in classes for row in kept[value][:each]]


def sort_key(value: Any) -> tuple[int, Any]:
    return (0, value) if isinstance(value, (int, float)) else (1, str(value))


@dataclass
class Cell:
    """One value of a shown row: an image (a ``data:`` URI), a placeholder (``error``), or text."""

    name: str
    text: str = ""
    image: str | None = None
    error: str | None = None
    small: bool = False  # a thumbnail under 64 pixels, enlarged on the page with sharp pixels


@dataclass
class Shown:
    """The shown rows' cells, and what they tell of the columns the statistics pass skips."""

    rows: list[tuple[int, list[Cell]]] = field(default_factory=list)
    sizes: dict[str, list[int]] = field(default_factory=dict)  # bytes columns: value sizes
    formats: dict[str, Counter[str]] = field(default_factory=dict)  # bytes columns: image formats
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)  # tensors: low, high


def read(
    ds: Dataset,
    positions: list[int],
    bar: Bar,
    group_bytes: float,
    max_pixels: int | None = MAX_PIXELS,
) -> Shown:
    """The rows at ``positions`` of ``ds`` (its selected columns), as cells (an image of more
    than ``max_pixels`` pixels not decoded)."""
    values = []
    for position in positions:
        # ds[i], not take(): a row group decoded once serves every row of it all the same, and
        # pyarrow's take with numpy indices would import pandas (0.2-0.8 s).
        values.append(ds[position])
        bar.add(1, int(group_bytes))  # Parquet decodes a group per row, at most
    shown = Shown()
    pictures = {name for name in ds.schema.names if _pictures(name, values)}
    for index, row in zip(positions, values, strict=True):
        cells = [_cell(name, v, name in pictures, max_pixels) for name, v in row.items()]
        shown.rows.append((index, cells))
        for name, value in row.items():
            _note(shown, name, value)
    return shown


def _pictures(name: str, rows: list[dict[str, Any]]) -> bool:
    """Whether a column holds images: encoded ones by their first bytes, or image-shaped uint8
    arrays (one is enough: the others are then shown as images or as what kept them from it)."""
    for row in rows:
        value = row[name]
        if isinstance(value, bytes) and images.sniff(value):
            return True
        if images.is_image_array(value):
            return True
    return False


def _cell(name: str, value: Any, picture: bool, max_pixels: int | None = MAX_PIXELS) -> Cell:
    if value is None:
        return Cell(name, text="null")
    if picture:
        try:
            thumb = images.thumbnail(value, max_pixels)
            top = images.stretched(value)[1] if isinstance(value, np.ndarray) else None
            note = f"values 0-{top}, contrast stretched" if top is not None else ""
            small = max(thumb.size) < 64
            return Cell(name, text=note, image=images.data_uri(thumb), small=small)
        except Exception as e:  # a damaged image is a mark on the page, whatever Pillow raised
            return Cell(name, text=text(value), error=images.decode_error(e, value))
    return Cell(name, text=text(value))


def _note(shown: Shown, name: str, value: Any) -> None:
    if isinstance(value, bytes):
        shown.sizes.setdefault(name, []).append(len(value))
        shown.formats.setdefault(name, Counter())[images.sniff(value) or "other"] += 1
    elif isinstance(value, np.ndarray) and value.size and value.dtype.kind in "biuf":
        low, high = float(value.min()), float(value.max())
        if name in shown.ranges:
            low, high = min(low, shown.ranges[name][0]), max(high, shown.ranges[name][1])
        shown.ranges[name] = (low, high)


def text(value: Any, width: int = 80) -> str:
    """A value as one short line: bytes by size and first bytes, arrays by dtype and shape (and
    their values when few), numbers to four significant digits."""
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value):,} bytes: {value[:6].hex(' ')}{' …' if len(value) > 6 else ''}"
    if isinstance(value, np.ndarray):
        if value.size <= 8:
            return text(value.tolist(), width)
        return f"{value.dtype} array {list(value.shape)}"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        inner = ", ".join(text(v, width) for v in value[:8])
        shown = f"[{inner}{', …' if len(value) > 8 else ''}]"
        return shown if len(shown) <= width else shown[: width - 2] + "…]"
    shown = value if isinstance(value, str) else repr(value)
    return shown if len(shown) <= width else shown[: width - 1] + "…"
