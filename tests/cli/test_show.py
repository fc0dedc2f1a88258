"""``recordmill show`` as a real process: the page written and where; every mistake one line
(by ``main()`` in this process: the same parsing and line, without starting one for each)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import recordmill_here
from tests.report.conftest import csv_dataset  # noqa: F401 (a fixture)

pytest.importorskip("matplotlib", reason="recordmill show needs the show extra (matplotlib)")


def recordmill_cli(*args, cwd=None, block_matplotlib=False):
    code = "import sys\nfrom recordmill.cli import main\nsys.exit(main(sys.argv[1:]))"
    if block_matplotlib:  # as if the show extra were not installed
        code = "import sys; sys.modules['matplotlib'] = None\n" + code
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_error_line(result, *words):
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("recordmill: error: "), result.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert "Traceback" not in result.stderr


def test_show_writes_the_page_and_says_where(csv_dataset, tmp_path):  # noqa: F811
    done = recordmill_cli("show", csv_dataset, "--rows", "4", "--seed", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("wrote iris.html (") and (tmp_path / "iris.html").is_file()
    out = tmp_path / "page" / "x.html"
    out.parent.mkdir()
    done = recordmill_cli("show", csv_dataset, "-o", out, "--columns", "id, species", cwd=tmp_path)
    assert done.returncode == 0 and "not among --columns" in out.read_text()


def test_a_folder_that_is_not_a_dataset(tmp_path):
    one_error_line(recordmill_here("show", tmp_path), "is not a recordmill dataset")


def test_a_label_or_column_that_does_not_exist(csv_dataset, tmp_path):  # noqa: F811
    one_error_line(recordmill_here("show", csv_dataset, "--label", "kind"), "--label kind")
    one_error_line(recordmill_here("show", csv_dataset, "--label", "score"), "integers or strings")
    one_error_line(recordmill_here("show", csv_dataset, "--columns", "id,nope"), "no column 'nope'")
    assert not list(tmp_path.iterdir())


def test_without_the_show_extra_one_line_says_what_to_install(csv_dataset, tmp_path):  # noqa: F811
    done = recordmill_cli("show", csv_dataset, cwd=tmp_path, block_matplotlib=True)
    one_error_line(done, "matplotlib", "pip install 'recordmill[show]'")


def test_rows_must_not_be_negative(csv_dataset):  # noqa: F811
    done = recordmill_here("show", csv_dataset, "--rows", "-1")
    assert done.returncode == 2 and "must be 0 or more" in done.stderr
