"""The architecture as rules on folders: no import cycles; the read side (``read/``) and our
format (``dataset/``) import nothing of the write side (``engine/``, ``plugin/``, ``executors/``,
``cli/``) nor pluggy; and no module, function or class grows past the sizes a newcomer can read."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import recordmill
from recordmill.plugin.manager import BUILTIN_DIR
from tests.conftest import python_prints

PACKAGE = Path(recordmill.__file__).resolve().parent
WRITE_SIDE = ("engine", "plugin", "executors", "cli")
# What each layer may import of recordmill, besides the single modules at the top (errors,
# version, compat) and itself.
ALLOWED = {
    "dataset": set(),
    "read": {"dataset"},
    "inputs": {"dataset", "read"},
    "report": {"dataset", "read"},
    "plugin": {"dataset", "inputs"},
    "executors": {"dataset", "plugin"},  # given what a run needs: no import up to engine/
    "engine": {"dataset", "plugin", "executors", "inputs"},
    "cli": {"dataset", "read", "plugin", "engine", "executors", "inputs", "report"},
}
MAX_MODULE_LINES, MAX_FUNCTION_LINES, MAX_CLASS_LINES = 500, 60, 200


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ALLOWED) else None


@functools.cache  # reachable() asks again and again: each module parsed once
def imports(name: str) -> frozenset[str]:
    """What a module imports, anywhere in it but under ``if TYPE_CHECKING:``: modules of
    recordmill by name, others by their top-level package."""
    found = set()
    tree = ast.parse(MODULES[name].read_text())
    for block in ast.walk(tree):  # `if TYPE_CHECKING:` imports are for annotations only
        if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING"):
            block.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in MODULES else node.module)
    return frozenset(n if n in MODULES else n.split(".")[0] for n in found)


def reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for n in imports(todo.pop()):
            if n not in seen:
                seen.add(n)
                if n in MODULES:
                    todo.append(n)
    return seen


def test_every_module_is_in_a_layer_or_a_single_job_module_at_the_top():
    top = {n for n in MODULES if layer(n) is None}
    assert top <= {
        "recordmill",
        "recordmill.__main__",
        "recordmill.errors",
        "recordmill.version",
        "recordmill.compat",
        "recordmill.forkserver",  # the workers' fork server, started before the imports
        "recordmill.timeline",  # RECORDMILL_TIMELINE: a write's moments, process by process
        "recordmill.kit",  # the plugin kit: what plugins use, gathered from the layers
        "recordmill.testing",  # check_plugin(): a plugin's write, checked, for its tests
        "recordmill.fixtures",  # the check_plugin pytest fixture (the pytest11 entry point)
    }, top


def test_each_layer_imports_only_the_layers_below_it():
    for name in MODULES:
        mine = layer(name)
        if mine is None:
            continue
        for other in imports(name):
            theirs = layer(other) if other.startswith("recordmill.") else None
            if theirs is not None and theirs != mine:
                assert theirs in ALLOWED[mine], f"{name} ({mine}/) imports {other} ({theirs}/)"


def test_the_read_side_needs_nothing_of_the_write_side():
    for name in [n for n in MODULES if layer(n) in ("read", "dataset")]:
        needed = reachable(name)
        wrong = sorted(n for n in needed if layer(n) in WRITE_SIDE)
        assert not wrong, f"{name} imports {wrong}"
        assert "pluggy" not in needed, name


def test_only_the_pytorch_wing_imports_torch():
    """``recordmill/read/torch/`` holds every module that imports torch: the rest of the read
    side (and everything else) is read without it."""
    wing = "recordmill.read.torch"
    found = sorted(n for n in MODULES if "torch" in imports(n) and not n.startswith(wing))
    assert not found, f"modules outside read/torch/ that import torch: {found}"
    assert "torch" in imports(f"{wing}.datasets")  # the rule sees an import of torch


def test_every_package_folder_is_in_the_wheel():
    """pyproject.toml lists the packages the wheel holds, one by one: a new folder of the
    package must be among them (an editable install finds it either way)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on

    listed = set(
        tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"][
            "packages"
        ]
    )
    folders = {module_name(p) for p in PACKAGE.rglob("__init__.py")}
    assert folders <= listed, f"not in pyproject.toml's packages: {sorted(folders - listed)}"


def test_no_import_cycles():
    for name in MODULES:
        if name != "recordmill":
            assert name not in reachable(name), f"{name} imports itself through others"


def test_reading_loads_nothing_of_the_write_side():
    code = (
        "import sys, recordmill, recordmill.read.verify, recordmill.decode\n"
        "print(sorted(m for m in sys.modules if m == 'pluggy' or m.startswith('recordmill.')))"
    )
    loaded = eval(python_prints(code))
    assert "pluggy" not in loaded, loaded
    assert not [m for m in loaded if layer(m) in WRITE_SIDE], loaded


def test_the_readme_s_decode_attribute_works_after_import_recordmill_alone():
    code = "import recordmill\nprint(recordmill.decode.image.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "image", done.stderr


