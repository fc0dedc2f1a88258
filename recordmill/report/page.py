"""The page as HTML: one document with its style inline and every image a ``data:`` URI, so that it
opens offline, from a laptop or an object-store link, and references nothing on the network.

Every text that comes from the dataset goes through :func:`esc`, which also writes the colon of
``://`` as ``&#58;``: a URL in the data is shown as it is, but the page's source holds no web
address that a checker (or a mail filter) would take for a reference. The style is scoped to
``.rm-report`` so that the fragment shown in a notebook leaves the notebook's own style alone.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass, field

from recordmill.report.images import png_uri
from recordmill.report.sample import Shown

REJECTS_SHOWN = 100
PARTITIONS_LISTED = 200

STYLE = """
.rm-report { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: #222; background: #fff; max-width: 1180px; margin: 0 auto; padding: 16px; }
.rm-report h1 { font-size: 22px; margin: 0 0 2px; }
.rm-report h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; }
.rm-report .path { color: #666; font-family: ui-monospace, monospace; font-size: 12px; }
.rm-report dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; }
.rm-report dt { color: #666; }
.rm-report dd { margin: 0; word-break: break-word; }
.rm-report table { border-collapse: collapse; width: 100%; font-size: 13px; }
.rm-report th, .rm-report td { border-bottom: 1px solid #eee; padding: 4px 6px; text-align: left;
  vertical-align: top; }
.rm-report th { background: #f6f6f6; }
.rm-report td.summary div { color: #444; }
.rm-report .note { color: #666; font-size: 13px; }
.rm-report .grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(180px, 1fr));
  gap: 10px; }
.rm-report .card { border: 1px solid #ddd; border-radius: 6px; padding: 6px; font-size: 12px;
  overflow: hidden; }
.rm-report .card .row { color: #888; }
.rm-report .card .label { font-weight: 600; color: #1a4f8b; }
.rm-report .card img { display: block; width: 100%; max-width: 160px; height: auto;
  margin: 2px auto; }
.rm-report .card img.small { image-rendering: pixelated; }
.rm-report .card .value { font-family: ui-monospace, monospace; word-break: break-all; }
.rm-report .undecodable { background: repeating-linear-gradient(45deg, #fde8e8, #fde8e8 6px,
  #fff 6px, #fff 12px); border: 2px dashed #c33; color: #a11; padding: 8px; min-height: 80px; }
.rm-report .bad { color: #a11; }
"""


@dataclass
class ColumnRow:
    """A row of the schema table."""

    name: str
    type: str
    shape: str
    nullable: bool
    lines: list[str] = field(default_factory=list)
    chart: bytes | None = None


@dataclass
class Page:
    """Everything the page shows, as text and PNG bytes."""

    title: str
    location: str
    header: list[tuple[str, str]]
    columns: list[ColumnRow]
    shown: Shown
    sample_note: str
    label: str | None = None
    label_line: str = ""
    label_chart: bytes | None = None
    rejects: list[dict] = field(default_factory=list)
    reject_count: int = 0
    partitions: list[tuple[str, int, int]] = field(default_factory=list)  # file, rows, bytes
    balance: str = ""
    partition_chart: bytes | None = None


def esc(value: object) -> str:
    return html.escape(str(value)).replace("://", "&#58;//")


def _img(data: bytes, alt: str) -> str:
    return f"<img src='{png_uri(data)}' alt='{esc(alt)}'>"


def fragment(page: Page) -> str:
    """The report as one ``<div>`` with its own style (what a notebook shows)."""
    parts = [
        f"<div class='rm-report'><style>{STYLE}</style>",
        f"<h1>{esc(page.title)}</h1><div class='path'>{esc(page.location)}</div>",
        "<h2>Dataset</h2><dl>",
        *(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in page.header),
        "</dl>",
        _schema(page.columns),
        _labels(page),
        _samples(page),
        _rejects(page),
        _partitions(page),
        "</div>",
    ]
    return "\n".join(parts)


def document(page: Page) -> str:
    """The whole page: an HTML document holding :func:`fragment`."""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{esc(page.title)}: recordmill show</title></head>\n"
        f"<body style='margin:0'>\n{fragment(page)}\n</body></html>\n"
    )


def _schema(columns: list[ColumnRow]) -> str:
    rows = []
    for c in columns:
        chart = _img(c.chart, f"histogram of {c.name}") if c.chart else ""
        lines = "".join(f"<div>{esc(line)}</div>" for line in c.lines)
        rows.append(
            f"<tr><td><b>{esc(c.name)}</b></td><td>{esc(c.type)}</td><td>{esc(c.shape)}</td>"
            f"<td>{'yes' if c.nullable else 'no'}</td><td class='summary'>{lines}</td>"
            f"<td>{chart}</td></tr>"
        )
    return (
        "<h2>Schema</h2><table><tr><th>name</th><th>type</th><th>shape</th><th>nullable</th>"
        f"<th>summary</th><th>distribution</th></tr>{''.join(rows)}</table>"
    )


def _labels(page: Page) -> str:
    if page.label is None:
        return ""
    chart = _img(page.label_chart, "rows per class") if page.label_chart else ""
    return f"<h2>Labels: {esc(page.label)}</h2><p class='note'>{esc(page.label_line)}</p>{chart}"


def _samples(page: Page) -> str:
    cards = []
    for index, cells in page.shown.rows:
        body = [f"<div class='row'>row {index:,}</div>"]
        for cell in cells:
            name = esc(cell.name)
            if cell.name == page.label:
                body.append(f"<div class='label'>{name}: {esc(cell.text)}</div>")
            elif cell.image is not None:
                small = " class='small'" if cell.small else ""
                body.append(
                    f"<img{small} src='{cell.image}' alt='{name} of row {index}' title='{name}'>"
                )
                if cell.text:  # what was done to show it (a stretched contrast)
                    body.append(f"<div class='note'>{esc(cell.text)}</div>")
            elif cell.error is not None:
                body.append(
                    f"<div class='undecodable' title='{name}'><b>{name}: cannot decode</b><br>"
                    f"{esc(cell.error)}<br><span class='value'>{esc(cell.text)}</span><br>"
                    f"<span class='note'>every one: <code>recordmill verify --decode "
                    f"{esc(name)}</code></span></div>"
                )
            else:
                body.append(f"<div>{name}: <span class='value'>{esc(cell.text)}</span></div>")
        cards.append(f"<div class='card'>{''.join(body)}</div>")
    grid = f"<div class='grid'>{''.join(cards)}</div>" if cards else "<p>No rows to show.</p>"
    return f"<h2>Sample rows</h2><p class='note'>{esc(page.sample_note)}</p>{grid}"


def _rejects(page: Page) -> str:
    if not page.reject_count:
        return "<h2>Rejects</h2><p>None: every input became a row.</p>"
    head = f"<h2>Rejects</h2><p>{page.reject_count:,} inputs were rejected"
    more = len(page.rejects) > REJECTS_SHOWN
    head += f"; the first {REJECTS_SHOWN} are listed.</p>" if more else ".</p>"
    rows = "".join(
        "<tr>"
        + "".join(f"<td>{esc(r.get(k, ''))}</td>" for k in ("source", "reason", "task_id", "row"))
        + "</tr>"
        for r in page.rejects[:REJECTS_SHOWN]
    )
    return (
        f"{head}<table><tr><th>source</th><th>reason</th><th>task</th><th>row</th></tr>"
        f"{rows}</table>"
    )


def _partitions(page: Page) -> str:
    chart = (
        _img(page.partition_chart, "rows and bytes per partition") if page.partition_chart else ""
    )
    listed = _table(
        ("file", "rows", "bytes"),
        ((f, f"{r:,}", f"{b:,}") for f, r, b in page.partitions[:PARTITIONS_LISTED]),
    )
    return (
        f"<h2>Partitions</h2><p>{esc(page.balance)}</p>{chart}"
        f"<details><summary>{len(page.partitions):,} partition files</summary>{listed}</details>"
    )


def _table(names: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> str:
    head = "".join(f"<th>{esc(n)}</th>" for n in names)
    body = "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"
