"""The check_plugin pytest fixture (recordmill/fixtures.py), as a plugin package's tests use it:
found through the pytest11 entry point, run by a real pytest in its own process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import make_plugin

REJECTING = """
    from recordmill.kit import Reject

    def task_number():
        return 2

    def schema():
        return {"n": {"type": "int64"}}

    def dict_data(task_id):
        yield {"n": task_id}
        if task_id == 1:
            yield Reject("input 1", "unreadable")
"""

TESTS = """
import sys

from recordmill.plugin.manager import FOLDER_PACKAGES


def test_rows_rejects_and_summary(check_plugin):
    checked = check_plugin({folder!r})
    assert checked.rows.column("n").to_pylist() == [0, 1]
    assert checked.rejects == [{{"task_id": 1, "source": "input 1", "reason": "unreadable"}}]
    assert checked.summary.rows == 2 and checked.summary.rejects == 1
    assert any(name.startswith(FOLDER_PACKAGES) for name in sys.modules)


def test_the_next_test_finds_no_folder_plugin_loaded():
    assert not [name for name in sys.modules if name.startswith(FOLDER_PACKAGES)]
"""


def test_the_fixture_gives_rows_rejects_and_summary_and_forgets_folder_plugins(tmp_path):
    folder = make_plugin(tmp_path / "rejecting", REJECTING)
    (tmp_path / "test_it.py").write_text(textwrap.dedent(TESTS.format(folder=str(folder))))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_it.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed" in done.stdout