def test_the_old_module_names_are_the_new_modules():
    pytest.importorskip("torch", reason="PyTorch is not installed here")
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "import recordmill.torch, recordmill.read.torch, recordmill.hookspecs\n"
        "assert recordmill.torch is recordmill.read.torch\n"
        "try:\n    import recordmill.formats.images\nexcept DeprecationWarning as e:\n"
        "    print(e)\n"
        "warnings.simplefilter('ignore')\n"
        "import recordmill.formats.images, recordmill.inputs.images\n"
        "assert recordmill.formats.images is recordmill.inputs.images\n"
    )
    assert "recordmill.formats is now recordmill.inputs" in python_prints(code)


def test_modules_functions_and_classes_stay_small():
    """Every unit within its limit; those within 10% of it listed in the output (a warning), so
    that the next feature in one is a split planned, not an emergency."""
    sizes = []  # (name, lines, limit)
    for name, path in MODULES.items():
        text = path.read_text()
        sizes.append((f"module {name}", text.count("\n"), MAX_MODULE_LINES))
        for node in ast.walk(ast.parse(text)):
            limit = {
                ast.FunctionDef: MAX_FUNCTION_LINES,
                ast.AsyncFunctionDef: MAX_FUNCTION_LINES,
                ast.ClassDef: MAX_CLASS_LINES,
            }.get(type(node))
            if limit is not None:
                sizes.append((f"{name}.{node.name}", node.end_lineno - node.lineno + 1, limit))
    too_big = [
        f"{n}: {lines} lines (at most {limit})" for n, lines, limit in sizes if lines > limit
    ]
    assert not too_big, "\n".join(too_big)
    near = sorted(
        (lines / limit, n, lines, limit) for n, lines, limit in sizes if lines > 0.9 * limit
    )
    if near:
        listed = "; ".join(f"{n} {lines}/{limit}" for _, n, lines, limit in reversed(near))
        warnings.warn(f"within 10% of their size limits: {listed}", stacklevel=1)


def test_the_test_extra_keeps_the_newest_pyarrow():
    """No package of the ``test`` extra caps pyarrow (daft's pyarrow<26 would test recordmill on
    an older pyarrow than users install): such a package gets an extra of its own."""
    import importlib.metadata
    import re

    import pytest

    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's")
    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
    test_extra = pyproject["project"]["optional-dependencies"]["test"]
    capping = []
    for requirement in test_extra:
        name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        capping += [
            f"{name}: {r}"
            for r in requires
            if re.match(r"pyarrow\b", r) and "<" in r.split(";")[0] and "extra ==" not in r
        ]
    assert not capping, capping


def test_the_plugin_kit_is_reachable_after_import_recordmill():
    """A plugin written as `import recordmill` then `type=recordmill.kit.Path` works."""
    code = "import os, recordmill; print(recordmill.kit.Path('x') == os.path.abspath('x'))"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert found.stdout.strip() == "True", found.stderr


def test_the_built_in_plugins_use_only_the_public_api_and_the_kit():
    """What the nine built-ins need is in recordmill.kit: a third-party plugin can do the same."""
    public = {"recordmill", "recordmill.kit", "recordmill.decode", "recordmill.torch"}
    public |= {f"recordmill.kit.{n}" for n in __import__("recordmill.compat").compat.KIT_FORMATS}
    wrong = []
    for path in sorted(BUILTIN_DIR.glob("*/*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            wrong += [f"{path.parent.name}/{path.name}: {n}" for n in names
                      if n.startswith("recordmill") and n not in public]  # fmt: skip
    assert not wrong, wrong


def test_import_recordmill_loads_nothing_until_a_name_is_used():
    # The saving itself: the package's import loads neither side, nor pyarrow (a write's fork
    # server starts before them); the first use of a name loads what it needs.
    code = (
        "import sys, recordmill\n"
        "print(sorted(m for m in ('pyarrow', 'numpy', 'recordmill.read.dataset', 'pluggy')"
        " if m in sys.modules))\n"
        "recordmill.open, recordmill.read_manifest, recordmill.read.dataset\n"
        "print('recordmill.read.dataset' in sys.modules, 'pluggy' in sys.modules)\n"
    )
    assert python_prints(code).split("\n")[:2] == ["[]", "True False"]


def test_a_write_imports_no_yaml_without_a_config_or_schema_file(tmp_path):
    """The saving itself (9 ms of a small write's start, in its main process): yaml is read
    only for --config or a schema file."""
    code = (
        "import sys\n"
        "from recordmill.cli import write_main\n"
        "assert write_main(sys.argv[1:]) == 0\n"
        "print('yaml loaded:', 'yaml' in sys.modules)\n"
    )
    template = str(PACKAGE.parent / "templates" / "template")
    args = ["--script", template, "--output", str(tmp_path / "out"), "--quiet", "--workers", "1"]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "yaml loaded: False"
