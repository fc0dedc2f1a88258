"""Finding plugins (path, entry point, built-in), and checking them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

import recordmill
from recordmill.errors import PluginError
from recordmill.plugin.manager import BUILTIN_DIR, available_plugins, load_plugin, resolve
from tests.conftest import COUNTING_PLUGIN, REPO, make_plugin, read_dataset, run_writer, write_here


@pytest.fixture
def with_package(installed_package, monkeypatch) -> Path:
    monkeypatch.syspath_prepend(str(installed_package))
    return installed_package


def test_folder_path(counting_plugin):
    ref = resolve(str(counting_plugin))
    assert (ref.name, ref.source) == ("counting", "path")
    assert ref.target == str(counting_plugin / "plugin.py")


def test_py_file_path(tmp_path):
    path = tmp_path / "single.py"
    path.write_text(textwrap.dedent(COUNTING_PLUGIN))
    plugin = load_plugin(str(path))
    assert (plugin.name, plugin.ref.source) == ("single", "path")
    assert plugin.task_number(recordmill.Options(sizes="1,2,3")) == 3


def test_builtin_by_name():
    ref = resolve("imagenet")
    assert ref.source == "builtin"
    assert ref.target == str(BUILTIN_DIR / "imagenet" / "plugin.py")


def test_entry_point_of_an_installed_package(with_package, tmp_path):
    ref = resolve("thirdparty")
    assert (ref.source, ref.target) == ("entrypoint", "rm_thirdparty.plugin")
    assert any(r.name == "thirdparty" and r.source == "entrypoint" for r in available_plugins())
    out = tmp_path / "out"
    recordmill.write("thirdparty", out, partitions=2, workers=2, progress=False)
    assert read_dataset(out)["source"].to_pylist() == ["entrypoint"] * 6


def test_entry_point_through_writer_py(installed_package, tmp_path):
    from tests.conftest import run_writer

    result = run_writer(
        "--script",
        "thirdparty",
        "--output",
        tmp_path / "out",
        "--workers",
        "2",
        "--quiet",
        env={"PYTHONPATH": str(installed_package)},
    )
    assert result.returncode == 0, result.stderr
    assert read_dataset(tmp_path / "out")["source"].to_pylist() == ["entrypoint"] * 6


def test_a_folder_wins_over_a_plugin_of_the_same_name_with_a_warning(
    with_package, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    make_plugin(tmp_path / "thirdparty", COUNTING_PLUGIN)
    with pytest.warns(recordmill.RecordmillWarning, match="entrypoint:thirdparty picks it"):
        ref = resolve("thirdparty")
    assert ref.source == "path"
    assert resolve("entrypoint:thirdparty").source == "entrypoint"
    make_plugin(tmp_path / "imagenet", COUNTING_PLUGIN)
    with pytest.warns(recordmill.RecordmillWarning, match="builtin:imagenet picks it"):
        assert resolve("imagenet").source == "path"
    assert resolve("builtin:imagenet").source == "builtin"


def test_unknown_name_lists_what_was_tried_and_what_exists(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PluginError) as info:
        resolve("nosuchplugin")
    message = str(info.value)
    assert "recordmill.plugins" in message and str(BUILTIN_DIR) in message
    assert "imagenet" in message  # the available plugins


def test_folder_without_plugin_module(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(PluginError, match=r"neither plugin\.py nor a MindRecord mr_api\.py"):
        resolve(str(tmp_path / "empty"))


def test_missing_required_hook_names_the_plugin_and_suggests(tmp_path):
    folder = make_plugin(
        tmp_path / "typo",
        """
        def task_number():
            return 1

        def dict_date(task_id):
            yield {"x": 1}
        """,
    )
    with pytest.raises(
        PluginError, match=r"typo .*dict_data\(\).*did you mean to name 'dict_date'"
    ):
        load_plugin(str(folder))


def test_hookimpl_matching_no_hook_is_an_error(tmp_path):
    folder = make_plugin(
        tmp_path / "extra",
        """
        import recordmill

        def task_number():
            return 1

        def dict_data(task_id):
            yield {"x": 1}

        @recordmill.hookimpl
        def sckema():
            return {}
        """,
    )
    with pytest.raises(PluginError, match=r"extra.*sckema"):
        load_plugin(str(folder))


def test_hook_with_an_argument_the_spec_lacks(tmp_path):
    folder = make_plugin(
        tmp_path / "badargs",
        """
        def task_number(options, verbose):
            return 1

        def dict_data(task_id):
            yield {"x": 1}
        """,
    )
    with pytest.raises(PluginError, match=r"(?s)badargs.*verbose"):
        load_plugin(str(folder))


def test_import_error_names_the_plugin_file(tmp_path):
    folder = make_plugin(tmp_path / "broken", "import no_such_module_here\n")
    with pytest.raises(
        PluginError, match=r"broken/plugin.py.*No module named 'no_such_module_here'"
    ):
        load_plugin(str(folder))


@pytest.mark.parametrize("value", [-1, "3", 2.5, None, True])
def test_task_number_must_be_a_non_negative_int(tmp_path, value):
    folder = make_plugin(
        tmp_path / "count",
        f"""
        def task_number():
            return {value!r}

        def dict_data(task_id):
            yield {{"x": 1}}
        """,
    )
    with pytest.raises(PluginError, match=r"task_number\(\) must return an int >= 0"):
        recordmill.write(str(folder), tmp_path / "out", progress=False)


def test_two_copies_of_the_template_do_not_collide(tmp_path):
    template = Path(recordmill.__file__).parent.parent / "templates" / "template" / "plugin.py"
    a = make_plugin(tmp_path / "a" / "xyz", template.read_text())
    b = make_plugin(tmp_path / "b" / "xyz", template.read_text().replace("default=4", "default=9"))
    assert load_plugin(str(a)).obj is not load_plugin(str(b)).obj
    options = recordmill.plugin.options.plugin_options
    assert options(load_plugin(str(a))).tasks == 4
    assert options(load_plugin(str(b))).tasks == 9


def test_the_wheel_carries_the_built_in_plugins_and_the_template(tmp_path):
    # Built from a copy, so that no build/ folder is left in (or reused from) the repository.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in ("recordmill", "templates", "plugins"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    build = [*pip, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run([*build, "-w", str(tmp_path / "dist"), str(source)], check=True)
    (wheel,) = (tmp_path / "dist").glob("recordmill-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())

    def files(folder: Path) -> set[str]:
        return {
            p.relative_to(folder).as_posix()
            for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }

    builtin_dir = REPO / "plugins"
    builtins = sorted(d.name for d in builtin_dir.iterdir() if (d / "plugin.py").is_file())
    assert {"imagenet", "filelist", "mnist", "csv", "tfrecord"} <= set(builtins)
    for rel in files(builtin_dir):
        assert f"recordmill/builtin_plugins/{rel}" in names
    template = files(REPO / "templates" / "template")
    assert "plugin.py" in template
    for rel in template:
        assert f"recordmill/templates/template/{rel}" in names
    assert not [n for n in names if n.endswith(".pyc")]

    # Installed (here into a folder put first on the path), it finds them without the repository.
    site = tmp_path / "site"
    subprocess.run(
        [*pip, "install", "--quiet", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
        check=True,
    )
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "recordmill", *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    listed = cli("plugins")
    assert listed.returncode == 0, listed.stderr
    sources = {
        line.split()[0]: line.split()[2]
        for line in listed.stdout.splitlines()
        if not line.startswith(" ")  # the line under each says what the plugin reads
    }
    for name in builtins:
        assert sources[name] == str(site / "recordmill" / "builtin_plugins" / name / "plugin.py")
    new = cli("new", "xyz")
    assert new.returncode == 0, new.stderr
    assert files(work / "xyz") == template
    assert "recordmill write --script xyz " in new.stdout


TWO_MODULES = """
    import helpers
    from .helpers import WHO

    def task_number():
        return 3

    def dict_data(task_id):
        from . import helpers as again  # a relative import at run time, in a worker
        yield {"who": helpers.WHO + WHO + again.WHO, "task": task_id}
