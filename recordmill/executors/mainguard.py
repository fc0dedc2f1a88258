"""A script that calls :func:`recordmill.write` at its top level, without ``if __name__ ==
"__main__":``, found before any worker starts: worker processes import the script again (as
``multiprocessing`` does for every process it starts with a fork server or spawn), run its top
level, and so the write again, and die while starting, one after the other."""

from __future__ import annotations

import ast
import functools
import sys
from types import FrameType

from recordmill.errors import ConfigError


def check_main_guard(call: str = "recordmill.write()") -> None:
    """Raise :class:`ConfigError` when ``call`` is being made from the top level of the main
    script (directly, or through functions it calls there) outside an ``if __name__ ==
    "__main__":`` block."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec = getattr(main, "__spec__", None)
    if not path or (spec is not None and spec.name.rpartition(".")[2] == "__main__"):
        return  # python -c, a notebook, python -m pkg: nothing that workers run again
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is vars(main):
            break
        frame = frame.f_back
    if frame is None or frame.f_lineno in _guarded_lines(path):
        return
    raise ConfigError(
        f"{path} calls {call} at its top level (line {frame.f_lineno}), outside an "
        'if __name__ == "__main__": block; worker processes import the script again and would '
        "run it again: put the call (and whatever starts it) under "
        'if __name__ == "__main__":'
    )


@functools.lru_cache(maxsize=8)
def _guarded_lines(path: str) -> frozenset[int]:
    """The lines of ``path`` inside top-level ``if`` blocks that test ``__name__``."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return frozenset(range(1, 1 << 20))  # cannot tell: say nothing
    lines: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and any(
            isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(node.test)
        ):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return frozenset(lines)
