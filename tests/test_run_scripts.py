"""Every run script works as it is, on the demo data it makes on first use."""

from __future__ import annotations

import os
import subprocess

import pytest

import recordmill
import recordmill.formats.demo
from tests.conftest import REPO

SCRIPTS = {
    "template": 400,
    "imagenet": 24,
    "filelist": 18,
    "mnist": 300,
    "csv": 200,
    "tfrecord": 100,
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo") / "data"
    recordmill.formats.demo.make_demo_data(folder)
    return folder


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_run_script(name, demo, tmp_path):
    out = tmp_path / name
    result = subprocess.run(
        ["bash", str(REPO / "run_scripts" / f"run_{name}.sh"), "--quiet"],
        env={**os.environ, "DEMO": str(demo), "OUTPUT": str(out)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert recordmill.read_manifest(out)["total_rows"] == SCRIPTS[name]
