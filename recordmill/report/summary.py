"""What the page says, as short lines of text: the header's facts from the manifest, each
column's summary from its statistics, the label distribution and the partitions' balance."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from recordmill.dataset.sizes import human_size
from recordmill.report.stats import (
    MAX_DISTINCT,
    BoolStats,
    ListStats,
    NumberStats,
    StringStats,
)

MOST_COMMON = 5
# Keys under which a manifest may record how long its write took (none does yet).
TOOK_KEYS = ("elapsed_s", "duration_s", "seconds", "wall_s")
# Keys under which a manifest may list the dataset's versions (datasets that grow, issue 25).
VERSION_LISTS = ("versions", "history")
BALANCED_ROWS = 0.10  # each partition's rows within 10 % of the mean (or 1 row)
BALANCED_BYTES = 0.25  # and its bytes within 25 %: images differ in size


def number(value: Any) -> str:
    """Integers and whole floats that float64 holds exactly with thousands separators, other
    numbers to four significant digits (float64's largest is 1.798e+308, not 309 digits that
    push the page's charts out of sight)."""
    if value is None:
        return "-"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)) and value.is_integer() and abs(value) < 2**53:
        return f"{int(value):,}"
    return f"{value:.4g}"


def header(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, text) of every fact the manifest holds about the dataset as a whole."""
    parts = manifest["partitions"]
    plugin = manifest.get("plugin") or {}
    # The plugin, settings and time are the latest run's: of the last version when it grew.
    version = int(manifest.get("version", 1))
    of = f" (version {version})" if version > 1 else ""
    facts = [
        ("rows", number(manifest["total_rows"])),
        ("partitions", number(len(parts))),
        ("format", str(manifest.get("format", "?"))),
        ("size on disk", human_size(sum(p.get("bytes", 0) for p in parts)) + " of partitions"),
        (f"plugin{of}", f"{plugin.get('name', '?')} ({plugin.get('source', '?')})"),
        (f"plugin options{of}", _pairs(plugin.get("options")) or "none"),
        (f"settings{of}", _pairs(manifest.get("settings")) or "none"),
        (f"written{of}", str(manifest.get("created", "not recorded"))),
    ]
    took = _took(manifest)
    if took is not None:
        facts.append(("took", took))
    tools = manifest.get("versions")
    if isinstance(tools, dict):
        facts.append(("written by", ", ".join(f"{k} {v}" for k, v in tools.items())))
    for key in VERSION_LISTS:
        listed = manifest.get(key)
        if isinstance(listed, list) and listed:
            facts.append(("versions", f"{len(listed)}: " + "; ".join(map(_version, listed))))
    if "version" in manifest:
        facts.append(("version", str(manifest["version"])))
    return facts


def _pairs(values: Any) -> str:
    if not isinstance(values, dict):
        return "" if values is None else str(values)
    return ", ".join(f"{k}={v!r}" for k, v in values.items())


def _took(manifest: dict[str, Any]) -> str | None:
    for key in TOOK_KEYS:
        if isinstance(manifest.get(key), (int, float)):
            return f"{manifest[key]:,.1f} s"
    return None


def _version(entry: Any) -> str:
    if not isinstance(entry, dict):
        return str(entry)
    plain = {k: v for k, v in entry.items() if isinstance(v, (str, int, float, bool))}
    return ", ".join(f"{k} {v}" for k, v in plain.items())


def facts(stats: Any) -> list[str]:
    """A streamed column's summary lines."""
    if isinstance(stats, NumberStats):
        lines = [f"min {number(stats.min)}, max {number(stats.max)}, mean {number(stats.mean)}"]
        lines.append(
            f"nulls {number(stats.nulls)}"
            + (f", NaN {stats.nans:,}" if stats.nans else "")
            + (f", inf {stats.infs:,}" if stats.infs else "")
            + (f", -inf {stats.neg_infs:,}" if stats.neg_infs else "")
        )
        if stats.sample.rate < 1:
            lines.append(f"histogram of a uniform sample of {len(stats.sample.values()):,}")
        return lines
    if isinstance(stats, StringStats):
        return _strings(stats)
    if isinstance(stats, BoolStats):
        return [f"true {stats.true:,}, false {stats.false:,}, nulls {stats.nulls:,}"]
    if isinstance(stats, ListStats):
        low, high = stats.lengths.min, stats.lengths.max
        length = number(low) if low == high else f"{number(low)} to {number(high)}"
        return [f"values per row: {length}", *(f"values: {line}" for line in facts(stats.values))]
    return []


