"""Wide pipes for recordmill's DataLoader (read/pipes.py): its queues' pipes are as wide as the
system lets a user make them; a context the user gives is theirs."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recordmill.read import pipes

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pipe widths are Linux's")
F_GETPIPE_SZ = 1032


def width(queue) -> int:
    return fcntl.fcntl(queue._writer.fileno(), F_GETPIPE_SZ)


def test_a_queue_of_the_context_has_a_wide_pipe():
    widest = min(pipes.WIDEST, int(Path("/proc/sys/fs/pipe-max-size").read_text()))
    plain = multiprocessing.get_context().Queue()
    for method in (None, "fork", "spawn", "forkserver"):
        context = pipes.wide_pipes(method)
        expected = method or multiprocessing.get_start_method()
        assert context.get_start_method() == expected
        assert width(context.Queue()) == widest > width(plain) == 65536


REFUSED = """
import fcntl, multiprocessing, os
from pathlib import Path
from recordmill.read import pipes
queue = multiprocessing.get_context().Queue()  # what it needs made first, then a user's process
if os.geteuid() == 0:
    os.setgid(65534)
    os.setuid(65534)
pipes.WIDEST = 2 * int(Path("/proc/sys/fs/pipe-max-size").read_text())  # past the most allowed
pipes._pipe_max = lambda: pipes.WIDEST
print(pipes.widen(queue._writer.fileno()), fcntl.fcntl(queue._writer.fileno(), 1032))
"""


def test_a_refused_width_leaves_the_pipe_as_it_is():
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", REFUSED], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(root)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "65536"]


def test_recordmills_loader_takes_wide_pipes_and_keeps_a_context_given(tmp_path):
    pytest.importorskip("torch")
    from recordmill.torch import DataLoader

    import recordmill
    from tests.conftest import make_plugin

    plugin = make_plugin(tmp_path / "p", "def task_number():\n    return 1\n\n"
                         "def dict_data(task_id):\n    yield {'id': 1}\n")  # fmt: skip
    recordmill.write(plugin, tmp_path / "ds", partitions=1, progress=False)
    path = str(tmp_path / "ds")
    assert DataLoader(path).multiprocessing_context is None  # no workers: no queues
    default = DataLoader(path, num_workers=2).multiprocessing_context
    assert isinstance(default, pipes._Wide)
    assert default.get_start_method() == multiprocessing.get_start_method()
    spawn = DataLoader(path, num_workers=2, multiprocessing_context="spawn")
    assert type(spawn.multiprocessing_context) is pipes.WideSpawn
    given = multiprocessing.get_context("spawn")
    assert (
        DataLoader(path, num_workers=2, multiprocessing_context=given).multiprocessing_context
        is given
    )
    assert [b["id"].tolist() for b in DataLoader(path, num_workers=1)] == [[1]]
