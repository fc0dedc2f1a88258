"""``recordmill new --package NAME``: a pip-installable plugin package, rendered from
``templates/package/``: ``pyproject.toml`` registering the plugin under ``NAME`` in the
``recordmill.plugins`` entry-point group, a src layout, the plugin module (a copy of the plugin
template), a test that uses the ``check_plugin`` pytest fixture, and a README."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from string import Template

from recordmill.errors import ConfigError
from recordmill.plugin.manager import TEMPLATE_DIR
from recordmill.version import __version__

__all__ = ["make_package"]

# The package's files: templates/package/, each FILE.tmpl rendered as FILE ($name, $module,
# $version), src/ as src/MODULE/; the plugin module is a copy of the plugin template.
SUFFIX = ".tmpl"


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
    source = TEMPLATE_DIR.parent / "package"
    for found in sorted(source.rglob("*" + SUFFIX)):
        relative = found.relative_to(source).with_suffix("")  # FILE.tmpl -> FILE
        if relative.parts[0] == "src":
            relative = Path("src", module, *relative.parts[1:])
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        (target / relative).write_text(Template(found.read_text()).substitute(fields))
    shutil.copy(TEMPLATE_DIR / "plugin.py", target / "src" / module / "plugin.py")
    return target
