"""recordmill verify --decode: every value decoded in worker processes, the bad ones listed."""

from __future__ import annotations

import subprocess
import sys

import pytest

import recordmill
from recordmill.errors import ColumnError, ConfigError
from recordmill.read.decode_check import undecodable
from tests.conftest import make_plugin
from tests.read.damaged_jpegs import BAD, PLUGIN


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("decode")
    out = root / "ds"
    recordmill.write(make_plugin(root / "p", PLUGIN), out, partitions=2, progress=False)
    return str(out)


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "recordmill", *map(str, args)], capture_output=True, text=True
    )


def test_the_rows_that_do_not_decode_are_listed_in_row_order(images):
    found = undecodable(images, "data", workers=2, progress=False)
    assert [r.row for r in found] == sorted(BAD)  # the EXIF-damaged row decodes: not listed
    assert all(r.column == "data" and r.version == 1 for r in found)
    assert found == undecodable(images, "data", workers=1, progress=False)
    done = cli("verify", images, "--decode", "data", "--workers", "2")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert [int(line.split(":")[0].split()[1]) for line in lines[:-1]] == sorted(BAD)
    assert lines[-1].startswith("4 rows of 100 do not decode (data)")
    assert "row 30: ValueError: Pillow does not recognise these bytes" in done.stdout


def test_a_column_that_decodes_passes_and_a_decoder_may_be_the_users(images, tmp_path):
    (tmp_path / "mydecoders.py").write_text("def small(v):\n    assert v < 100\n")
    done = subprocess.run(
        [sys.executable, "-m", "recordmill", "verify", images, "--decode", "id=mydecoders:small"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("all 100 values of id decode")


def test_mistakes_are_one_line(images):
    with pytest.raises(ColumnError, match="no column 'nope'; columns: id, data"):
        undecodable(images, "nope", progress=False)
    with pytest.raises(ConfigError) as e:
        undecodable(images, "data", "jpeg", progress=False)
    said = "--decode names no decoder 'jpeg': give one of image, pil or module:function"
    assert str(e.value) == said
    done = cli("verify", images, "--decode", "data=nowhere:thing")
    assert done.returncode != 0
    assert done.stderr.strip().startswith(
        "recordmill: error: --decode nowhere:thing: cannot import"
    )
    assert "Traceback" not in done.stderr


def test_pieces_cover_every_row_once_and_their_finds_add_up(images, monkeypatch, capsys):
    """Rows are decoded in pieces (PIECE_ROWS); what each piece finds is kept, from the first
    row to the last, at the edges of pieces too, and the progress bar shows unless told not to."""
    from recordmill.read import decode_check
    from tests.read.damaged_jpegs import EDGES

    monkeypatch.setattr(decode_check, "PIECE_ROWS", 7)  # 100 rows: 15 pieces, the last of 2
    found = undecodable(images, "id", "tests.read.damaged_jpegs:refuse_edges", workers=2)
    assert [r.row for r in found] == sorted(EDGES)
    assert found[0].error == "ValueError: id 0 is at an edge"
    assert "\rdecoding id: " in capsys.readouterr().err  # the bar, by default
    undecodable(images, "id", "tests.read.damaged_jpegs:refuse_edges", progress=False)
    assert capsys.readouterr().err == ""
