"""One task's rows in its worker (engine/batches.py), as a user meets them through the command
line: what dict_data() returned, and where a bad input's message puts its row."""

from __future__ import annotations

import pytest

from tests.conftest import make_plugin, run_writer


@pytest.mark.parametrize(
    ("returned", "said"),
    [
        ("42", "it returned int 42"),
        ("None", "it returned None"),
        ('{"x": 1}', "it returned dict {'x': 1}"),
        ('"abc"', "it returned str 'abc'"),
    ],
)
def test_dict_data_returning_no_rows_is_one_line(tmp_path, returned, said):
    plugin = make_plugin(
        tmp_path / "returns",
        f"""
        def task_number():
            return 1

        def dict_data(task_id):
            return {returned}
        """,
    )
    for workers in ("0", "2"):
        result = run_writer(
            *("--script", plugin, "--output", tmp_path / "o", "--workers", workers, "--quiet")
        )
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            "recordmill: error: task 0 failed: dict_data() must yield dicts (return an iterable "
            f"or use yield), {said}"
        ]


def test_a_bad_inputs_row_comes_before_the_advice(tmp_path):
    plugin = make_plugin(
        tmp_path / "images",
        """
        from recordmill.inputs import images

        def add_options(parser):
            images.add_options(parser)

        def task_number():
            return 1

        def dict_data(task_id, options):
            yield {"n": 0, "data": b""}
            yield {"n": 1, "data": b""}
            yield images.row("/no/such/image.jpg", options, n=2)
        """,
    )
    result = run_writer("--script", plugin, "--output", tmp_path / "o", "--quiet")
    assert result.returncode == 1
    line = result.stderr.strip()
    assert line.startswith("recordmill: error: task 0 failed: bad image file /no/such/image.jpg")
    assert line.endswith(" at row 2 (--on-bad-input skip records it and goes on)"), line
