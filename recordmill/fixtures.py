"""recordmill's pytest plugin: the ``check_plugin`` fixture, registered with pytest through the
``pytest11`` entry point (as pytester is), so a plugin package's tests need no conftest. It
imports nothing of recordmill until a test asks for the fixture: installing recordmill costs
other projects' test runs nothing."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture
def check_plugin() -> Iterator[Callable[..., Any]]:
    """``check_plugin(plugin, **options)``: :func:`recordmill.testing.check_plugin`'s checks of a
    plugin (a name, folder, file or module), giving a :class:`~recordmill.testing.PluginCheck`
    (``rows``, ``rejects``, ``summary``). The folder plugins it loaded are taken out of
    ``sys.modules`` after the test, so that the next test loads them as they are then."""
    from recordmill.plugin.manager import FOLDER_PACKAGES
    from recordmill.testing import run_check

    before = set(sys.modules)
    yield run_check
    for name in [n for n in sys.modules if n not in before and n.startswith(FOLDER_PACKAGES)]:
        del sys.modules[name]
