"""A cache folder shared with other users: another user can neither plant rows, nor read a
private dataset's, nor make a read write or delete a file. The other user is real: a process
run as ``nobody`` (``setpriv``), so that ownership and permissions are what the kernel says."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile

import pytest

import recordmill
from tests.conftest import make_plugin
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
    with pytest.warns(recordmill.RecordmillWarning, match="is not a folder"):
        ds = recordmill.open(dataset, cache_dir=shared)
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
