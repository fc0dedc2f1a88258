"""``recordmill.show``: a dataset's page, made from what it shows and nothing more.

It reads the manifest and the rejects list, one pass over the small columns for their statistics
(``scan.py``; binary columns and tensors are skipped, so an image dataset's pass reads labels and
names, not images), and the sampled rows (``ds[i]``). A 100 GB dataset thus costs the size
of its small columns plus a few row groups.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from recordmill.dataset.rejects import read as read_rejects
from recordmill.dataset.schema import type_shape_layout
from recordmill.dataset.storage import Store
from recordmill.errors import ConfigError, OutputError
from recordmill.read.dataset import Dataset
from recordmill.read.dataset import open as open_dataset
from recordmill.read.decode import MAX_PIXELS
from recordmill.report import charts, sample, scan, stats, summary
from recordmill.report.page import ColumnRow, Page, document, fragment

ROWS = 32
MAX_CHARTS = 40  # histograms drawn for the first this many columns (each costs about 50 ms)


@dataclass(frozen=True)
class Report:
    """A page written: ``path`` where, ``html`` the document. In a notebook it shows itself."""

    path: str
    html: str
    fragment: str

    def _repr_html_(self) -> str:
        return self.fragment

    def __str__(self) -> str:
        return self.path


def show(
    path: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    rows: int = ROWS,
    columns: Sequence[str] | None = None,
    seed: int = 0,
    label: str | None = None,
    progress: bool | None = None,
    max_pixels: int | None = MAX_PIXELS,
) -> Report:
    """Write one self-contained HTML page about the dataset at ``path`` (a folder or a URI such
    as ``s3://...``) to ``output`` (default: ``NAME.html`` in the current folder, NAME the
    dataset folder's) and return it.

    ``rows``: how many sample rows (at most; with a label, a few of each class). ``columns``:
    the columns summarized and shown (default: all). ``seed``: which rows. ``label``: the column
    whose distribution is charted and whose classes the sample shows (default: a column named
    ``label``, if it holds integers or strings). ``progress``: a progress bar on stderr (default:
    when a pass reads more than a few MB). ``max_pixels``: an image of more pixels is not
    decoded, its cell says so (None: no bound).
    """
    charts.require()
    if rows < 0:
        raise ConfigError(f"rows must be 0 or more, got {rows}")
    ds = open_dataset(os.fspath(path), checksums=False)  # the page is a look; verify checks
    store = Store.at(os.fspath(path))
    chosen = _chosen(ds, columns)
    label = _label(ds.schema, label)
    rng = np.random.default_rng(seed)
    scanned = _scan(store, ds, chosen, label, rng, progress)
    positions, note = _positions(ds, scanned, label, rows, rng, seed)
    shown_columns = ([label] if label else []) + [c for c in chosen if c != label]
    bar = scan.Bar(len(positions), "sample rows", progress)
    group_bytes = _group_bytes(ds.manifest)
    shown = sample.read(ds.select(shown_columns), positions, bar, group_bytes, max_pixels)
    bar.close()
    page = _page(store, ds, chosen, scanned, shown, label, note)
    _add_rejects(page, store, ds.manifest)
    text = document(page)
    written = _write(output if output is not None else f"{store.name}.html", text)
    return Report(written, text, fragment(page))


def _chosen(ds: Dataset, columns: Sequence[str] | None) -> list[str]:
    if columns is None:
        return list(ds.schema.names)
    missing = [c for c in columns if c not in ds.schema.names]
    if missing:
        raise ConfigError(f"no column {missing[0]!r}; columns: {', '.join(ds.schema.names)}")
    return list(columns)


def _label(schema: pa.Schema, label: str | None) -> str | None:
    """The label column: the one named (which must exist and hold integers or strings), else
    one named ``label`` that does."""
    if label is None:
        named = "label" in schema.names and _labels(schema.field("label").type)
        return "label" if named else None
    if label not in schema.names:
        raise ConfigError(f"--label {label}: no such column; columns: {', '.join(schema.names)}")
    t = schema.field(label).type
    if not _labels(t):
        raise ConfigError(f"--label {label}: a label column holds integers or strings, not {t}")
    return label


def _labels(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)


@dataclass
class Scanned:
    """What the statistics pass found."""

    columns: dict[str, Any]
    labels: stats.StringStats
    sampler: sample.ClassSampler


def _scan(
    store: Store,
    ds: Dataset,
    chosen: list[str],
    label: str | None,
    rng: np.random.Generator,
    progress: bool | None,
) -> Scanned:
    fields = [ds.schema.field(c) for c in chosen if stats.streamed(ds.schema.field(c))]
    found = Scanned(
        {f.name: stats.for_field(f, rng) for f in fields},
        stats.StringStats(),
        sample.ClassSampler(sample.MAX_PER_CLASS, rng),
    )
    names = list(dict.fromkeys([f.name for f in fields] + ([label] if label else [])))
    if not names or not len(ds):
        return found
    bar = scan.Bar(len(ds), "statistics", progress)
    for offset, batch in scan.batches(store, ds.manifest, names, bar):
        for name, column_stats in found.columns.items():
            column_stats.add(batch.column(name))
        if label:
            found.labels.add(batch.column(label))
            found.sampler.add(batch.column(label), offset)
    bar.close()
    return found


def _positions(
    ds: Dataset,
    scanned: Scanned,
    label: str | None,
    rows: int,
    rng: np.random.Generator,
    seed: int,
) -> tuple[list[int], str]:
    """The rows to show, and how they were chosen (in words)."""
    if label and not scanned.sampler.overflow and scanned.labels.counts:
        kept = scanned.sampler.rows()
        positions = sample.per_class(kept, rows)
        shown = len({v for v, r in kept.items() if set(r) & set(positions)})
        return positions, (
            f"{len(positions)} rows of {shown} of the {len(kept):,} classes of {label!r}, "
            f"a seeded uniform choice within each class (seed {seed})"
        )
    positions = sample.spread(len(ds), rows, rng).tolist()
    if len(positions) == len(ds):
        return positions, f"all {len(ds):,} rows"
    return positions, (
        f"{len(positions)} of {len(ds):,} rows, one drawn from each of {len(positions)} equal "
        f"stretches of the dataset (seed {seed})"
    )


def _group_bytes(manifest: dict[str, Any]) -> float:
    """The mean size of a row group: what reading one sampled row of Parquet decodes."""
    parts = manifest["partitions"]
    groups = sum(p.get("row_groups") or 1 for p in parts)
    return sum(p.get("bytes", 0) for p in parts) / max(1, groups)


def _page(
    store: Store,
    ds: Dataset,
    chosen: list[str],
    scanned: Scanned,
    shown: sample.Shown,
    label: str | None,
    note: str,
) -> Page:
    manifest = ds.manifest
    parts = manifest["partitions"]
    rows, sizes = [p["rows"] for p in parts], [p.get("bytes", 0) for p in parts]
    page = Page(
        title=store.name,
        location=str(store),
        header=summary.header(manifest),
        columns=[_column(f, f.name in chosen, scanned, shown, i) for i, f in enumerate(ds.schema)],
        shown=shown,
        sample_note=note,
        partitions=[(p["file"], p["rows"], p.get("bytes", 0)) for p in parts],
        balance=summary.balance_by_version(parts),
        partition_chart=charts.partitions(rows, sizes) if parts else None,
    )
    if label:
        counts = scanned.labels.counts
        names = sorted(counts, key=sample.sort_key)
        page.label = label
        page.label_line = summary.classes(counts, scanned.labels.nulls)
        if scanned.labels.overflow:
            page.label_line = f"more than {stats.MAX_DISTINCT:,} distinct values: not a class label"
        elif counts:
            page.label_chart = charts.labels([str(n) for n in names], [counts[n] for n in names])
    return page


def _column(
    field: pa.Field, chosen: bool, scanned: Scanned, shown: sample.Shown, index: int
) -> ColumnRow:
    type_name, shape, layout = type_shape_layout(field)
    row = ColumnRow(
        field.name,
        type_name + (f" ({layout})" if layout else ""),
        str(shape) if shape is not None else "",
        field.nullable,
    )
    kind = stats.kind(field)
    if not chosen:
        row.lines = ["not among --columns"]
    elif field.name in scanned.columns:
        found = scanned.columns[field.name]
        row.lines = summary.facts(found)
        numbers = found.values if isinstance(found, stats.ListStats) else found
        drawn = stats.histogram(numbers) if isinstance(numbers, stats.NumberStats) else None
        if drawn is not None and index < MAX_CHARTS:
            counts, edges, origin = drawn
            xlabel = "values" if numbers is not found else ""
            xlabel = f"{xlabel or 'value'} - {origin:,}" if origin else xlabel
            row.chart = charts.histogram(counts, edges, xlabel, integer=numbers.integer)
    elif kind == "bytes":
        sizes = shown.sizes.get(field.name, [])
        row.lines = summary.sampled_bytes(sizes, shown.formats.get(field.name, Counter()))
        if sizes and index < MAX_CHARTS:
            counts, edges = np.histogram(sizes, bins=min(20, max(1, len(sizes))))
            row.chart = charts.histogram(
                counts, edges, "size of each value, shown rows", "B", integer=True
            )
    elif kind == "tensor":
        row.lines = summary.tensor(type_name, shape, shown.ranges.get(field.name))
    else:
        row.lines = ["not summarized (a nested type)"]
    return row


def _add_rejects(page: Page, store: Store, manifest: dict[str, Any]) -> None:
    page.reject_count = (manifest.get("rejects") or {}).get("count", 0)
    if page.reject_count:
        page.rejects = read_rejects(store, manifest)


def _write(output: str | os.PathLike[str], text: str) -> str:
    """Write the page (a local path or a URI); returns where, as given or absolute."""
    where = os.fspath(output)
    try:
        if "://" in where:
            store = Store.at(where)
            with store.fs.open_output_stream(store.root) as f:
                f.write(text.encode())
            return where
        Path(where).write_text(text, encoding="utf-8")
    except OSError as e:
        raise OutputError(f"cannot write the page to {where}: {e}") from e
    return os.path.abspath(where)