def _strings(stats: StringStats) -> list[str]:
    if stats.overflow:
        return [f"more than {MAX_DISTINCT:,} distinct, nulls {stats.nulls:,}"]
    top = stats.counts.most_common(MOST_COMMON)
    lines = [f"{len(stats.counts):,} distinct, nulls {stats.nulls:,}"]
    if top and top[0][1] == 1:  # every value once: "most common" would pick at random
        lines[0] += " (each value once)"
        lines.append("for example: " + ", ".join(_quote(v) for v, _ in top[:3]))
    elif top:
        lines.append("most common: " + ", ".join(f"{_quote(v)} ({c:,})" for v, c in top))
    return lines


def _quote(value: Any, width: int = 30) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 2] + "…" + text[0]


def sampled_bytes(sizes: list[int], formats: Counter[str]) -> list[str]:
    """A binary column's summary, from the shown rows."""
    if not sizes:
        return ["no rows shown"]
    kinds = ", ".join(f"{name} {count}" for name, count in formats.most_common())
    return [
        f"in the {len(sizes):,} shown rows: {human_size(min(sizes))} to {human_size(max(sizes))}, "
        f"mean {human_size(float(np.mean(sizes)))}",
        f"formats by header: {kinds}",
    ]


def tensor(dtype: Any, shape: Any, value_range: tuple[float, float] | None) -> list[str]:
    lines = [f"tensor of {dtype}, shape {list(shape)}"]
    if value_range is not None:
        lines.append(
            f"values in the shown rows: {number(value_range[0])} to {number(value_range[1])}"
        )
    return lines


def balance_by_version(partitions: list[dict[str, Any]]) -> str:
    """:func:`balance` of each version's partitions: an append writes its own, few rows, so
    partitions are compared within the version that wrote them."""
    versions: dict[int, list[dict[str, Any]]] = {}
    for p in partitions:
        versions.setdefault(int(p.get("version", 1)), []).append(p)
    said = {
        v: balance([p["rows"] for p in ps], [p.get("bytes", 0) for p in ps])
        for v, ps in sorted(versions.items())
    }
    if len(said) == 1:
        return next(iter(said.values()))
    return "; ".join(f"version {v}: {text}" for v, text in said.items())


def balance(rows: list[int], sizes: list[int]) -> str:
    """Whether the partitions are balanced: rows within 10 % of the mean (or one row) and bytes
    within 25 %; else which is not, by how much."""
    if len(rows) < 2:
        return f"{len(rows)} partition: nothing to balance"
    mean_rows, mean_bytes = np.mean(rows), np.mean(sizes)
    off_rows = max(abs(r - mean_rows) for r in rows)
    off_bytes = max(abs(s - mean_bytes) for s in sizes) / mean_bytes if mean_bytes else 0.0
    rows_ok = off_rows <= max(1.0, BALANCED_ROWS * mean_rows)
    bytes_ok = off_bytes <= BALANCED_BYTES
    spread = (
        f"rows {number(min(rows))} to {number(max(rows))}, "
        f"{human_size(min(sizes))} to {human_size(max(sizes))}"
    )
    if rows_ok and bytes_ok:
        return f"balanced: {spread}"
    what = " and ".join(w for w, ok in (("rows", rows_ok), ("bytes", bytes_ok)) if not ok)
    return f"not balanced ({what} differ): {spread}"


def classes(counts: Counter[Any], nulls: int) -> str:
    """The label distribution in one line."""
    if not counts:
        return "no labelled rows"
    low, high = min(counts.values()), max(counts.values())
    ratio = f", largest / smallest {high / low:.2f}" if low else ""
    null = f"; {nulls:,} row{'s' if nulls != 1 else ''} without a label" if nulls else ""
    return f"{len(counts):,} classes, {low:,} to {high:,} rows each{ratio}{null}"
