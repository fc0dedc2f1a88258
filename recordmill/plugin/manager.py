"""Finding and loading dataset plugins, and the PluginManager that calls their hooks.

``--script`` is resolved in this order (the first match wins):

1. ``builtin:NAME`` or ``entrypoint:NAME`` pick that source explicitly.
2. An existing path: a folder holding ``plugin.py`` (a copy of ``templates/template``) or a
   ``.py`` file. A path always wins, so a folder you just made is never shadowed; when its name is
   also an installed or built-in plugin, a note on stderr says so. A folder that is not a plugin
   (no ``plugin.py``, no ``mr_api.py``: ``./imagenet`` holding the images) does not shadow the
   plugin of that name.
3. A name registered in the entry-point group ``recordmill.plugins`` by an installed package.
4. A built-in plugin: a folder in ``plugins/`` (``recordmill/builtin_plugins/`` when installed).
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from recordmill.errors import PluginError, RecordmillError, RecordmillWarning
from recordmill.plugin import hookspecs
from recordmill.plugin.mr_api import LEGACY_MODULE, MindRecordPlugin

ENTRY_POINT_GROUP = "recordmill.plugins"
PLUGIN_MODULE = "plugin.py"
# The built-in plugins live in this package (builtin/). The plugin template stays in the
# repository's top-level templates/ folder (cp -r templates/template xyz works from a clone); an
# installed wheel carries it inside the package, as recordmill/templates/ (see pyproject.toml).
_PACKAGE_DIR = Path(__file__).resolve().parent.parent
# The built-in plugins: in the wheel, recordmill/builtin_plugins/; in a clone (and an editable
# install), the repository's plugins/.
BUILTIN_DIR = next(
    (p for p in (_PACKAGE_DIR / "builtin_plugins", _PACKAGE_DIR.parent / "plugins") if p.is_dir()),
    _PACKAGE_DIR / "builtin_plugins",
)
# Other names of built-in plugins, for what users look for: JSON Lines files are the csv
# plugin's (it reads CSV, TSV and JSON Lines).
BUILTIN_ALIASES = {"jsonl": "csv", "json": "csv"}
# The package a plugin folder is imported as: this, the folder's name and a hash of its path.
FOLDER_PACKAGES = "recordmill_plugin_"
TEMPLATE_DIR = next(
    (
        p
        for p in (
            _PACKAGE_DIR / "templates" / "template",
            _PACKAGE_DIR.parent / "templates" / "template",
        )
        if p.is_dir()
    ),
    _PACKAGE_DIR / "templates" / "template",
)
HOOK_NAMES = frozenset(
    name for name, value in vars(hookspecs).items() if hasattr(value, "recordmill_spec")
)


@dataclass(frozen=True)
class PluginRef:
    """Where a plugin comes from; small and picklable, so worker processes can load it again."""

    name: str
    source: str  # "path", "builtin", "entrypoint", "module" or "mindrecord" (an mr_api.py)
    target: str  # a file path, an entry point's value, or an importable module name

    def describe(self) -> str:
        return f"{self.name} ({self.source}: {self.target})"


class _PluginManager(pluggy.PluginManager):
    """Accepts plain functions named as hooks, the way pytest accepts plain ``pytest_*`` functions."""

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name in HOOK_NAMES and inspect.isroutine(getattr(plugin, name, None)):
            opts = {
                "wrapper": False,
                "hookwrapper": False,
                "optionalhook": False,
                "tryfirst": False,
                "trylast": False,
                "specname": None,
            }
        return opts


def get_plugin_manager() -> pluggy.PluginManager:
    """A fresh PluginManager that knows recordmill's hooks and no plugins yet."""
    pm = _PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    return pm


