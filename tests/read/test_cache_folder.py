"""A cache folder shared with other users: another user can neither plant rows, nor read a
private dataset's, nor make a read write or delete a file. The other user is real: a process
run as ``nobody`` (``setpriv``), so that ownership and permissions are what the kernel says."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pytest

import recordmill
from recordmill.dataset.checksum import crc32c
from recordmill.read.machine import cache_folder
from tests.conftest import make_plugin, refused
from tests.read.test_cache import PLUGIN, ROWS

NOBODY = 65534
PYTHON = (sys.executable, "-c")


def as_nobody(code: str) -> None:
    """Run ``code`` as the user nobody."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("acting as another user needs root and setpriv (util-linux)")
    subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *PYTHON, code],
        check=True,
        timeout=60,
        cwd="/",
    )


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("shared")
    plugin = make_plugin(root / "p", PLUGIN)
    recordmill.write(plugin, root / "pq", partitions=2, progress=False, workers=0)
    return root / "pq"


@pytest.fixture
def shared():
    """A folder every user may write, with the sticky bit, as /tmp is."""
    folder = tempfile.mkdtemp(prefix="recordmill-shared-", dir="/tmp")
    os.chmod(folder, 0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def ids(ds):
    return ds.to_arrow().column("id").to_pylist()


def test_a_part_planted_by_another_user_is_never_served(dataset, shared):
    # Mallory makes this user's folder first and plants a part in it, named as the reader
    # would look for it (the folder name is computable from the public manifest).
    probe = recordmill.open(dataset, cache_dir=tempfile.mkdtemp()).cache
    version, part = probe.root.name, probe.parts[0].name
    as_nobody(
        "import os\n"
        f"d = os.path.join({shared!r}, 'user-{os.geteuid()}', {version!r}, 'parts')\n"
        "os.makedirs(d, mode=0o777)\n"
        f"open(os.path.join(d, '{part}.00000000.arrow'), 'wb').write(b'POISONED-BY-MALLORY')\n"
    )
    with pytest.warns(recordmill.RecordmillWarning, match="belongs to another user"):
        ds = recordmill.open(dataset, cache_dir=shared)
    assert ds.cache is None and ids(ds) == list(range(ROWS))  # the dataset's own rows


def test_a_cache_folder_planted_as_a_link_is_not_followed(dataset, shared, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.arrow").write_bytes(b"the user's own file")
    os.symlink(victim, os.path.join(shared, f"user-{os.geteuid()}"))  # as another user would
    with pytest.warns(
        recordmill.RecordmillWarning, match=r"is not a folder \(a symbolic link\?\)"
    ) as said:
        ds = recordmill.open(dataset, cache_dir=shared)
    assert str(said[-1].message).endswith(f"; reading from {ds._groups.files.store}")
    assert ids(ds) == list(range(ROWS))
    assert sorted(p.name for p in victim.iterdir()) == [
        "keep.arrow"
    ]  # nothing written, nothing evicted


def test_a_link_at_a_temporary_name_is_never_written_through(dataset, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file")
    ds = recordmill.open(dataset, cache_dir=tmp_path / "c")
    part = ds.cache.parts[0]
    partial = ds.cache.root / "parts" / f".{part.name}.{os.getpid()}.partial"
    partial.symlink_to(victim)
    with pytest.warns(recordmill.RecordmillWarning, match="cannot fill the cache"):
        assert ds[0]["id"] == 0
    assert victim.read_text() == "the user's own file"


def test_cached_parts_are_this_users_only(dataset, shared):
    ds = recordmill.open(dataset, cache_dir=shared)
    assert ids(ds) == list(range(ROWS))
    mine = os.path.join(shared, f"user-{os.geteuid()}")
    for top, _, files in os.walk(mine):
        assert stat.S_IMODE(os.stat(top).st_mode) == 0o700, top
        for name in files:
            assert stat.S_IMODE(os.stat(os.path.join(top, name)).st_mode) == 0o600, name
    assert any(name.endswith(".arrow") for _, _, files in os.walk(mine) for name in files)
    with pytest.raises(subprocess.CalledProcessError):  # nobody reads a row of it
        as_nobody(f"import os; os.listdir({mine!r})")


def test_a_cache_dir_others_may_write_or_own_is_not_used(dataset, shared):
    """Another user could rename this user's folder away in it: the cache is not used."""
    os.chmod(shared, 0o777)  # this user's, but everyone may write it, without the sticky bit
    with pytest.warns(recordmill.RecordmillWarning, match="without the sticky bit"):
        ds = recordmill.open(dataset, cache_dir=shared)
    assert ds.cache is None and ids(ds) == list(range(ROWS))
    os.chmod(shared, 0o1777)
    os.chown(shared, NOBODY, NOBODY)  # sticky, but another user's: its owner renames at will
    with pytest.warns(recordmill.RecordmillWarning, match="belongs to another user"):
        ds = recordmill.open(dataset, cache_dir=shared)
    assert ds.cache is None and ids(ds) == list(range(ROWS))


@pytest.mark.parametrize("mode", [0o750, 0o755, 0o705, 0o770, 0o701, 0o710])
def test_a_user_folder_others_may_read_or_enter_is_not_used(dataset, shared, mode):
    """The near neighbours of a world-writable folder: one the group or others may only read
    or enter (0750, 0755, ...) holds this user's parts and orders all the same; refused alike."""
    os.chmod(shared, 0o1777)
    mine = Path(shared) / f"user-{os.geteuid()}"
    mine.mkdir(mode=0o700)
    os.chmod(mine, mode)
    with pytest.warns(recordmill.RecordmillWarning, match=r"may be read or written by other users"):
        ds = recordmill.open(dataset, cache_dir=shared)
    assert ds.cache is None and ids(ds) == list(range(ROWS))


def poisoned(cache, part) -> tuple[str, bytes]:
    """An Arrow IPC file of ``part``'s rows as the cache keeps them, but every id 666, named as
    the cache names a part (its CRC-32C right): only where it lies and whose it is tell it."""
    rows = len(part.rows)
    ids = pa.array([666] * rows, pa.int64())
    img = pa.array([b"\0" * 768] * rows, cache.files.schema.field("img").type)
    table = pa.Table.from_arrays([ids, img], schema=cache.files.schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, cache.files.schema) as writer:
        writer.write_table(table)
    data = sink.getvalue().to_pybytes()
    return f"{part.name}.{crc32c(data):08x}.arrow", data


def test_a_cache_dir_link_flipped_after_its_checks_changes_nothing_read(dataset, shared):
    """Mallory's link at the shared name points first at a root-owned sticky folder (the checks
    pass), then, once the reader has read from it, at a tree of her own where every part lies
    poisoned: the reader goes on in the folder it checked, and a new process refuses hers."""
    first = tempfile.mkdtemp(prefix="recordmill-first-", dir="/tmp")
    os.chmod(first, 0o1777)
    link, evil = os.path.join(shared, "cache"), os.path.join(shared, "evil")
    as_nobody(f"import os; os.symlink({first!r}, {link!r})")
    ds = recordmill.open(dataset, cache_dir=link)
    assert ds[0]["id"] == 0  # checked, and a part cached
    staged = tempfile.mkdtemp()
    folder = os.path.join(evil, f"user-{os.geteuid()}", ds.cache.root.name, "parts")
    for part in ds.cache.parts:
        name, data = poisoned(ds.cache, part)
        (Path(staged) / name).write_bytes(data)
    os.chmod(staged, 0o755)
    as_nobody(
        "import os, shutil\n"
        f"os.makedirs({folder!r}, mode=0o777)\n"
        f"for n in os.listdir({staged!r}): shutil.copy(os.path.join({staged!r}, n), {folder!r})\n"
        f"os.unlink({link!r}); os.symlink({evil!r}, {link!r})\n"
    )
    assert ids(ds) == list(range(ROWS))  # the dataset's rows, also the ones read before
    fresh = subprocess.run(
        [
            *PYTHON,
            f"import recordmill; ds = recordmill.open({str(dataset)!r}, cache_dir="
            f"{link!r}); print(sorted(ds.to_arrow().column('id').to_pylist()) == list(range("
            f"{ROWS})), ds.cache is None)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert fresh.stdout.split() == ["True", "True"], fresh.stderr
    assert "belongs to another user" in fresh.stderr  # one warning: her folder is not used
    shutil.rmtree(first, ignore_errors=True)


def test_a_cached_part_of_another_user_is_not_served(dataset, tmp_path):
    """A part in this user's folder that is not this user's file (its CRC-32C right all the
    same) is fetched again, never served."""
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    warm = recordmill.open(dataset, cache_dir=tmp_path / "c")
    assert ids(warm) == list(range(ROWS))
    part = warm.cache.parts[0]
    parts = warm.cache.root / "parts"
    (legit,) = parts.glob(f"{part.name}.*.arrow")
    name, data = poisoned(warm.cache, part)
    legit.unlink()
    (parts / name).write_bytes(data)
    os.chown(parts / name, NOBODY, NOBODY)
    line = refused(
        lambda: warm.cache.folder.parts.open(name, os.O_RDONLY), cache_folder.UnsafeCache
    )
    assert line == f"{parts / name} is not a file of this user's: not used"
    again = recordmill.open(dataset, cache_dir=tmp_path / "c")
    assert ids(again) == list(range(ROWS)) and again.cache.fetched_parts == 1


def test_a_lock_held_past_its_bound_is_read_around(dataset, tmp_path, monkeypatch):
    """A lock of the cache that its holder keeps (or another user could keep, through a link
    flipped at cache_dir) is waited for LOCK_WAIT at most: then the part is read without the
    cache, with one warning, never waited for without end."""
    monkeypatch.setattr(cache_folder, "LOCK_WAIT", 0.5)
    ds = recordmill.open(dataset, cache_dir=tmp_path / "c")
    lock = ds.cache.root / "locks" / f"{ds.cache.parts[0].name}.lock"
    holder = subprocess.Popen(
        [
            *PYTHON,
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
            lock,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        start = time.monotonic()
        with pytest.warns(recordmill.RecordmillWarning, match="was held for more than") as said:
            assert ds[0]["id"] == 0
        assert f"{lock} was held for more than 0.5 s" in str(said[0].message)
        assert time.monotonic() - start < 10
        assert ds.cache.fetched_parts == 1  # read from the dataset, the cache aside
    finally:
        holder.kill()


@pytest.mark.parametrize("what", ["file", "dangling link", "link to a folder not writable"])
def test_what_is_no_usable_folder_at_cache_dir_is_not_used(dataset, tmp_path, what):
    """A file, or a link to nothing this user can use, at the cache_dir name (as another user
    could put there first) is a cache not used, as a hostile folder is: one warning, and the
    rows are read from the dataset."""
    at = tmp_path / "cache"
    if what == "file":
        at.write_text("not a folder")
    elif what == "dangling link":
        at.symlink_to(tmp_path / "nowhere")
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        os.chown(locked, NOBODY, NOBODY) if os.geteuid() == 0 else None
        at.symlink_to(locked)
    # (root may write a folder of mode 0555: it is the other user's, then)
    unusable = "belongs to another user" if what.startswith("link to") else "is not a folder this"
    with pytest.warns(recordmill.RecordmillWarning, match=unusable) as said:
        ds = recordmill.open(dataset, cache_dir=at)
    assert "it is not used as this user's disk cache" in str(said[0].message) or what.startswith(
        "link to"
    )
    assert ds.cache is None and ids(ds) == list(range(ROWS))


def test_a_cached_part_with_offsets_past_its_buffers_is_fetched_again(tmp_path):
    """A cached part is checked as a dataset's Arrow file is (its CRC-32C proves only that it is
    the file its name says): offsets pointing past its values are a part fetched again, never a
    read of memory past the file."""
    from tests.conftest import COUNTING_PLUGIN

    plugin = make_plugin(tmp_path / "p", COUNTING_PLUGIN)
    recordmill.write(plugin, tmp_path / "pq", partitions=1, progress=False, workers=0)
    warm = recordmill.open(tmp_path / "pq", cache_dir=tmp_path / "c")
    truth = warm.to_arrow()
    parts = warm.cache.root / "parts"
    (legit,) = parts.glob("*.arrow")
    table = pa.ipc.open_file(legit).read_all()
    column = table.column("name").combine_chunks()
    offsets = [0] + [100_000] * (len(column) - 1) + [len(column.buffers()[2])]
    bad = pa.Array.from_buffers(
        pa.string(),
        len(column),
        [None, pa.py_buffer(pa.array(offsets, pa.int32()).buffers()[1]), column.buffers()[2]],
    )
    forged = table.set_column(table.schema.get_field_index("name"), "name", bad)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(pa.Table.from_arrays(forged.columns, schema=table.schema))
    data = sink.getvalue().to_pybytes()
    legit.unlink()
    (parts / f"{legit.name.split('.')[0]}.{crc32c(data):08x}.arrow").write_bytes(data)
    reading = subprocess.run(
        [
            *PYTHON,
            f"import recordmill; ds = recordmill.open({str(tmp_path / 'pq')!r}, cache_dir="
            f"{str(tmp_path / 'c')!r}); t = ds.to_arrow(); print(t.column('name').to_pylist(), "
            "ds.cache.fetched_parts)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert reading.returncode == 0, reading  # not -11
    assert reading.stdout.split("] ")[1].strip() == "1"  # fetched again
    assert reading.stdout.split("] ")[0] + "]" == str(truth.column("name").to_pylist())


# The module's own contract, function by function: where the folder is, each refusal as its
# whole line, links never followed, the lock's cadence, and a folder opened once a process.

UNUSED = "it is not used as this user's disk cache"


def test_the_default_cache_dir_is_the_setting_then_xdg_then_the_platforms(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("RECORDMILL_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert cache_folder.default_cache_dir() == home / ".cache" / "recordmill"
    monkeypatch.setattr(sys, "platform", "darwin")
    assert cache_folder.default_cache_dir() == home / "Library" / "Caches" / "recordmill"
    monkeypatch.setenv("XDG_CACHE_HOME", "~/xdg")
    assert cache_folder.default_cache_dir() == home / "xdg" / "recordmill"
    monkeypatch.setenv("RECORDMILL_CACHE_DIR", "")  # set but empty: as if not set
    assert cache_folder.default_cache_dir() == home / "xdg" / "recordmill"
    monkeypatch.setenv("RECORDMILL_CACHE_DIR", "~/mine")
    assert cache_folder.default_cache_dir() == home / "mine"  # the folder itself, as given
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RECORDMILL_CACHE_DIR", "here")
    assert cache_folder.default_cache_dir() == tmp_path / "here"  # made absolute


def test_what_is_at_a_folders_name_but_a_folder_is_refused_in_one_line(tmp_path):
    top = cache_folder.user_folder(tmp_path / "c")
    (top.path / "file").write_text("x")
    os.chmod(top.path / "file", 0o600)  # this user's, private: a file all the same
    (top.path / "link").symlink_to(top.path)  # a link to this very (checked) folder
    for name in ("file", "link"):
        line = refused(lambda name=name: top.sub(name), cache_folder.UnsafeCache)
        assert line == f"{top.path / name} is not a folder (a symbolic link?): {UNUSED}"
    for what in ("file", "link"):
        at = tmp_path / what
        if what == "file":
            at.write_text("x")
        else:
            at.symlink_to(tmp_path / "nowhere")
        line = refused(lambda at=at: cache_folder.user_folder(at), cache_folder.UnsafeCache)
        assert line == f"{at} is not a folder this user can use (File exists): {UNUSED}"


def test_a_cache_dir_is_made_with_its_parents_and_opened_once_a_process(tmp_path):
    deep = tmp_path / "a" / "b" / "c"
    mine = cache_folder.user_folder(deep)
    assert mine.path == deep / f"user-{os.geteuid()}" and mine.path.is_dir()
    assert stat.S_IMODE(os.stat(mine.path).st_mode) == 0o700
    assert cache_folder.user_folder(deep) is mine  # opened once, not checked at every use
    folder = cache_folder.Folder(deep, "v1")
    shutil.rmtree(deep)  # removed while open (a user clearing the cache): made again
    again = cache_folder.Folder(deep, "v1")
    assert cache_folder.user_folder(deep) is not mine
    assert again.has(".") and (deep / f"user-{os.geteuid()}" / "v1" / "parts").is_dir()
    assert folder.root == again.root
    fd = again.parts.fd
    again.parts.close()
    again.parts.close()  # once closed, closing again does nothing (nor does its collection)
    assert again.parts.fd == -1
    with pytest.raises(OSError):
        os.fstat(fd)


def test_a_link_at_a_files_name_is_neither_read_nor_followed(tmp_path):
    folder = cache_folder.Folder(tmp_path / "c", "v1")
    parts = folder.root / "parts"
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"the user's own file")
    os.chmod(secret, 0o600)
    (parts / "footer").symlink_to(secret)
    assert folder.kept("footer", 100) is None
    with pytest.raises(OSError) as raised:
        folder.parts.open("footer", os.O_RDONLY)
    assert raised.value.errno == errno.ELOOP
    assert stat.S_ISLNK(folder.parts.stat("footer").st_mode)  # the entry, not what it names
    (parts / "dangling").symlink_to(tmp_path / "nowhere")
    assert folder.has("dangling") and not folder.has("absent")
    folder.keep("small", b"abc")
    assert folder.kept("small", 3) == b"abc" and folder.kept("small", 2) is None
    assert stat.S_IMODE(os.stat(parts / "small").st_mode) == 0o600


class Clock:
    """time for cache_folder, where sleeping moves the clock on and each pause is recorded."""

    def __init__(self):
        self.now, self.pauses = 1000.0, []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.pauses.append(seconds)
        self.now += seconds


def test_a_held_lock_is_tried_again_at_a_doubling_pause_until_lock_wait(tmp_path, monkeypatch):
    folder = cache_folder.Folder(tmp_path / "c", "v1")
    held = folder.locks.open("p.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)  # another open file: as another process holds it
    clock = Clock()
    monkeypatch.setattr(cache_folder, "time", clock)
    monkeypatch.setattr(cache_folder, "LOCK_WAIT", 2.0)
    with pytest.raises(cache_folder.LockWait) as raised, folder.locked("p"):
        pass
    assert raised.value.strerror == f"{folder.root}/locks/p.lock was held for more than 2 s"
    assert raised.value.errno == errno.EWOULDBLOCK
    # 1 ms, doubled each try to 32 ms, then 50 ms at a time, until two seconds have passed.
    assert clock.pauses[:6] == pytest.approx([0.001 * 2**i for i in range(6)])
    assert set(clock.pauses[6:]) == {0.05}
    assert sum(clock.pauses[:-1]) < 2.0 <= sum(clock.pauses)
    os.close(held)
    clock.pauses.clear()
    with folder.locked("p"):  # released: taken at once
        assert clock.pauses == []


def checked_as(check, root: Path, mode: int, owner: int) -> tuple[str, Path, int]:
    """The line ``check`` refuses a new folder of ``mode`` and ``owner`` in, the folder, and
    the descriptor it was given."""
    folder = Path(tempfile.mkdtemp(dir=root))
    os.chmod(folder, mode)
    os.chown(folder, owner, owner)
    fd = os.open(folder, os.O_RDONLY)
    return refused(lambda: check(fd, folder), cache_folder.UnsafeCache), folder, fd


def test_a_shared_cache_dir_and_a_users_folder_are_refused_naming_why(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    own = (
        "(another user could replace this user's cache in it): give cache_dir= a folder of your own"
    )
    for mode, owner, problem in [
        (0o777, 0, "may be written by other users, without the sticky bit"),
        (0o1777, NOBODY, f"belongs to another user (uid {NOBODY}), who may rename what is in it"),
    ]:
        line, folder, fd = checked_as(cache_folder.check_shared, tmp_path, mode, owner)
        os.close(fd)
        assert line == f"{folder} {problem} {own}"
    for mode, owner, problem in [
        (0o750, 0, "may be read or written by other users (mode drwxr-x---)"),
        (0o700, NOBODY, f"belongs to another user (uid {NOBODY})"),
    ]:
        line, folder, fd = checked_as(cache_folder.check_private, tmp_path, mode, owner)
        assert line == f"{folder} {problem}: {UNUSED}"
        with pytest.raises(OSError):  # closed by the refusal: not left open
            os.fstat(fd)
    fd = os.open(tmp_path, os.O_RDONLY)
    os.chmod(tmp_path, 0o1777)  # others may write, with the sticky bit: /tmp's way
    cache_folder.check_shared(fd, tmp_path)
    os.close(fd)


def parts_folder(root: Path, sizes: dict[str, int], used: dict[str, int]) -> cache_folder.Folder:
    """A version's folder holding files of ``sizes`` bytes in ``parts/``, each part last used at
    ``used[name]`` (seconds; its marker's time where the name is ``NAME.used``)."""
    folder = cache_folder.Folder(root, "v1")
    for name, size in sizes.items():
        (folder.root / "parts" / name).write_bytes(b"x" * size)
    for name, when in used.items():
        place = folder.root / ("locks" if name.endswith(".used") else "parts") / name
        place.touch()
        os.utime(place, ns=(when * 10**9, when * 10**9))
    return folder


def left(folder: cache_folder.Folder) -> tuple[list[str], list[str]]:
    return sorted(os.listdir(folder.root / "parts")), sorted(os.listdir(folder.root / "locks"))


def test_eviction_removes_the_least_recently_used_parts_until_the_rest_fit(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()  # a process that filled a part and died: its partial file is removed
    # two being filled (this process's, its parent's): counted, kept
    live = [f".d.arrow.{os.getpid()}.partial", f".f.arrow.{os.getppid()}.partial"]
    sizes = {"a.arrow": 100, "b.arrow": 100, "c.arrow": 100, "k.arrow": 100}
    sizes.update({live[0]: 50, live[1]: 50, f".e.arrow.{dead.pid}.partial": 1000})
    used = {"a.arrow": 1, "b.arrow": 2, "c.arrow": 3, "a.arrow.used": 10}  # a: used last
    # 500 bytes with the part kept and those being filled: b goes (400 left), then c (300),
    # then a with its marker (200), each only while the rest is over the limit.
    for limit, kept in [
        (400, ["a.arrow", "c.arrow"]),
        (350, ["a.arrow"]),
        (300, ["a.arrow"]),
        (299, []),
    ]:
        folder = parts_folder(tmp_path / str(limit), sizes, used)
        folder.evict(folder.root / "parts" / "k.arrow", limit)
        parts, locks = left(folder)
        assert parts == sorted([*live, "k.arrow", *kept]), limit
        markers = [n for n in locks if n.endswith(".used")]
        assert markers == (["a.arrow.used"] if "a.arrow" in kept else []), limit
    # the part kept, gone meanwhile (another thread's eviction): it counts for nothing
    folder = parts_folder(tmp_path / "gone", {"a.arrow": 100, "b.arrow": 100}, {"a.arrow": 1})
    folder.evict("k.arrow", 100)
    assert left(folder)[0] == ["b.arrow"]


def test_a_part_used_is_the_last_out(tmp_path):
    folder = parts_folder(tmp_path, {"a.arrow": 10, "b.arrow": 10}, {"a.arrow": 1, "b.arrow": 2})
    folder.touch("a.arrow")  # a marker of now, with the clock's own nanoseconds
    marker = os.stat(folder.root / "locks" / "a.arrow.used")
    assert marker.st_mtime_ns > 2 * 10**9 and stat.S_IMODE(marker.st_mode) == 0o600
    folder.evict("k.arrow", 10)
    assert left(folder)[0] == ["a.arrow"]


def test_a_part_is_found_from_one_listing_read_again_when_it_is_not_in_it(tmp_path, monkeypatch):
    folder = parts_folder(tmp_path, {"p1.0000abcd.arrow": 1, ".p2.9.partial": 1}, {})
    listings = []
    names = folder.parts.names
    monkeypatch.setattr(folder.parts, "names", lambda: listings.append(1) or names())
    assert folder.find("p1") == "p1.0000abcd.arrow" and folder.find("p1") == "p1.0000abcd.arrow"
    assert len(listings) == 1  # once for every part found
    assert folder.find("p2") is None and len(listings) == 2  # (a partial file is no part)
    (folder.root / "parts" / "p2.00001234.arrow").write_bytes(b"x")
    assert folder.find("p2") == "p2.00001234.arrow" and len(listings) == 3
    (folder.root / "parts" / "p1.0000abcd.arrow").unlink()
    assert folder.find("p1") == "p1.0000abcd.arrow"  # as last read: the caller's open tells
    assert folder.find("p1", fresh=True) is None and len(listings) == 4


def test_counts_are_logged_a_line_a_call_and_messages_once(tmp_path, monkeypatch, caplog):
    log = tmp_path / "log"
    monkeypatch.delenv("RECORDMILL_TEST_COUNT", raising=False)
    cache_folder.log_count("RECORDMILL_TEST_COUNT", 5)  # not set: nothing written
    monkeypatch.setenv("RECORDMILL_TEST_COUNT", str(log))
    cache_folder.log_count("RECORDMILL_TEST_COUNT", 5)
    cache_folder.log_count("RECORDMILL_TEST_COUNT", 7)
    assert log.read_text() == f"{os.getpid()} 5\n{os.getpid()} 7\n"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    monkeypatch.setattr(cache_folder, "_SAID", set())
    with caplog.at_level(logging.INFO, logger="recordmill"):
        for _ in range(2):
            cache_folder.log_once("said once")
            cache_folder.log_once("said once too", logging.WARNING)
    said = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert said == [
        ("recordmill", logging.INFO, "said once"),
        ("recordmill", logging.WARNING, "said once too"),
    ]


def test_the_process_filling_a_part_is_read_from_its_name_and_asked_if_alive():
    assert cache_folder.filler(".p.x.arrow.123.partial") == 123
    assert cache_folder.filler(".p.nopid.partial") == 0 and cache_folder.filler("x") == 0
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    assert cache_folder.alive(os.getpid()) and cache_folder.alive(1)  # (1: init, anyone's)
    assert not cache_folder.alive(dead.pid)
    assert not cache_folder.alive(0) and not cache_folder.alive(-1)  # (0: the process group)
