"""recordmill.show: pages of real datasets, rendered by headless Chromium and checked for what a
user would look at: not blank, nothing fetched from the network, the thumbnails the rows' images."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

import recordmill
from recordmill.dataset.storage import Store
from recordmill.report import scan
from tests.conftest import read_dataset
from tests.report.conftest import (
    BROKEN,
    CLASSES,
    IMAGES_PLUGIN,
    PER_CLASS,
    assert_not_blank,
    assert_offline,
    assert_thumbnails_are_the_rows,
    keep_screenshot,
    make_plugin,
    reference_thumbnail,
    screenshot,
    thumbnails,
)

pytest.importorskip("matplotlib", reason="recordmill show needs the show extra (matplotlib)")


def cards(text: str) -> list[int]:
    """The rows of the sample grid, in the page's order."""
    return [
        int(n.replace(",", "")) for n in re.findall(r"<div class='row'>row ([\d,]+)</div>", text)
    ]


def test_an_image_dataset_s_page_shows_every_image_as_its_thumbnail(
    image_dataset, browser, tmp_path
):
    report = recordmill.show(image_dataset, tmp_path / "pets.html", rows=64)
    text = (tmp_path / "pets.html").read_text()
    assert report.path == str(tmp_path / "pets.html") and report.html == text
    assert_offline(text)
    shot = screenshot(browser, tmp_path / "pets.html", tmp_path / "pets.png")
    assert_not_blank(shot)
    keep_screenshot(tmp_path / "pets.png", "show.png")

    ds = recordmill.open(image_dataset)
    rows = {r: ds[r] for r in range(len(ds))}
    broken = next(r for r, row in rows.items() if row["file_name"] == BROKEN)
    assert sorted(cards(text)) == list(range(len(ds)))  # 8 a class asked, all 24 shown
    shown = thumbnails(text)
    assert set(shown) == {("data", r) for r in rows if r != broken}
    expected = {("data", r): reference_thumbnail(v["data"]) for r, v in rows.items() if r != broken}
    assert_thumbnails_are_the_rows(shown, expected)
    # The file cut short: a marked placeholder with Pillow's reason, and the page goes on.
    mark = re.search(r"<div class='undecodable'[^>]*>(.*?)</div>", text).group(1)
    assert "cannot decode" in mark and "truncated" in mark.lower(), mark
    assert "recordmill verify --decode data" in mark  # where to find every one
    assert f"{len(CLASSES)} classes, {PER_CLASS} to {PER_CLASS} rows each" in text
    assert "formats by header: PNG 14, JPEG 10" in text  # the broken file starts as a JPEG
    assert "alt='rows per class'" in text and "alt='rows and bytes per partition'" in text


def test_a_tensor_dataset_s_page_draws_uint8_images_and_describes_the_rest(
    tensor_dataset, browser, tmp_path
):
    recordmill.show(tensor_dataset, tmp_path / "t.html", rows=20)
    text = (tmp_path / "t.html").read_text()
    assert_offline(text)
    assert_not_blank(screenshot(browser, tmp_path / "t.html", tmp_path / "t.png"))
    ds = recordmill.open(tensor_dataset)
    expected = {
        (column, r): reference_thumbnail(ds[r][column])
        for r in range(20)
        for column in ("rgb", "gray")
    }
    shown = thumbnails(text)
    assert set(shown) == set(expected)
    assert_thumbnails_are_the_rows(shown, expected)
    depth = np.stack([ds[r]["depth"] for r in range(20)])
    assert "tensor of float32, shape [4, 6]" in text
    low, high = f"{depth.min():.4g}", f"{depth.max():.4g}"
    assert f"values in the shown rows: {low if depth.min() else 0} to {high}" in text
    assert "depth: <span class='value'>float32 array [4, 6]</span>" in text
    assert "arrow" in text and "balanced" in text