def resolve(script: str) -> PluginRef:
    """Turn a ``--script`` value into a :class:`PluginRef` (see the module docstring for the order)."""
    prefix, _, rest = script.partition(":")
    if prefix == "builtin" and rest:
        return _builtin(rest) or _unknown(script)
    if prefix == "entrypoint" and rest:
        return _entry_point(rest) or _unknown(script)

    path = Path(script).expanduser()
    if path.exists():
        named = [r for r in (_entry_point(script), _builtin(script)) if r is not None]
        if named and not _is_plugin_folder(path):
            # A data folder named like a plugin (./imagenet holding the images) is not a plugin.
            return named[0]
        ref = _from_path(path)
        shadowed = [r for r in (_entry_point(script), _builtin(script)) if r is not None]
        for other in shadowed:
            warnings.warn(
                f"using the {ref.source} {ref.target}; the {other.source} plugin "
                f"{other.name!r} has the same name (--script {other.source}:{other.name} picks "
                "it)",
                RecordmillWarning,
                stacklevel=2,
            )
        return ref
    return _entry_point(script) or _builtin(script) or _unknown(script)


def _is_plugin_folder(path: Path) -> bool:
    return not path.is_dir() or any((path / n).is_file() for n in (PLUGIN_MODULE, LEGACY_MODULE))


def _from_path(path: Path) -> PluginRef:
    path = path.resolve()
    if path.is_dir():
        module_file = path / PLUGIN_MODULE
        if module_file.is_file():
            return PluginRef(path.name, "path", str(module_file))
        if (path / LEGACY_MODULE).is_file():
            return PluginRef(path.name, "mindrecord", str(path / LEGACY_MODULE))
        named = [r for r in (_entry_point(path.name), _builtin(path.name)) if r is not None]
        hint = (
            f"; for the {named[0].source} plugin {path.name!r}: --script "
            f"{named[0].source}:{path.name}"
            if named
            else " (start one with: recordmill new NAME)"
        )
        raise PluginError(
            f"folder {path} is not a plugin: it has neither {PLUGIN_MODULE} nor a MindRecord "
            f"{LEGACY_MODULE}{hint}"
        )
    if path.suffix != ".py":
        raise PluginError(f"{path} is neither a plugin folder nor a .py file")
    return PluginRef(path.stem, "path", str(path))


def _is_name(text: str) -> bool:
    return "/" not in text and os.sep not in text and not text.endswith(".py")


def _builtin(name: str) -> PluginRef | None:
    if not _is_name(name):
        return None
    module_file = BUILTIN_DIR / BUILTIN_ALIASES.get(name, name) / PLUGIN_MODULE
    if module_file.is_file():
        return PluginRef(name, "builtin", str(module_file))
    return None


def _entry_point(name: str) -> PluginRef | None:
    if not _is_name(name):
        return None
    import importlib.metadata  # here: 10 ms of a write's start, which a plugin path never needs

    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return PluginRef(name, "entrypoint", ep.value)
    return None


def _unknown(script: str) -> PluginRef:
    available = ", ".join(sorted({ref.name for ref in available_plugins()})) or "none"
    raise PluginError(
        f"no plugin {script!r}: tried the path {Path(script).expanduser().resolve()}, "
        f"the entry-point group {ENTRY_POINT_GROUP!r}, and the built-in plugins in {BUILTIN_DIR}. "
        f"Available plugins: {available}"
    )


def available_plugins(search_dir: Path | None = None) -> list[PluginRef]:
    """Every plugin recordmill can find: folders in ``search_dir``, entry points, built-ins."""
    found = []
    if search_dir is not None:
        found += [
            PluginRef(d.name, "path", str(d / PLUGIN_MODULE))
            for d in sorted(search_dir.iterdir())
            if (d / PLUGIN_MODULE).is_file()
        ]
    import importlib.metadata

    found += sorted(
        (
            PluginRef(ep.name, "entrypoint", ep.value)
            for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        ),
        key=lambda ref: ref.name,
    )
    if BUILTIN_DIR.is_dir():
        found += [
            PluginRef(d.name, "builtin", str(d / PLUGIN_MODULE))
            for d in sorted(BUILTIN_DIR.iterdir())
            if (d / PLUGIN_MODULE).is_file()
        ]
        found += [ref for alias in sorted(BUILTIN_ALIASES) if (ref := _builtin(alias))]
    return found


