"""The pipe of a DataLoader's results, widened (read/torch/pipes.py): as wide as the system lets a
user make it, only that one pipe of a loader, and left as it is where the system refuses."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch==2.13.0)")
from recordmill.read.torch import pipes

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pipe widths are Linux's")
F_GETPIPE_SZ = 1032


def width(queue) -> int:
    return fcntl.fcntl(queue._writer.fileno(), F_GETPIPE_SZ)


def widest() -> int:
    return min(pipes.WIDEST, int(Path("/proc/sys/fs/pipe-max-size").read_text()))


REFUSED = """
import fcntl, multiprocessing, os
from pathlib import Path
from recordmill.read.torch import pipes
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


def test_recordmills_loader_widens_its_result_pipe_only(tmp_path):
    pytest.importorskip("torch")
    from recordmill.torch import DataLoader

    import recordmill
    from tests.conftest import make_plugin

    plugin = make_plugin(tmp_path / "p", "def task_number():\n    return 1\n\n"
                         "def dict_data(task_id):\n    for i in range(8):\n"
                         "        yield {'id': i}\n")  # fmt: skip
    recordmill.write(plugin, tmp_path / "ds", partitions=1, progress=False)
    path = str(tmp_path / "ds")

    class Kept(DataLoader):  # keeps torch's iterator, to look at its queues
        def _get_iterator(self):
            self.kept = super()._get_iterator()
            return self.kept

    for context in (None, "spawn"):
        loader = Kept(path, batch_size=4, num_workers=2, multiprocessing_context=context)
        batches = iter(loader)
        assert next(batches)["id"].tolist() == [0, 1, 2, 3]
        assert width(loader.kept._worker_result_queue) == widest() > 65536
        assert {width(q) for q in loader.kept._index_queues} == {65536}  # indices: left alone
        assert [b["id"].tolist() for b in batches] == [[4, 5, 6, 7]]
    # Making a loader fixes no start method: a script may still choose one after it.
    script = (f"from recordmill.torch import DataLoader\nDataLoader({path!r}, num_workers=2)\n"
              "import multiprocessing\nmultiprocessing.set_start_method('spawn')\n")  # fmt: skip
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(root)})  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_a_pipe_is_widened_to_the_systems_bound_or_a_megabyte_where_it_says_none(monkeypatch):
    assert pipes._pipe_max() == int(Path("/proc/sys/fs/pipe-max-size").read_text())
    monkeypatch.setattr(pipes, "Path", lambda name: Path("/nonexistent") / name.lstrip("/"))
    assert pipes._pipe_max() == pipes.WIDEST == 1 << 20  # pipe-max-size's own default