def test_a_csv_dataset_s_page_lists_its_rejects(csv_dataset, browser, tmp_path):
    recordmill.show(csv_dataset, tmp_path / "iris.html")
    text = (tmp_path / "iris.html").read_text()
    assert_offline(text)  # its homepage column is all web addresses: shown, not referenced
    assert "example.org/3" in text
    assert_not_blank(screenshot(browser, tmp_path / "iris.html", tmp_path / "iris.png"))
    rejects = recordmill.read_rejects(csv_dataset)
    assert len(rejects) == 3 and "3 inputs were rejected" in text
    for reject in rejects:
        assert reject["reason"].replace("'", "&#x27;") in text
    assert "2 distinct, nulls 0" in text and "most common: &#x27;virginica&#x27; (19)" in text
    assert "min 0, max 9.75" in text  # score: i / 4 of rows 0..39 but the rejected ones


def test_an_empty_dataset_s_page_says_so(empty_dataset, browser, tmp_path):
    report = recordmill.show(empty_dataset, tmp_path / "e.html")
    text = report.html
    assert_offline(text)
    assert_not_blank(screenshot(browser, tmp_path / "e.html", tmp_path / "e.png"), charts=False)
    assert "No rows to show." in text and "<dd>0</dd>" in text
    assert "None: every input became a row." in text