def summary(ref: PluginRef) -> str:
    """What a plugin reads: the first line of its module's docstring (read without importing a
    plugin file; an entry point is imported), or "" when it has none."""
    try:
        if ref.source in ("path", "builtin"):
            text = ast.get_docstring(ast.parse(Path(ref.target).read_text())) or ""
        else:
            text = inspect.getdoc(load(ref)) or ""
    except Exception:  # a plugin that does not load is listed all the same; loading it says why
        return ""
    first = text.strip().split("\n", 1)[0]
    return re.sub(r"^Built-in plugin ``[\w-]+``: ", "", first).replace("``", "")


_loaded: dict[PluginRef, Any] = {}


def load(ref: PluginRef) -> Any:
    """Import the plugin's module (or entry-point object), once per process."""
    if ref not in _loaded:
        _loaded[ref] = _import(ref)
    return _loaded[ref]


def _import(ref: PluginRef) -> Any:
    try:
        if ref.source == "entrypoint":
            import importlib.metadata

            return importlib.metadata.EntryPoint(ref.name, ref.target, ENTRY_POINT_GROUP).load()
        if ref.source == "module":
            return importlib.import_module(ref.target)
        if ref.source == "mindrecord":
            return MindRecordPlugin(_import_file(Path(ref.target)), ref.name)
        return _import_file(Path(ref.target))
    except PluginError:
        raise
    except Exception as e:
        raise PluginError(f"cannot import plugin {ref.describe()}: {type(e).__name__}: {e}") from e


def _import_file(path: Path) -> ModuleType:
    """Import a plugin file as a module of a package that is its folder, so that its own modules
    import: ``from .helpers import x`` (anywhere), and ``import helpers`` (at import time, as in
    a script: the folder is on ``sys.path`` only while the file runs)."""
    # A unique package name per folder, so two copies of the template never collide in
    # sys.modules; plain-imported modules of the folder are taken out of sys.modules afterwards,
    # so that another plugin's helpers.py is its own.
    folder = path.parent
    digest = hashlib.sha1(str(folder).encode()).hexdigest()[:10]
    package = f"{FOLDER_PACKAGES}{_identifier(folder.name)}_{digest}"
    module_name = f"{package}.{_identifier(path.stem)}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    before = set(sys.modules)
    sys.path.insert(0, str(folder))
    try:
        # A folder plugin's __init__.py runs, as Python runs a package's; a lone .py file's
        # folder is only where its siblings are found.
        _package(package, folder, run_init=path.name in (PLUGIN_MODULE, LEGACY_MODULE))
        if module_name in sys.modules:  # the folder's __init__.py imported it
            return sys.modules[module_name]
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise PluginError(f"cannot import plugin file {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    except BaseException:
        for name in (module_name, package):
            if name not in before:
                sys.modules.pop(name, None)
        raise
    finally:
        sys.path.remove(str(folder))
        _forget_plain_imports(set(sys.modules) - before, folder)
    return module


def _identifier(name: str) -> str:
    return re.sub(r"\W", "_", name)


def _package(name: str, folder: Path, run_init: bool) -> ModuleType:
    """The package ``name`` whose modules are the files of ``folder`` (its ``__init__.py`` run,
    when it has one and ``run_init``)."""
    if name in sys.modules:
        return sys.modules[name]
    init = folder / "__init__.py"
    spec = None
    if run_init and init.is_file():
        spec = importlib.util.spec_from_file_location(
            name, init, submodule_search_locations=[str(folder)]
        )
    if spec is None:  # no __init__.py to run: a package with nothing of its own
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(folder)]
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    if spec.loader is not None:
        spec.loader.exec_module(package)
    return package


def _forget_plain_imports(names: set[str], folder: Path) -> None:
    """Take the modules of ``folder`` that the plugin imported as top-level modules (``import
    helpers``) out of ``sys.modules``: the plugin keeps them, another plugin does not see them."""
    for name in names:
        top = name.partition(".")[0]
        file = getattr(sys.modules.get(name), "__file__", None)
        # Only what this import brought in, top-level package included: a module of recordmill
        # itself imported for the first time stays, even where the folder holds recordmill.
        ours = top in names and not top.startswith("recordmill_plugin_") and file
        if ours and Path(file).resolve().is_relative_to(folder.resolve()):
            del sys.modules[name]


