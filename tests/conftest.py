"""Shared fixtures: plugin folders written from source text, and running writer.py for real."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parent.parent

# The tests start about two thousand Python processes (writers, their fork servers, scripts).
# Each would compile recordmill from source where bytecode is not written (the environment sets
# PYTHONDONTWRITEBYTECODE): here it is written, outside the source tree. And each process's
# OpenBLAS would start a thread per core, which only spins while tests share the cores.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
    os.environ.setdefault(
        "PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "recordmill-tests-pycache")
    )
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# The user's cache folder (where a machine records what it checked, read/machine/checked.py): one of the
# tests' own, not the home folder's.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="recordmill-tests-cache-")
os.environ.pop("RECORDMILL_CACHE_DIR", None)

# The test S3 server's credentials (it takes any), from the environment as usual, and from the
# start: a fork server that a test's write starts keeps the environment it started with, for
# every later test in that process.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
os.environ.update(CREDENTIALS)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one test process more than cores. A test spends part of its time waiting
    (for a process it started to come up, a timeout to pass, a killed run to be seen dead), time
    another test can use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1


@pytest.fixture(scope="session")
def s3():
    """An S3 server (moto) on 127.0.0.1 with a bucket ``data``; gives ``path -> s3://data/path?...``."""
    if shutil.which("moto_server") is None:
        pytest.skip("moto_server is not installed (pip install 'moto[server]<5.2')")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        ["moto_server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "moto_server did not start"
            time.sleep(0.1)
    query = f"endpoint_override=127.0.0.1:{port}&scheme=http&region=us-east-1"
    import pyarrow.fs as pafs

    pafs.S3FileSystem(
        endpoint_override=f"127.0.0.1:{port}",
        scheme="http",
        access_key="test",
        secret_key="test",
        region="us-east-1",
        allow_bucket_creation=True,
    ).create_dir("data")
    yield lambda path: f"s3://data/{path}?{query}"
    server.kill()
    server.wait()


def python_prints(code: str) -> str:
    """What ``code`` prints, run in a new interpreter (imports as a fresh process makes them);
    it must succeed."""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout


def refused(make, error: type[Exception] = ValueError) -> str:
    """The one line of the ``error`` that ``make()`` raises (the test fails if it raises none)."""
    with pytest.raises(error) as raised:
        make()
    return str(raised.value)


def make_plugin(folder: Path, source: str) -> Path:
    """A plugin folder (like a copy of templates/template) holding ``source`` as plugin.py."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plugin.py").write_text(textwrap.dedent(source))
    return folder


def run_writer(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120):
    """``python writer.py ARGS`` in a real process; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, str(REPO / "writer.py"), *map(str, args)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def recordmill_here(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``recordmill ARGV`` by ``main()`` in this process, as a finished process gives it (exit
    code, stdout, stderr): the same parsing, run and one-line errors, without starting an
    interpreter for each of many cases. What only a process shows (signals, a worker's own
    output, ``writer.py`` itself, a missing package) needs a real one (:func:`run_writer`)."""
    import contextlib
    import io

    from recordmill.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), here:
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:  # argparse's own exit
            code = e.code if isinstance(e.code, int) else 1
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def write_here(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``recordmill write ARGS`` in this process, as :func:`run_writer` gives it."""
    return recordmill_here("write", *args, cwd=cwd)


def each_refused(script: str, cases: list, out: Path) -> None:
    """``recordmill write --script SCRIPT ARGS`` for each (ARGS, message) of ``cases``, in this
    process: each refused with that message, in one line, no traceback, nothing written."""
    for k, (args, said) in enumerate(cases):
        result = write_here("--script", script, *args, "--output", out / f"o{k}", "--quiet")
        assert result.returncode != 0 and said in result.stderr, (said, result.stderr)
        assert "Traceback" not in result.stderr and not (out / f"o{k}").exists()


def read_dataset(path: Path) -> pa.Table:
    """Every partition of a written dataset, in order, with pyarrow."""
    files = sorted(path.glob("part-*"))
    if files and files[0].suffix == ".arrow":
        tables = [pa.ipc.open_file(pa.memory_map(str(f))).read_all() for f in files]
    else:
        tables = [pq.read_table(f) for f in files]
    return pa.concat_tables(tables)


def edit_manifest(path: Path, change) -> None:
    """Call ``change(manifest)`` on a written dataset's manifest and write it back in place."""
    from recordmill.dataset import layout, manifest

    found = manifest.read(path)
    change(found)
    name = layout.manifest_file(found["format"])
    (path / name).write_bytes(manifest.to_bytes(found, manifest.arrow_schema(found)))


# How long a test waits for a process it stopped (or that finishes held work) to end: a wait on
# a condition, never a guess of how long the work takes, so generous enough for a slow, busy
# 2-core machine running the suite in parallel (a run that does not end fails it).
ENDS_WITHIN = 180


def wait_for_staged_tasks(out: Path, count: int, process: subprocess.Popen, timeout: float = 60):
    """Wait until a running writer has finished ``count`` tasks (their records are staged)."""
    from recordmill.dataset import layout

    tasks = out.parent / layout.staging_folder(out.name) / layout.TASKS_DIR
    deadline = time.monotonic() + timeout
    while not (tasks.is_dir() and len(list(tasks.glob("*.json"))) >= count):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"no {count} finished tasks in {timeout} s"
        time.sleep(0.05)


COUNTING_PLUGIN = """
    def add_options(parser):
        parser.add_argument("--sizes", default="5,0,17,3", help="rows per task")

    def task_number(options):
        return len(options.sizes.split(","))

    def dict_data(task_id, options):
        n = int(options.sizes.split(",")[task_id])
        for i in range(n):
            yield {"task": task_id, "i": i, "name": f"t{task_id}-{i}"}
"""


@pytest.fixture
def counting_plugin(tmp_path: Path) -> Path:
    """A plugin whose rows say which task and position they came from; task sizes by option."""
    return make_plugin(tmp_path / "counting", COUNTING_PLUGIN)


ENTRY_POINT_PLUGIN = """
    import recordmill

    @recordmill.hookimpl
    def task_number():
        return 2

    @recordmill.hookimpl
    def dict_data(task_id):
        for i in range(3):
            yield {"source": "entrypoint", "task": task_id, "i": i}
"""


def install_package(root: Path, name: str, modules: dict[str, str], entry_points: str) -> Path:
    """Build and install (with pip, into ``root/site``) a real package ``name``: ``modules``
    maps file names in its package folder to their source; ``entry_points`` is the TOML of its
    ``[project.entry-points...]`` tables. Returns the folder to put on ``sys.path``."""
    package = root / "project" / name.replace("-", "_")
    package.mkdir(parents=True)
    for file, source in modules.items():
        (package / file).write_text(textwrap.dedent(source))
    (root / "project" / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{name}"
            version = "1.0"
            """
        )
        + textwrap.dedent(entry_points)
    )
    target = root / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    subprocess.run(
        [*pip, "--no-build-isolation", "--target", str(target), str(root / "project")], check=True
    )
    return target


@pytest.fixture(scope="session")
def installed_package(tmp_path_factory) -> Path:
    """A real third-party package, built and installed by pip, registering an entry point."""
    return install_package(
        tmp_path_factory.mktemp("thirdparty"),
        "rm-thirdparty",
        {"__init__.py": "", "plugin.py": ENTRY_POINT_PLUGIN},
        """
        [project.entry-points."recordmill.plugins"]
        thirdparty = "rm_thirdparty.plugin"
        """,
    )


def written(root: Path, source: str, out: str = "ds", **settings) -> Path:
    """A plugin's ``source`` (in ``root/plugin``) written quietly to ``root/out`` with
    ``settings``: the dataset's folder."""
    import recordmill

    recordmill.write(make_plugin(root / "plugin", source), root / out, progress=False, **settings)
    return root / out


def each_format(root: Path, source: str, **settings) -> dict[str, Path]:
    """A plugin's ``source`` written under ``root`` as Parquet and as Arrow IPC, with the same
    ``settings``: the two datasets' folders by format."""
    return {fmt: written(root, source, fmt, format=fmt, **settings) for fmt in ("parquet", "arrow")}


def write_both_ways(plugin: str, tmp_path: Path, options: dict, **settings):
    """Write ``plugin`` straight to partitions and through staged fragments (a skip policy
    could leave rows out, so it takes the staged path); check that each took its path and that
    both wrote the same files. Returns the direct run's summary."""
    import recordmill

    direct = recordmill.write(plugin, tmp_path / "direct", options=options, **settings)
    staged = recordmill.write(
        plugin, tmp_path / "staged", options=options, on_bad_input="skip", **settings
    )
    assert "rows straight to partitions" in direct.phases and "tasks" in staged.phases
    checksums = [[p["checksum"] for p in s.manifest["partitions"]] for s in (direct, staged)]
    assert checksums[0] == checksums[1]
    return direct


@pytest.fixture(scope="session")
def text_corpus(tmp_path_factory):
    """A corpus no one here wrote (the ``.py`` files of the standard library's json and email
    packages) and a byte-level BPE tokenizer trained on it here (no download): ``(files,
    tokenizer.json, Tokenizer)``."""
    import sysconfig

    tokenizers = pytest.importorskip("tokenizers")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted([*(stdlib / "json").glob("*.py"), *(stdlib / "email").glob("*.py")])
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE())
    byte_level = tokenizers.pre_tokenizers.ByteLevel
    tokenizer.pre_tokenizer = byte_level(add_prefix_space=False)
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=2000, special_tokens=["<|endoftext|>"], initial_alphabet=byte_level.alphabet()
    )
    tokenizer.train([str(f) for f in files], trainer)
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    tokenizer.save(str(path))
    return files, path, tokenizer
