"""The module graph: no import cycles inside recordmill, and the read side (reading, verifying,
decoding, PyTorch) imports nothing of the write side, nor pluggy."""

from __future__ import annotations

import ast
from pathlib import Path

import recordmill

PACKAGE = Path(recordmill.__file__).resolve().parent
READ_SIDE = ["recordmill.reader", "recordmill.torch", "recordmill.verify", "recordmill.decode"]
WRITE_SIDE = {
    "recordmill.cli",
    "recordmill.convert",
    "recordmill.engine",
    "recordmill.executors",
    "recordmill.fragments",
    "recordmill.hookspecs",
    "recordmill.mindrecord",
    "recordmill.options",
    "recordmill.output",
    "recordmill.partitions",
    "recordmill.plugins",
    "recordmill.pool",
    "recordmill.settings",
    "recordmill.tasks",
    "recordmill.writers",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(name: str) -> set[str]:
    """What a module imports, anywhere in it: modules of recordmill by name, others by their
    top-level package."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in MODULES else node.module)
    return {n if n in MODULES else n.split(".")[0] for n in found}


def reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for n in imports(todo.pop()):
            if n not in seen:
                seen.add(n)
                if n in MODULES:
                    todo.append(n)
    return seen


def test_the_read_side_needs_nothing_of_the_write_side():
    for name in READ_SIDE:
        needed = reachable(name)
        assert not needed & WRITE_SIDE, f"{name} imports {sorted(needed & WRITE_SIDE)}"
        assert "pluggy" not in needed and "recordmill" not in needed, name


def test_no_import_cycles():
    for name in MODULES:
        if name != "recordmill":
            assert name not in reachable(name), f"{name} imports itself through others"


def test_reading_loads_nothing_of_the_write_side():
    import subprocess
    import sys

    code = (
        "import sys, recordmill, recordmill.reader, recordmill.verify, recordmill.decode\n"
        "print(sorted(m for m in sys.modules if m == 'pluggy' or m.startswith('recordmill.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded = set(eval(done.stdout))
    assert "pluggy" not in loaded and not loaded & WRITE_SIDE, sorted(loaded & WRITE_SIDE)


def test_the_readme_s_decode_attribute_works_after_import_recordmill_alone():
    import subprocess
    import sys

    code = "import recordmill\nprint(recordmill.decode.image.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "image", done.stderr