def ref_for_module(module: ModuleType) -> PluginRef:
    """A reference to an already imported module, for ``recordmill.write(module, ...)``."""
    short = module.__name__.rpartition(".")[2]
    if module.__name__ in sys.modules and module.__spec__ is not None:
        file = getattr(module, "__file__", None)
        if module.__name__.startswith("recordmill_plugin_") and file:
            return PluginRef(Path(file).parent.name, "path", file)
        return PluginRef(short, "module", module.__name__)
    raise PluginError(f"module {module.__name__} cannot be imported again by worker processes")


class DatasetPlugin:
    """A loaded dataset plugin: its hooks, checked, behind plain methods."""

    def __init__(self, ref: PluginRef, obj: Any = None):
        self.ref = ref
        self.obj = load(ref) if obj is None else obj
        self.pm = get_plugin_manager()
        try:
            self.pm.register(self.obj, name=ref.name)
            self.pm.check_pending()
        except pluggy.PluginValidationError as e:
            raise PluginError(f"plugin {ref.describe()}: {e}") from e
        self._check_required()

    def _check_required(self) -> None:
        for hook_name in hookspecs.REQUIRED_HOOKS:
            if getattr(self.pm.hook, hook_name).get_hookimpls():
                continue
            defined = [n for n in dir(self.obj) if inspect.isroutine(getattr(self.obj, n, None))]
            close = difflib.get_close_matches(hook_name, defined, n=1)
            hint = f" (did you mean to name {close[0]!r} {hook_name!r}?)" if close else ""
            raise PluginError(
                f"plugin {self.ref.describe()} does not implement the required hook "
                f"{hook_name}(){hint}"
            )

    @property
    def name(self) -> str:
        return self.ref.name

    def add_options(self, parser: Any) -> None:
        self.pm.hook.add_options(parser=parser)

    def _raised(self, call: str, error: Exception) -> PluginError:
        if isinstance(error, RecordmillError):  # a message for the user, from a recordmill helper
            return PluginError(f"plugin {self.name}: {error}")
        return PluginError(f"plugin {self.name}: {call} raised {type(error).__name__}: {error}")

    def task_number(self, options: Any) -> int:
        try:
            n = self.pm.hook.task_number(options=options)
        except Exception as e:
            raise self._raised("task_number()", e) from e
        if isinstance(n, bool) or not hasattr(n, "__index__") or int(n) < 0:
            raise PluginError(
                f"plugin {self.name}: task_number() must return an int >= 0, got {n!r}"
            )
        return int(n)

    def schema(self, options: Any) -> Any:
        return self.pm.hook.schema(options=options)

    def dict_data(self, task_id: int, options: Any) -> Any:
        return self.pm.hook.dict_data(task_id=task_id, options=options)

    def worker_imports(self) -> list[str] | None:
        """The modules the plugin's workers need (its ``worker_imports()``), or None."""
        try:
            names = self.pm.hook.worker_imports()
        except Exception as e:
            raise self._raised("worker_imports()", e) from e
        if names is None:
            return None
        if isinstance(names, str) or not all(isinstance(n, str) for n in names):
            raise PluginError(
                f"plugin {self.name}: worker_imports() must return a list of module names or "
                f"None, got {names!r}"
            )
        return list(names)

    def task_rows(self, task_id: int, options: Any) -> int | None:
        """The rows task ``task_id`` announces, or None (also when it has no ``task_rows``)."""
        try:
            n = self.pm.hook.task_rows(task_id=task_id, options=options)
        except Exception as e:
            raise self._raised(f"task_rows({task_id})", e) from e
        if n is None:
            return None
        if isinstance(n, bool) or not hasattr(n, "__index__") or int(n) < 0:
            raise PluginError(
                f"plugin {self.name}: task_rows({task_id}) must return a whole number >= 0 or "
                f"None, got {n!r}"
            )
        return int(n)


def load_plugin(plugin: str | os.PathLike[str] | PluginRef | ModuleType) -> DatasetPlugin:
    """A :class:`DatasetPlugin` from a ``--script`` value or path, a reference, or a module."""
    if isinstance(plugin, (str, os.PathLike)):
        plugin = resolve(os.fspath(plugin))
    elif isinstance(plugin, ModuleType):
        plugin = ref_for_module(plugin)
    return DatasetPlugin(plugin)