def test_the_sample_is_seeded_and_spread_over_the_dataset(csv_dataset, tmp_path):
    first = cards(recordmill.show(csv_dataset, tmp_path / "a.html", rows=5, seed=1).html)
    again = cards(recordmill.show(csv_dataset, tmp_path / "b.html", rows=5, seed=1).html)
    other = cards(recordmill.show(csv_dataset, tmp_path / "c.html", rows=5, seed=2).html)
    assert first == again != other
    total = len(recordmill.open(csv_dataset))  # 37
    for rows in (first, other):
        assert all(k * total // 5 <= r < (k + 1) * total // 5 for k, r in enumerate(rows))


def test_with_a_label_a_few_rows_of_each_class(image_dataset, tmp_path):
    text = recordmill.show(image_dataset, tmp_path / "a.html", rows=6).html
    ds = recordmill.open(image_dataset)
    labels = [ds[r]["label"] for r in cards(text)]
    assert labels == [0, 0, 1, 1, 2, 2]
    by_name = recordmill.show(image_dataset, tmp_path / "b.html", rows=4, label="file_name")
    assert "4 rows of 4 of the 24 classes of &#x27;file_name&#x27;" in by_name.html


def test_the_statistics_pass_reads_only_the_small_columns(image_dataset, tmp_path, monkeypatch):
    read = []
    real = scan._partition

    def spy(store, name, fmt, columns):
        read.append(list(columns))
        return real(store, name, fmt, columns)

    monkeypatch.setattr(scan, "_partition", spy)
    recordmill.show(image_dataset, tmp_path / "p.html")
    assert read and all(columns == ["label", "file_name"] for columns in read)


def test_columns_limit_the_page_and_the_default_output_is_named_for_the_dataset(
    image_dataset, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    report = recordmill.show(image_dataset, columns=["file_name"], rows=3)
    assert report.path == str(tmp_path / "pets.html") and (tmp_path / "pets.html").is_file()
    assert "not among --columns" in report.html and not thumbnails(report.html)


def test_a_notebook_shows_the_page_as_a_fragment_with_its_own_style(csv_dataset, tmp_path):
    report = recordmill.show(csv_dataset, tmp_path / "n.html", rows=2)
    shown = report._repr_html_()
    assert shown.startswith("<div class='rm-report'><style>") and "<html" not in shown
    rules = re.findall(r"^([^\s{}][^{]*)\{", shown.split("<style>")[1].split("</style>")[0], re.M)
    assert rules and all(r.startswith(".rm-report") for r in rules), rules


def test_a_progress_bar_when_asked_or_when_the_pass_is_large(
    csv_dataset, tmp_path, capsys, monkeypatch
):
    recordmill.show(csv_dataset, tmp_path / "a.html")
    assert "statistics" not in capsys.readouterr().err  # a few KB: no bar
    recordmill.show(csv_dataset, tmp_path / "b.html", progress=True)
    assert "statistics" in capsys.readouterr().err
    monkeypatch.setattr(scan, "BAR_BYTES", 100)
    recordmill.show(csv_dataset, tmp_path / "c.html")
    assert "statistics" in capsys.readouterr().err


def test_a_dataset_on_object_storage(image_dataset, s3, tmp_path, monkeypatch):
    uri = s3("shown/pets")
    plugin = make_plugin(tmp_path / "plugin", IMAGES_PLUGIN)
    files = str(image_dataset.parent / "files")
    recordmill.write(plugin, uri, options={"image_dir": files}, progress=False)
    monkeypatch.chdir(tmp_path)
    report = recordmill.show(uri, rows=64)
    assert report.path == str(tmp_path / "pets.html")
    assert_offline(report.html)
    local = recordmill.show(image_dataset, tmp_path / "local.html", rows=64)
    assert thumbnails(report.html).keys() == thumbnails(local.html).keys()
    page = s3("shown/pages/pets.html")
    assert recordmill.show(uri, page, rows=2).path == page
    assert Store.at(page).fs.open_input_stream(Store.at(page).root).read().startswith(b"<!DOCTYPE")


NUMERIC = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
NUMERIC += ("float16", "float32", "float64")

EVERY_LIMIT = """
    import numpy as np

    TYPES = {types}

    def task_number():
        return 2

    def schema():
        return {t: {"type": t, "nullable": True} for t in TYPES}

    def dict_data(task_id):
        # Each type's own limits, 0, and a None; the floats also inf, -inf and NaN.
        for n in range(15):
            row = {}
            for t in TYPES:
                info = np.iinfo(t) if t[0] in "iu" else np.finfo(t)
                odd = [np.inf, -np.inf, np.nan][n % 3] if t[0] == "f" else None
                values = [info.min, info.max, 0, None, odd]
                row[t] = values[(n + task_id) % len(values)]
            yield row
"""


def test_a_page_is_made_for_every_numeric_type_at_its_limits(browser, tmp_path):
    """64-bit PCM audio reaches int64's limits, np.log of zeros gives -inf: every numeric type
    at both its limits, with None (and for floats inf, -inf and NaN) among the values, gets its
    summary and its chart on a page Chromium renders."""
    plugin = make_plugin(tmp_path / "x", EVERY_LIMIT.replace("{types}", repr(NUMERIC)))
    recordmill.write(plugin, tmp_path / "ds", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not even a warning of an overflow in a chart
        report = recordmill.show(tmp_path / "ds", tmp_path / "x.html")
    text = report.html
    assert_offline(text)
    assert_not_blank(screenshot(browser, tmp_path / "x.html", tmp_path / "x.png"))
    rows = read_dataset(tmp_path / "ds")
    for name in NUMERIC:
        values = [v for v in rows[name].to_pylist() if v is not None]
        finite = [v for v in values if math.isfinite(v)]
        info = np.iinfo(name) if name[0] in "iu" else np.finfo(name)
        assert min(finite) == info.min and max(finite) == info.max, name
        said = f"nulls {rows[name].null_count}"
        if name[0] == "f":
            nans = sum(math.isnan(v) for v in values)
            infs, neg = values.count(math.inf), values.count(-math.inf)
            assert nans and infs and neg, name  # the test's data has each
            said += f", NaN {nans}, inf {infs}, -inf {neg}"
        assert said in text, (name, said)
        assert f"alt='histogram of {name}'" in text, name
    # float64's largest in four digits: its 309 digits pushed the charts out of sight
    assert "min -1.798e+308, max 1.798e+308" in text


EXTREMES = """
    import numpy as np

    def task_number():
        return 1

    def schema():
        return {"pcm": {"type": "int64"}, "u": {"type": "uint64"},
                "logs": {"type": "float64", "nullable": True}}

    def dict_data(task_id):
        i64, u64 = np.iinfo(np.int64), np.iinfo(np.uint64)
        logs = [np.log(0.0), 0.5, np.inf, float("nan"), None, np.finfo(np.float64).max]
        for n, log in enumerate(logs):
            yield {"pcm": [i64.min, i64.max][n % 2], "u": [0, u64.max][n % 2], "logs": log}
"""


def test_a_page_is_made_for_numbers_at_their_limits_with_infinities(tmp_path):
    with np.errstate(divide="ignore"):
        recordmill.write(make_plugin(tmp_path / "x", EXTREMES), tmp_path / "ds", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not even a warning of an overflow in the chart
        report = recordmill.show(tmp_path / "ds", tmp_path / "x.html")
    assert "nulls 1, NaN 1, inf 1, -inf 1" in report.html
