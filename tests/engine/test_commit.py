"""The commit survives a power cut, not only a killed process.

Two ways, both on a real write (``writer.py`` in a child process):

- the order, traced with strace: each partition file flushed by the worker that wrote it, the
  manifest flushed, the staging folder flushed (once it holds only the dataset) before the
  publishing rename, the parent folder after it, and with ``--overwrite`` the older dataset
  deleted only after all that; ``--no-fsync`` flushes none of the output's files;
- the outcome, without cutting any power: a recorder loaded into every process of the write
  (powercut/sitecustomize.py) logs the bytes each flush made durable and the tree at each step of
  the main process; for every step the test builds what a power cut there could leave (only
  flushed bytes; a folder's names as flushed, as they are, or any one change since its flush
  without the others, as a filesystem may commit them in any order, see :class:`Disk`) and reads the output
  in it: the older dataset, nothing (a new output), or the new one, whole, and the new one once
  the run has ended. A run with ``--no-fsync`` must fail that check: the test can tell.

A filesystem image on a loop device would need device-mapper (dm-flakey, dm-log-writes) to drop
unflushed writes: unmounting it writes everything back, and copying the image while mounted
depends on when the kernel wrote back. The recorder needs nothing but Linux's /proc.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from recordmill.dataset import manifest as manifest_file
from recordmill.read.verify import verify
from tests.conftest import REPO, make_plugin

# Task 2 yields a row that does not fit the schema: with --on-bad-input skip the run stages its
# rows in fragments and writes a rejects file, so every kind of file the commit handles is there.
PLUGIN = """
    def task_number():
        return 6

    def schema():
        return {"task": {"type": "int32"}, "value": {"type": "int64"}, "blob": {"type": "bytes"}}

    def dict_data(task_id):
        for i in range(40 + task_id):
            yield {"task": task_id, "value": i, "blob": bytes([i]) * (300 + task_id)}
        if task_id == 2:
            yield {"task": task_id, "value": "not a number", "blob": b""}
"""
# Every task announces its rows: partitions are written straight from the plugin (engine/direct.py),
# with no fragment and no partition record.
DIRECT = """
    def task_number():
        return 6

    def task_rows(task_id):
        return 40 + task_id

    def dict_data(task_id):
        for i in range(40 + task_id):
            yield {"task": task_id, "value": i, "blob": bytes([i]) * (300 + task_id)}
