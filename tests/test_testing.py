"""recordmill.testing.check_plugin: the template and every built-in plugin (on the demo data)
pass; each mistake a plugin author makes is caught, in one line naming the task or option."""

from __future__ import annotations

import pytest

import recordmill.inputs.demo
from recordmill.plugin.manager import load_plugin
from recordmill.plugin.options import plugin_options
from recordmill.testing import PluginCheckFailed, check_plugin, run_check
from tests.conftest import REPO, make_plugin

BUILTINS = {  # the demo data's inputs, as the run scripts give them
    "csv": lambda d: {"input": d / "table.csv", "schema": d / "table.schema.yaml"},
    "filelist": lambda d: {"list": d / "images_train.lst", "root": d / "images"},
    "imagenet": lambda d: {"image_dir": d / "images", "label_file": d / "labels.txt"},
    "mnist": lambda d: {"data_dir": d / "mnist"},
    "tfrecord": lambda d: {"input": d / "tfrecord"},
    "mindrecord": lambda d: {"input": d / "mindrecord"},
    "recordio": lambda d: {"input": d / "recordio"},
    "ofrecord": lambda d: {"input": d / "ofrecord"},
    "torchrecord": lambda d: {"input": d / "torchrecord"},
    "webdataset": lambda d: {"input": d / "webdataset"},
    "huggingface": lambda d: {"input": d / "huggingface"},
    "audio": lambda d: {"input": d / "audio"},
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo") / "data"
    recordmill.inputs.demo.make_demo_data(folder)
    return folder


def test_the_template_passes_and_its_rows_come_back():
    rows = check_plugin(REPO / "templates" / "template", tasks=3, rows_per_task=7)
    assert rows.num_rows == 21 and rows.column("id").to_pylist() == list(range(21))


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_built_in_plugin_passes_on_the_demo_data(name, demo):
    if name == "torchrecord":
        pytest.importorskip("lmdb", reason="the torchrecord plugin needs recordmill[torchrecord]")
    options = {k: str(v) for k, v in BUILTINS[name](demo).items()}
    assert check_plugin(name, **options).num_rows > 0


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_built_in_plugin_makes_its_path_options_absolute(name, demo, monkeypatch):
    """Given relative to the folder the command runs in, as a user types them: each comes out
    absolute, so workers started in another folder (a Dask cluster's) find it."""
    plugin = load_plugin(name)
    monkeypatch.chdir(demo.parent)
    given = {k: str(v.relative_to(demo.parent)) for k, v in BUILTINS[name](demo).items()}
    parsed = plugin_options(plugin, given)
    for key, relative in given.items():
        assert parsed[key] == str(demo.parent / relative), (name, key, parsed[key])


FAULTS = {
    "not deterministic": (
        """
        import random
        def task_number(): return 2
        def dict_data(task_id):
            for i in range(5):
                yield {"id": i, "x": random.random()}
        """,
        r"plugin \w+: two runs wrote other values at row 0, field 'x' .*not deterministic",
    ),
    "tasks share state": (
        """
        SEEN = []
        def task_number():
            SEEN.clear()  # each run starts afresh: two runs agree, the tasks do not
            return 3
        def dict_data(task_id):
            SEEN.append(task_id)
            yield {"task": task_id, "seen": len(SEEN)}
        """,
        r"task 0 gives other rows when it runs again after the other tasks \(row 0 differs\)",
    ),
    "runs give other row counts": (
        """
        CALLS = [0]
        def task_number(): return 1
        def dict_data(task_id):
            CALLS[0] += 1  # one row more at each run
            for i in range(CALLS[0]):
                yield {"id": i}
        """,
        r"plugin \w+: two runs wrote 1 and 2 rows: it is not deterministic$",
    ),
    "runs give other schemas": (
        """
        CALLS = [0]
        def task_number(): return 1
        def dict_data(task_id):
            CALLS[0] += 1  # the same value, an int at the first run and a float at the second
            yield {"x": 1 if CALLS[0] == 1 else 1.0}
        """,
        r"plugin \w+: two runs wrote other schemas: it is not deterministic$",
    ),
    "a task's row count depends on the tasks before": (
        """
        SEEN = []
        def task_number():
            SEEN.clear()
            return 3
        def dict_data(task_id):
            SEEN.append(task_id)
            for i in range(len(SEEN)):
                yield {"task": task_id, "i": i}
        """,
        r"task 0 gives other rows when it runs again after the other tasks \(1 rows, then 4\)",
    ),
    "task_rows wrong": (
        """
        def task_number(): return 2
        def task_rows(task_id): return 3
        def dict_data(task_id):
            for i in range(3 if task_id == 0 else 2):
                yield {"id": i}
        """,
        r"plugin \w+: task_rows\(1\) says 3 rows, dict_data\(1\) yields 2$",
    ),
    "a row off the schema": (
        """
        def task_number(): return 2
        def schema(): return {"id": {"type": "int64"}}
        def dict_data(task_id):
            yield {"id": 1}
            yield {"id": "two"}
        """,
        r"task 0.*row 1.*'id'",
    ),
    "a help that states another default": (
        """
        def add_options(parser):
            parser.add_argument("--size", type=int, default=64, help="side in pixels (default: 32)")
        def task_number(options): return 1
        def dict_data(task_id, options):
            yield {"size": options.size}
        """,
        r"--size's help says its default is 32, but it is 64",
    ),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_mistake_is_one_line(fault, tmp_path):
    """Each plugin fails its own check alone. A wrong task_rows() is checked through run_check,
    which writes with --on-bad-input skip, whose staged path does not count on task_rows(): the
    wrong count is then the checker's finding, not the write's (with the checker's check taken
    out, the test fails)."""
    source, message = FAULTS[fault]
    plugin = make_plugin(tmp_path / "p", source)
    check = run_check if fault == "task_rows wrong" else check_plugin
    with pytest.raises(PluginCheckFailed, match=message) as caught:
        check(plugin)
    assert "\n" not in str(caught.value)


EDITED = """
def task_number():
    return 3


def schema():
    return {"caption": {"type": "string"}, "score": {"type": "float32"}}


def dict_data(task_id):
    for i in range(5):
        yield {"caption": f"photo {task_id}-{i}", "score": i / 4}
"""


def test_new_package_makes_a_package_that_registers_and_checks_its_plugin(tmp_path):
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "recordmill", "new", "--package", "my-set"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert 'pip install -e ".[test]" && recordmill plugins && pytest' in done.stdout
    root = tmp_path / "my-set"
    project = (root / "pyproject.toml").read_text()
    assert 'name = "recordmill-my-set"' in project
    assert (
        '[project.entry-points."recordmill.plugins"]\nmy-set = "recordmill_my_set.plugin"'
        in project
    )
    module = root / "src" / "recordmill_my_set"
    assert (module / "plugin.py").read_text() == (REPO / "templates/template/plugin.py").read_text()
    rendered = [p for p in root.rglob("*") if p.is_file()]
    assert sorted(str(p.relative_to(root)) for p in rendered) == [
        "README.md", "pyproject.toml", "src/recordmill_my_set/__init__.py",
        "src/recordmill_my_set/plugin.py", "tests/test_plugin.py",
    ]  # fmt: skip
    assert not [p for p in rendered if "$name" in p.read_text() or "$module" in p.read_text()]
    # Its test, as pytest runs it once the package is installed (its entry point, made here
    # as pip makes it, in a folder on the path): it holds for the template as it is ...
    site = tmp_path / "site" / "recordmill_my_set-0.1.0.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: recordmill-my-set\nVersion: 0.1.0\n"
    )
    (site / "entry_points.txt").write_text(
        "[recordmill.plugins]\nmy-set = recordmill_my_set.plugin\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(site.parent)])}
    test = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    ran = subprocess.run(test, cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout[-2000:]
    # ... and after the author's first edit (other columns, no --tasks option): no "id" asked for
    plugin = module / "plugin.py"
    plugin.write_text(EDITED)
    ran = subprocess.run(test, cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout[-2000:]
    again = subprocess.run(
        [sys.executable, "-m", "recordmill", "new", "--package", "my-set"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert (
        again.returncode == 1
        and again.stderr.strip() == f"recordmill: error: {root} already exists"
    )


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_a_copy_of_a_built_in_plugin_folder_runs_as_it_is(name, demo, tmp_path):
    import shutil

    import recordmill.plugin.manager

    if name == "torchrecord":
        pytest.importorskip("lmdb", reason="the torchrecord plugin needs recordmill[torchrecord]")
    copy = tmp_path / f"my{name}"  # cp -r plugins/NAME myNAME
    shutil.copytree(recordmill.plugin.manager.BUILTIN_DIR / name, copy)
    options = {k: str(v) for k, v in BUILTINS[name](demo).items()}
    assert check_plugin(copy, **options).equals(check_plugin(name, **options))