"""


def two_module_plugin(folder: Path, who: str) -> Path:
    make_plugin(folder, TWO_MODULES)
    (folder / "helpers.py").write_text(f"WHO = {who!r}\n")
    return folder


def test_a_plugin_folder_imports_its_own_modules_without_leaking(tmp_path):
    first = two_module_plugin(tmp_path / "first", "a")
    second = two_module_plugin(tmp_path / "second", "b")
    for workers in ("0", "2"):
        for plugin, who in ((first, "aaa"), (second, "bbb")):
            out = tmp_path / f"{plugin.name}{workers}"
            result = run_writer("--script", plugin, "--output", out, "--workers", workers)
            assert result.returncode == 0, result.stderr
            assert read_dataset(out)["who"].to_pylist() == [who] * 3
    # One process, both plugins: each its own helpers.py, none left for a plain import.
    for plugin, who in ((first, "aaa"), (second, "bbb")):
        recordmill.write(plugin, tmp_path / f"api-{who}", workers=2, progress=False)
        assert read_dataset(tmp_path / f"api-{who}")["who"].to_pylist() == [who] * 3
    assert "helpers" not in sys.modules


def test_a_data_folder_named_like_a_built_in_does_not_shadow_it(tmp_path):
    images = tmp_path / "imagenet" / "cat"
    images.mkdir(parents=True)
    (images / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 16)
    result = write_here(  # in this process, from tmp_path as its working folder
        *("--script", "imagenet", "--image-dir", "imagenet", "--output", "out", "--quiet"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert recordmill.read_manifest(tmp_path / "out")["plugin"]["source"] == "builtin"
    as_path = write_here(
        *("--script", "./imagenet", "--image-dir", "imagenet", "--output", "o2"), cwd=tmp_path
    )
    assert as_path.returncode == 1
    assert "is not a plugin" in as_path.stderr and "--script builtin:imagenet" in as_path.stderr
