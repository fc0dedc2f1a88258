"""A script that calls recordmill.write() without ``if __name__ == "__main__":`` is told what to
add, before any worker starts, instead of workers that die re-running it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import COUNTING_PLUGIN, make_plugin


def run_script(tmp_path, body):
    script = tmp_path / "convert.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


def test_a_script_without_the_main_guard_is_told_what_to_add(tmp_path):
    make_plugin(tmp_path / "counting", COUNTING_PLUGIN)
    result = run_script(
        tmp_path,
        """
        import recordmill

        def convert():
            return recordmill.write("counting", "out", workers=2, progress=False)

        convert()
        """,
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "calls recordmill.write() at its top level (line 7)" in last, result.stderr
    assert 'if __name__ == "__main__":' in last
    assert "WorkerLost" not in result.stderr and result.stderr.count("Traceback") == 1
    assert not (tmp_path / "out").exists()


def test_a_guarded_script_and_workers_0_run(tmp_path):
    make_plugin(tmp_path / "counting", COUNTING_PLUGIN)
    guarded = run_script(
        tmp_path,
        """
        import recordmill

        if __name__ == "__main__":
            print(recordmill.write("counting", "out", workers=2, progress=False).rows)
        """,
    )
    assert guarded.returncode == 0 and guarded.stdout == "25\n", guarded.stderr
    in_process = run_script(
        tmp_path,
        """
        import recordmill

        print(recordmill.write("counting", "here", workers=0, progress=False).rows)
        """,
    )
    assert in_process.returncode == 0 and in_process.stdout == "25\n", in_process.stderr
