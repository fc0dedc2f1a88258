"""A plugin's options given as a Python dict (``recordmill.write(options=...)``) or a YAML
``--config`` file: each value its flag could not take is one line naming the key, and the run
writes nothing."""

from __future__ import annotations

import pytest

import recordmill
from recordmill.cli import main
from recordmill.errors import ConfigError
from tests.conftest import make_plugin

PLUGIN = """
    def add_options(parser):
        parser.add_argument("--count", type=int, default=1)
        parser.add_argument("--mode", choices=["a", "b"], default="a")
        parser.add_argument("--flag", action="store_true")
        parser.add_argument("--names", nargs="+", default=["x"])
        parser.add_argument("--max-rows", type=int, default=5)

    def task_number(options):
        return 1

    def dict_data(task_id, options):
        yield {"count": options.count, "mode": options.mode}
"""


@pytest.fixture
def plugin(tmp_path):
    return make_plugin(tmp_path / "p", PLUGIN)


CASES = [
    ({"count": "many"}, "count: expected int, got 'many'"),
    ({"mode": "c"}, "mode: expected one of a, b, got 'c'"),
    ({"flag": "yes"}, "flag must be true or false, got 'yes'"),
    ({"count": [1, 2]}, "count takes one value, got the list [1, 2]"),
    ({"names": [{"a": 1}]}, "names: expected a value, got {'a': 1}"),
    ({"count": 1, "cuont": 2}, ": unknown setting 'cuont' (did you mean count?) (known: count, "),
    ({"max_rows": 1, "max-rows": 2}, "'max_rows' and 'max-rows' are the same setting; keep one"),
]


@pytest.mark.parametrize(("options", "line"), CASES, ids=[c[1][:20] for c in CASES])
def test_a_value_its_option_cannot_take_is_named(plugin, tmp_path, options, line):
    with pytest.raises(ConfigError) as caught:
        recordmill.write(plugin, tmp_path / "out", options=options, workers=0)
    assert line in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_a_config_file_value_is_named_with_its_file(plugin, tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(f"script: {plugin}\noutput: {tmp_path / 'out'}\ncount: many\n")
    assert main(["write", "--config", str(config)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert str(config) in line and "count: expected int, got 'many'" in line


def test_an_option_a_plugin_has_not_is_named_with_those_it_has(plugin, tmp_path):
    source = """
        def add_options(parser):
            parser.add_argument("--count", type=int, default=1)

        def task_number(options):
            return 1

        def dict_data(task_id, options):
            yield {"x": options.cuont}
    """
    with pytest.raises(recordmill.RecordmillError) as caught:
        recordmill.write(make_plugin(tmp_path / "q", source), tmp_path / "out", workers=0)
    assert (
        "dict_data() raised AttributeError: no plugin option 'cuont' (options: count, on_bad_"
        in str(caught.value)
    )


# --- finding and loading the plugin ----------------------------------------------------------


def refused(script, tmp_path) -> str:
    with pytest.raises(recordmill.PluginError) as caught:
        recordmill.write(script, tmp_path / "out", workers=0)
    assert not (tmp_path / "out").exists()
    return str(caught.value)


def test_a_script_that_is_no_plugin_is_named(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    assert refused(str(tmp_path / "notes.txt"), tmp_path) == (
        f"{tmp_path / 'notes.txt'} is neither a plugin folder nor a .py file"
    )
    line = refused("no_such_plugin_here", tmp_path)
    assert line.startswith("no plugin 'no_such_plugin_here': tried the path ")
    assert ", the entry-point group 'recordmill.plugins', and the built-in plugins in " in line
    assert "Available plugins: " in line and "csv" in line


def test_a_plugin_that_does_not_import_is_named(tmp_path):
    folder = make_plugin(tmp_path / "broken", "import no_such_module_anywhere\n")
    line = refused(folder, tmp_path)
    assert line.startswith(f"cannot import plugin broken (path: {folder / 'plugin.py'}): ")
    assert "ModuleNotFoundError: No module named 'no_such_module_anywhere'" in line


def test_a_hook_of_a_wrong_signature_is_named(tmp_path):
    source = """
        import recordmill

        @recordmill.hookimpl
        def task_number(options, extra):
            return 1

        def dict_data(task_id):
            yield {"x": 1}
    """
    line = refused(make_plugin(tmp_path / "sig", source), tmp_path)
    assert line.startswith("plugin sig (path: ") and "extra" in line


@pytest.mark.parametrize(
    ("rows", "line"),
    [
        ("-1", "plugin p: task_rows(0) must return a whole number >= 0 or None, got -1"),
        ("True", "plugin p: task_rows(0) must return a whole number >= 0 or None, got True"),
        ("1 / 0", "plugin p: task_rows(0) raised ZeroDivisionError: division by zero"),
    ],
)
def test_task_rows_that_are_no_count_are_named(tmp_path, rows, line):
    source = f"""
        def task_number():
            return 1

        def task_rows(task_id):
            return {rows}

        def schema():
            return {{"x": "int64"}}

        def dict_data(task_id):
            yield {{"x": 1}}
    """
    assert refused(make_plugin(tmp_path / "p", source), tmp_path) == line


def test_a_module_that_cannot_be_imported_again_is_refused(tmp_path):
    import types

    module = types.ModuleType("made_in_memory")
    module.task_number = lambda: 1
    module.dict_data = lambda task_id: iter([{"x": 1}])
    assert refused(module, tmp_path) == (
        "module made_in_memory cannot be imported again by worker processes"
    )
