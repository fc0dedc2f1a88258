"""The HTML: text from the data escaped, web addresses in it written so that none is a reference."""

from __future__ import annotations

from recordmill.report import page
from recordmill.report.sample import Cell, Shown


def test_text_is_escaped_and_web_addresses_are_not_references():
    assert page.esc("<b>&'") == "&lt;b&gt;&amp;&#x27;"
    assert page.esc("see https://example.org/x") == "see https&#58;//example.org/x"


def test_a_page_of_nothing_is_still_a_page():
    empty = page.Page("x", "/x", [("rows", "0")], [], Shown(), "no rows")
    text = page.document(empty)
    assert text.startswith("<!DOCTYPE html>") and "No rows to show." in text
    assert "<title>x: recordmill show</title>" in text


def test_a_cell_that_did_not_decode_is_marked():
    shown = Shown(rows=[(7, [Cell("data", text="9 bytes", error="cannot identify image file")])])
    text = page.fragment(page.Page("x", "/x", [], [], shown, ""))
    assert "<div class='undecodable' title='data'><b>data: cannot decode</b>" in text
    assert "cannot identify image file" in text and "row 7" in text
