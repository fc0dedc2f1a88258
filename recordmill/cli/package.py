"""``recordmill new --package NAME``: a pip-installable plugin package, made from the template:
``pyproject.toml`` registering the plugin under ``NAME`` in the ``recordmill.plugins`` entry-point
group, a src layout, the plugin module, a test that uses ``recordmill.testing`` and a README."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from recordmill.errors import ConfigError
from recordmill.plugin.manager import TEMPLATE_DIR
from recordmill.version import __version__

__all__ = ["make_package"]

PYPROJECT = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "recordmill-{name}"
version = "0.1.0"
description = "The {name} dataset plugin for recordmill"
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["recordmill>={version}"]

[project.optional-dependencies]
test = ["pytest"]

# `recordmill write --script {name}` finds the plugin through this entry point.
[project.entry-points."recordmill.plugins"]
{name} = "{module}.plugin"

[tool.setuptools.packages.find]
where = ["src"]
"""

TEST = '''\
"""The plugin checked by recordmill.testing: the rows fit the schema, two runs give the same rows,
the tasks are independent, task_rows() (if any) is right, the help states the defaults."""

from recordmill.testing import check_plugin


def test_the_plugin_writes_what_it_should():
    rows = check_plugin("{name}", tasks=2, rows_per_task=10)  # small options: a quick run
    assert rows.num_rows == 2 * 10
    assert rows.column("id").to_pylist() == list(range(20))
'''

README = """\
# recordmill-{name}

The `{name}` dataset plugin for [recordmill](https://pypi.org/project/recordmill/).

```
pip install -e ".[test]" && recordmill plugins          # installs it; {name} is listed
pytest                                                  # checks it (recordmill.testing)
```

Then `recordmill write --script {name} --output out/{name} --partitions 4`. Edit
`src/{module}/plugin.py`: `task_number()` and `dict_data(task_id)`, and the options in
`add_options()`; its docstring says what each hook does.
"""


def make_package(name: str, where: Path) -> Path:
    """The package folder ``where/NAME``; refuses a name that is no plugin name or a folder that
    exists (nothing a user wrote is replaced)."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name):
        raise ConfigError(
            f"--package {name!r}: a plugin name is letters, digits, - and _, starting with a letter"
        )
    target = where / name
    if os.path.lexists(target):  # a link to nothing too: never written through
        raise ConfigError(f"{target} already exists{' (a symbolic link)' * target.is_symlink()}")
    module = "recordmill_" + name.lower().replace("-", "_")
    fields = {"name": name, "module": module, "version": __version__}
    package = target / "src" / module
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f'"""The {name} dataset plugin for recordmill."""\n')
    shutil.copy(TEMPLATE_DIR / "plugin.py", package / "plugin.py")
    (target / "tests").mkdir()
    (target / "tests" / "test_plugin.py").write_text(TEST.format(**fields))
    (target / "pyproject.toml").write_text(PYPROJECT.format(**fields))
    (target / "README.md").write_text(README.format(**fields))
    return target
