"""The page's charts: matplotlib figures rendered by its Agg backend to PNG bytes.

matplotlib is the ``show`` extra (``pip install 'recordmill[show]'``), imported only here and only
when a page is made. Figures are made with ``matplotlib.figure.Figure``, not pyplot, so that making
a page in a notebook leaves the notebook's own backend and figures alone. The PNGs carry no
``Software`` text (matplotlib would write its web address into each).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from recordmill.errors import RecordmillError

DPI = 96
BLUE, ORANGE, GRAY = "#4c72b0", "#dd8452", "#555555"
LABELLED_BARS = 40  # more classes than this: bars sorted by count, without a name each
MISSING = (
    "recordmill show draws its charts with matplotlib, which is not installed: "
    "pip install 'recordmill[show]'"
)


def require() -> None:
    """Raise the one-line error that says what to install when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as e:
        raise RecordmillError(MISSING) from e


def _figure(
    width: float,
    height: float,
    columns: int = 1,
    margins: tuple[float, ...] = (0.5, 0.45, 0.3, 0.15),
) -> tuple[Any, Any]:
    """A figure of ``width`` x ``height`` inches and its axes, with fixed ``margins`` in inches
    (left, bottom, top, right): matplotlib's automatic layouts would cost 3-4x the drawing."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=DPI)
    axes = figure.subplots(1, columns)
    left, bottom, top, right = margins
    figure.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        bottom=bottom / height,
        top=1 - top / height,
        wspace=0.15 if columns > 1 else None,
    )
    for ax in np.atleast_1d(axes):
        ax.tick_params(labelsize=8, colors=GRAY)
        ax.spines[["top", "right"]].set_visible(False)
    return figure, axes


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def histogram(
    counts: np.ndarray, edges: np.ndarray, xlabel: str = "", unit: str = "", integer: bool = False
) -> bytes:
    """A small histogram (for a column's cell in the schema table). Bars are as high as their
        count per unit of the x axis (the y axis is not drawn), so that a narrower last bin of whole
        numbers is not mistaken for fewer values. With a ``unit``, ticks read ``20 kB``; ``integer``
    puts them on whole numbers."""
    from matplotlib.ticker import EngFormatter, MaxNLocator

    top = float(np.max(np.abs(edges)))
    if top > 1e100:  # near float64's limits matplotlib's sums overflow: drawn in a power of ten
        exponent = int(np.floor(np.log10(top)))
        edges, xlabel = edges / 10.0**exponent, f"{xlabel} (x 1e{exponent})".strip()
    figure, ax = _figure(3.0, 1.3, margins=(0.25, 0.45 if xlabel else 0.3, 0.05, 0.25))
    ax.stairs(counts / np.diff(edges), edges, fill=True, color=BLUE)
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel(xlabel, fontsize=8, color=GRAY)
    ax.xaxis.set_major_locator(MaxNLocator(5, integer=integer))
    if unit:
        ax.xaxis.set_major_formatter(EngFormatter(unit=unit, places=0))
    ax.set_yticks([])
    ax.spines["left"].set_visible(False)
    return _png(figure)


def labels(names: Sequence[str], counts: Sequence[int]) -> bytes:
    """Rows per class, in the classes' own order; with many classes, sorted by count."""
    many = len(names) > LABELLED_BARS
    turned = not many and (max((len(n) for n in names), default=0) > 4 or len(names) > 16)
    longest = min(14, max((len(n) for n in names), default=1))
    bottom = 0.2 + 0.075 * longest if turned else 0.45  # rotated names need the room
    figure, ax = _figure(11.0, 2.2 + bottom, margins=(0.6, bottom, 0.1, 0.15))
    order = np.argsort(counts)[::-1] if many else np.arange(len(counts))
    heights = np.asarray(counts)[order]
    _bars(ax, heights)
    ax.axhline(np.mean(heights), color=ORANGE, linewidth=1, label="mean")
    if many:
        ax.set_xticks([])
        ax.set_xlabel(f"{len(names):,} classes, most rows first", fontsize=9, color=GRAY)
    else:
        ax.set_xticks(np.arange(len(names)), [_short(names[i]) for i in order])
        if turned:
            ax.tick_params(axis="x", labelrotation=60)
    ax.set_ylabel("rows", fontsize=9, color=GRAY)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    return _png(figure)


def partitions(rows: Sequence[int], sizes: Sequence[int]) -> bytes:
    """Rows and bytes of each partition, side by side, each with its mean."""
    from matplotlib.ticker import MaxNLocator

    figure, axes = _figure(11.0, 2.4, columns=2, margins=(0.6, 0.45, 0.3, 0.15))
    scale, unit = _unit(max(sizes, default=0))
    for ax, values, title in zip(
        axes, (np.asarray(rows), np.asarray(sizes) / scale), ("rows", unit), strict=True
    ):
        _bars(ax, values)
        ax.axhline(values.mean() if len(values) else 0, color=ORANGE, linewidth=1, label="mean")
        ax.set_title(f"{title} per partition", fontsize=9, color=GRAY)
        ax.set_xlabel("partition", fontsize=8, color=GRAY)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=8, frameon=False, loc="lower right")
    return _png(figure)


def _bars(ax: Any, heights: np.ndarray) -> None:
    """Bars at 0, 1, 2...: one patch each for a few; for many, one filled outline (a patch per
    bar costs about 6 ms to draw, and they touch anyway)."""
    if len(heights) <= LABELLED_BARS:
        ax.bar(np.arange(len(heights)), heights, color=BLUE, width=0.8)
    else:
        ax.stairs(heights, np.arange(len(heights) + 1) - 0.5, fill=True, color=BLUE)


def _unit(largest: float) -> tuple[float, str]:
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if largest >= scale:
            return scale, unit
    return 1.0, "bytes"


def _short(name: str, width: int = 14) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"
