"""The progress bar of a pass: only once the pass is seen to be large, or when asked."""

from __future__ import annotations

from recordmill.report import scan


def test_the_bar_starts_once_the_projected_bytes_pass_the_threshold(capsys):
    bar = scan.Bar(1000, "statistics")
    bar.add(10, 1000)  # 100 KB projected
    assert bar._bar is None
    bar.add(10, scan.BAR_BYTES // 40)  # over 8 MB projected: it starts, counting all rows so far
    assert bar._bar is not None and bar._bar.n == 20
    bar.close()
    assert "statistics" in capsys.readouterr().err


def test_the_bar_when_asked_and_never_when_told_not_to():
    forced = scan.Bar(10, "x", show=True)
    forced.add(1, 1)
    assert forced._bar is not None
    forced.close()
    quiet = scan.Bar(10, "x", show=False)
    quiet.add(10, 10**12)
    assert quiet._bar is None