"""
TRACED = "fsync,fdatasync,rename,renameat,renameat2,unlink,unlinkat,rmdir"
POWERCUT = Path(__file__).resolve().parent / "powercut"


@pytest.fixture
def plugin(tmp_path):
    return make_plugin(tmp_path / "plugin", PLUGIN)


def write(plugin, out, *extra, prefix=(), env=None):
    args = ["--script", plugin, "--output", out, "--partitions", "3", "--workers", "2"]
    command = [*prefix, sys.executable, str(REPO / "writer.py"), *map(str, args)]
    command += ["--quiet", "--on-bad-input", "skip", *map(str, extra)]
    result = subprocess.run(
        command, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result


def partitions(out) -> list[str]:
    return [p["file"] for p in manifest_file.read(out)["partitions"]]


# --- the order of the calls, traced ---------------------------------------------------------


@dataclass
class Call:
    pid: int
    name: str
    paths: list[str]
    start: int  # the trace's line where the call began
    end: int  # and where it returned


LINE = re.compile(r"^(\d+)\s+(?:<\.\.\. (\w+) resumed>(.*)|(\w+)\((.*))$")


def _paths(name: str, args: str) -> list[str]:
    """The paths a call names, made absolute with strace -y's folder of each *at call's fd."""
    if name in ("fsync", "fdatasync"):
        return re.findall(r"<([^>]*)>", args)[:1]
    strings = re.findall(r'"((?:[^"\\]|\\.)*)"', args)
    if not name.endswith("at") and name != "renameat2":
        return strings
    parts = args.split(", ")
    found = []
    for fd, quoted in zip(parts[0::2], parts[1::2], strict=False):
        path = quoted.strip('"')
        folder = re.search(r"<([^>]*)>", fd)
        found.append(path if path.startswith("/") or folder is None else f"{folder[1]}/{path}")
    return found


def parse(text: str) -> list[Call]:
    """The calls that succeeded, with where each began and returned (strace -f interleaves the
    processes: a call cut by another's is split into ``<unfinished ...>`` and ``resumed``)."""
    calls, pending = [], {}
    for index, line in enumerate(text.splitlines()):
        match = LINE.match(line)
        if match is None:
            continue
        pid = int(match[1])
        if match[2]:  # resumed
            name, args, start = pending.pop(pid)
            args += match[3]
        else:
            name, args, start = match[4], match[5], index
            if args.endswith("<unfinished ...>"):
                pending[pid] = (name, args.removesuffix(" <unfinished ...>"), index)
                continue
        if re.search(r"\)\s+= 0$", args):
            calls.append(Call(pid, name, _paths(name, args), start, index))
    return calls


def traced_write(plugin, out: Path, *extra) -> list[Call]:
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed (apt-get install strace): the order is traced with it")
    tried = subprocess.run(["strace", "-f", "-o", os.devnull, "true"], capture_output=True)
    if tried.returncode != 0:  # a container that forbids ptrace
        pytest.skip(f"strace cannot trace here: {tried.stderr.decode().strip()}")
    trace = out.parent / "strace.txt"
    prefix = ["strace", "-f", "-qq", "-y", "-s", "4096", "-e", "signal=none"]
    write(plugin, out, *extra, prefix=[*prefix, "-e", f"trace={TRACED}", "-o", str(trace)])
    return parse(trace.read_text())


def flushes(calls: list[Call], path: Path) -> list[Call]:
    return [c for c in calls if c.name in ("fsync", "fdatasync") and c.paths == [str(path)]]


def under(calls: list[Call], folder: Path) -> list[Call]:
    return [c for c in calls if any(p.startswith(f"{folder}/") for p in c.paths)]


def check_published_durably(calls: list[Call], out: Path) -> tuple[Call, Call]:
    """Every flush the publishing rename needs came before it, the parent's after it; gives
    the rename and that flush."""
    staging = out.parent / f".{out.name}.recordmill-partial"
    renames = [c for c in calls if c.name.startswith("rename")]
    (publish,) = [c for c in renames if c.paths == [str(staging), str(out)]]
    main = publish.pid
    for name in partitions(out):
        done = [c for c in flushes(calls, staging / name) if c.end < publish.start]
        assert done, f"{name} was not flushed before the publishing rename"
        assert all(c.pid != main for c in done), f"{name} was flushed by the main process"
    manifest = staging / "_manifest.parquet"
    (named,) = [c for c in renames if c.paths == [f"{manifest}.partial", str(manifest)]]
    (written,) = [c for c in flushes(calls, Path(f"{manifest}.partial")) if c.end < named.start]
    assert named.end < publish.start
    # The staging folder's names (the partitions', the rejects') on the disk before the manifest
    # that lists them is written: flushed after the last partition's flush, before the manifest's.
    files = [c.end for name in partitions(out) for c in flushes(calls, staging / name)]
    files += [  # the rejects file's rename into place
        c.end
        for c in under(calls, staging)
        if c.name.startswith("rename") and "/_rejects." in c.paths[-1] and c.end < written.start
    ]
    assert any(max(files) < c.start and c.end < written.start for c in flushes(calls, staging)), (
        "the staging folder was not flushed between its last file (partition or rejects) and "
        "the manifest"
    )
    # And the manifest's own name, before the bookkeeping a --resume reads is cleaned away.
    cleaning = min(
        c.start
        for c in under(calls, staging)
        if c.name in ("unlink", "unlinkat", "rmdir") and c.start > named.end
    )
    assert any(named.end < c.start and c.end < cleaning for c in flushes(calls, staging)), (
        "the staging folder was not flushed between the manifest's rename and its cleaning"
    )
    cleaned = max(c.end for c in under(calls, staging) if c.end < publish.start)
    assert any(cleaned < c.start and c.end < publish.start for c in flushes(calls, staging)), (
        "the staging folder was not flushed between its cleaning and the publishing rename"
    )
    after = [c for c in flushes(calls, out.parent) if c.start > publish.end]
    assert after, "the parent folder was not flushed after the publishing rename"
    return publish, after[0]


@pytest.mark.parametrize("path", ["staged", "direct"])
def test_a_new_output_is_flushed_before_it_is_published(plugin, tmp_path, path):
    out = tmp_path / "out"
    if path == "direct":
        plugin = make_plugin(tmp_path / "direct", DIRECT)
    calls = traced_write(plugin, out)
    assert verify(out) == []
    publish, _ = check_published_durably(calls, out)
    # The lock file is flushed, as every file made beside the output, and then its name.
    (lock,) = flushes(calls, tmp_path / f".{out.name}.recordmill-lock")
    named = [c for c in flushes(calls, tmp_path) if lock.end < c.start and c.end < publish.start]
    assert named, "the folder of the output was not flushed after the lock file was made"


def test_an_overwrite_deletes_the_older_dataset_once_the_new_one_is_durable(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out)
    calls = traced_write(plugin, out, "--overwrite")
    assert verify(out) == []
    publish, parent = check_published_durably(calls, out)
    # The exchange puts the older dataset where the staging folder was; the fallback aside.
    old = [
        c
        for folder in (f".{out.name}.recordmill-partial", f".{out.name}.recordmill-old")
        for c in under(calls, tmp_path / folder)
        if c.start > publish.end and c.name in ("unlink", "unlinkat", "rmdir")
    ]
    assert old, "the older dataset was not deleted"
    assert all(c.start > parent.end for c in old)
    assert any(c.end < publish.start for c in flushes(calls, out)), "its mark was not flushed"
    assert not (out / ".recordmill-replaced").exists()


def test_what_a_resume_trusts_is_flushed_before_it_is_trusted(plugin, tmp_path):
    """run.json and each partition record are flushed before their renames; each fragment,
    and its name, before the record that marks its tasks done (a task record itself is not:
    one that a power cut damaged is passed over, see test_records.py); a partition and its
    record, by name, before the main process deletes a fragment it was made from."""
    out = tmp_path / "out"
    calls = traced_write(plugin, out)
    staging = tmp_path / f".{out.name}.recordmill-partial"
    renames = [c for c in calls if c.name == "rename" and under([c], staging)]
    records = [c for c in renames if c.paths[1].endswith(".json")]
    assert len(records) == 1 + 6 + 3  # run.json, the tasks', the partitions'
    for record in records:
        partial = Path(record.paths[0])
        flushed = any(c.end < record.start for c in flushes(calls, partial))
        assert flushed == ("/_tasks/" not in str(partial)), partial
        if "/_tasks/" in str(partial):
            fragment = partial.parent / partial.name.replace(".json.partial", ".arrow")
            for path in (fragment, staging / "_tasks"):
                done = [c for c in flushes(calls, path) if c.end < record.start]
                assert [c for c in done if c.pid == record.pid], f"{path}, before {partial.name}"
    dropped = [
        c
        for c in under(calls, staging / "_tasks")
        if c.name in ("unlink", "unlinkat") and c.paths[0].endswith(".arrow")
    ]
    assert dropped, "no fragment was deleted once the partitions that read it were written"
    for gone in dropped:
        for path in (staging, staging / "_parts"):
            assert any(c.end < gone.start for c in flushes(calls, path)), (path, gone)


def test_no_fsync_flushes_none_of_the_output_files(plugin, tmp_path):
    out = tmp_path / "out"
    write(plugin, out)
    calls = traced_write(plugin, out, "--overwrite", "--no-fsync")
    assert verify(out) == []
    ours = [c for c in calls if c.name in ("fsync", "fdatasync") and under([c], tmp_path)]
    ours += [c for c in calls if c.name in ("fsync", "fdatasync") and c.paths == [str(tmp_path)]]
    assert ours == []


# --- a power cut at each step, recorded -----------------------------------------------------


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "powercut_recorder", POWERCUT / "sitecustomize.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # records nothing here: RECORDMILL_POWERCUT_LOG is not set
    return module


class Disk:
    """What the device holds, replayed from the recorder's log: each file's bytes as last
    flushed (a new file never flushed: empty, as ext4 and XFS can leave one whose name was
    committed before its data), each folder's entries as last flushed; what was there before
    the run is on the device already. Inodes are the keys: a name that a rename moves keeps
    its bytes (an inode number that a deletion frees and a new file takes keeps the bytes of
    the file deleted until the new one is flushed: a check only the stricter for it)."""

    def __init__(self, root: Path):
        self.data: dict[int, bytes] = {}
        self.dirs: dict[int, dict[str, list]] = {}
        self.root = root.stat().st_ino
        for top, dirs, files in os.walk(root):
            entries = {n: [os.lstat(os.path.join(top, n)).st_ino, "d"] for n in dirs}
            for name in files:
                path = Path(top, name)
                entries[name] = [path.lstat().st_ino, "f"]
                self.data[path.lstat().st_ino] = path.read_bytes()
            self.dirs[os.stat(top).st_ino] = entries

    def replay(self, event: dict) -> None:
        if event["op"] == "file":
            self.data[event["ino"]] = Path(event["blob"]).read_bytes()
        elif event["op"] == "dir":
            self.dirs[event["ino"]] = event["entries"]

    def image(self, tree: dict[str, list], flushed) -> dict[str, bytes | None]:
        """The tree after a power cut, from the root down: the entries of each folder for which
        ``flushed(inode)`` as last flushed, of the others as they are in ``tree`` (the journal
        may have committed them); the bytes of files only as flushed. ``flushed`` may instead
        return the entries themselves (see :meth:`images`)."""
        now = self._now(tree)
        image, todo = {}, [("", self.root)]
        while todo:
            prefix, ino = todo.pop()
            chosen = flushed(ino)
            if isinstance(chosen, dict):
                entries = chosen
            else:
                entries = self.dirs.get(ino, {}) if chosen else now.get(ino, {})
            for name, (child, kind) in entries.items():
                if kind == "d":
                    image[prefix + name] = None
                    todo.append((f"{prefix}{name}/", child))
                else:
                    image[prefix + name] = self.data.get(child, b"")
        return image

    def _now(self, tree: dict[str, list]) -> dict[int, dict[str, list]]:
        now: dict[int, dict[str, list]] = {}
        for rel, entry in tree.items():
            parent = os.path.dirname(rel)
            folder = tree[parent][0] if parent else self.root
            now.setdefault(folder, {})[os.path.basename(rel)] = entry
        return now

    def images(self, tree: dict[str, list]) -> list[dict[str, bytes | None]]:
        """Every folder as flushed; every one as it is; the output's parent one way and the
        folders below it the other; and, as a filesystem may commit a folder's entries in any
        order, each folder with one of its changes since its last flush and not the others, and
        with all of them but one (the other folders as flushed, then as they are)."""
        root = self.root
        ways = [lambda _: True, lambda _: False, lambda i: i == root, lambda i: i != root]
        now = self._now(tree)
        for ino, current in now.items():
            before = self.dirs.get(ino, {})
            changes = [n for n in set(before) | set(current) if before.get(n) != current.get(n)]
            for name in sorted(changes):
                one, all_but = dict(before), dict(current)
                _set(one, name, current.get(name))
                _set(all_but, name, before.get(name))
                for state in (one, all_but):
                    for rest in (True, False):
                        ways.append(
                            lambda i, ino=ino, state=state, rest=rest: state if i == ino else rest
                        )
        return [self.image(tree, way) for way in ways]


def _set(entries: dict[str, list], name: str, entry: list | None) -> None:
    if entry is None:
        entries.pop(name, None)
    else:
        entries[name] = entry


class Reader:
    """Reads the output in an image of the disk: "none" (no dataset), the checksums of a
    dataset that verifies, or "damaged: ..."; each distinct image once."""

    def __init__(self, scratch: Path, name: str):
        self.scratch, self.name, self.seen = scratch, name, {}

    def __call__(self, image: dict[str, bytes | None]) -> str | tuple[str, ...]:
        prefix = self.name + "/"
        files = {k[len(prefix) :]: v for k, v in image.items() if k.startswith(prefix)}
        if "_manifest.parquet" not in files:
            return "none"  # a folder without a manifest is no dataset
        key = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()
        if key not in self.seen:
            self.seen[key] = self._read(files)
        return self.seen[key]

    def _read(self, files: dict[str, bytes | None]) -> str | tuple[str, ...]:
        folder = self.scratch / f"image-{len(self.seen)}"
        folder.mkdir(parents=True)
        for rel, data in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            if data is None:
                (folder / rel).mkdir(exist_ok=True)
            else:
                (folder / rel).write_bytes(data)
        problems = verify(folder)
        if problems:
            return "damaged: " + "; ".join(problems)
        return tuple(p["checksum"] for p in manifest_file.read(folder)["partitions"])


def power_cuts(plugin, tmp_path: Path, out: Path, *extra) -> tuple[list, object]:
    """Write with the recorder; what a reader finds after a power cut at each step of the main
    process (both ways of :class:`Disk`), and after one once the run has ended."""
    log = tmp_path / "powercut-log"
    log.mkdir()
    disk = Disk(out.parent)
    path = os.pathsep.join(filter(None, [str(POWERCUT), str(REPO), os.environ.get("PYTHONPATH")]))
    env = {
        "PYTHONPATH": path,
        "RECORDMILL_POWERCUT_LOG": str(log),
        "RECORDMILL_POWERCUT_ROOT": str(out.parent),
    }
    write(plugin, out, *extra, env=env)
    events = [json.loads(line) for line in (log / "log.jsonl").read_text().splitlines()]
    events.append({"op": "point", "what": "the end", "tree": _recorder().tree(str(out.parent))})
    read = Reader(tmp_path / "images", out.name)
    found = []
    for event in events:
        disk.replay(event)
        if event["op"] == "point":
            found += [(event["what"], read(image)) for image in disk.images(event["tree"])]
    return found, read(disk.image(events[-1]["tree"], lambda _: True))


def test_a_power_cut_at_any_step_leaves_nothing_or_the_new_dataset(plugin, tmp_path):
    out = tmp_path / "disk" / "out"
    out.parent.mkdir()
    found, at_the_end = power_cuts(plugin, tmp_path, out)
    new = tuple(p["checksum"] for p in manifest_file.read(out)["partitions"])
    assert at_the_end == new
    assert {state for _, state in found} <= {"none", new}, found
    assert len(found) > 20  # the recorder saw the commit's steps


def test_a_power_cut_during_an_overwrite_leaves_the_older_or_the_new_dataset(plugin, tmp_path):
    out = tmp_path / "disk" / "out"
    write(plugin, out, "--partitions", "2")
    old = tuple(p["checksum"] for p in manifest_file.read(out)["partitions"])
    found, at_the_end = power_cuts(plugin, tmp_path, out, "--overwrite")
    new = tuple(p["checksum"] for p in manifest_file.read(out)["partitions"])
    assert at_the_end == new != old
    assert {state for _, state in found} <= {old, new}, found


def test_the_power_cut_check_catches_a_write_without_flushes(plugin, tmp_path):
    """--no-fsync: a power cut right after the publishing rename can leave a damaged output
    or, later, none at all; the check above must see it."""
    out = tmp_path / "disk" / "out"
    write(plugin, out, "--partitions", "2")
    found, at_the_end = power_cuts(plugin, tmp_path, out, "--overwrite", "--no-fsync")
    damaged = [what for what, state in found if str(state).startswith("damaged")]
    assert damaged and at_the_end != tuple(
        p["checksum"] for p in manifest_file.read(out)["partitions"]
    )


def test_the_model_commits_a_folders_entries_in_any_order(tmp_path):
    """Of a folder changed since its last flush, a power cut may leave any one change without
    the others, or all but one: not only all or none of them."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "a").write_bytes(b"a")
    disk = Disk(root)  # flushed: {a}
    for name in ("b", "c"):
        (root / name).write_bytes(name.encode())
    (root / "a").unlink()
    tree = {n: [(root / n).stat().st_ino, "f"] for n in ("b", "c")}
    seen = {tuple(sorted(image)) for image in disk.images(tree)}
    assert {("a",), ("b", "c")} <= seen  # all or nothing, as before
    assert {("a", "b"), ("a", "c"), ("b",), ("c",), ("a", "b", "c")} <= seen  # and reordered
