"""The refusals of read/ that no other test reaches, each through the API a training script
calls (``recordmill.open``, ``recordmill.mix``; the torch loaders': test_torch_refusals.py), on
small real datasets; each boundary tested on both sides. Each test names the message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.fs as pafs
import pytest

import recordmill
from recordmill.dataset import layout
from recordmill.errors import ColumnError
from tests.conftest import make_plugin

PLUGIN = """
    FIELDS = {fields!r}  # name -> type

    def task_number():
        return 2

    def schema():
        return FIELDS

    def dict_data(task_id):
        for i in range(5):
            n = task_id * 5 + i
            yield {{name: str(n) if kind == "string" else n for name, kind in FIELDS.items()}}
"""


def write(root, name, fields=("id", "label"), label="int64"):
    out = root / name
    types = {field: label if field == "label" else "int64" for field in fields}
    plugin = make_plugin(root / f"p{name}", PLUGIN.format(fields=types))
    recordmill.write(plugin, out, workers=0, progress=False)
    return str(out)


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("read")
    return {
        "a": write(root, "a"),
        "b": write(root, "b"),
        "nolabel": write(root, "nolabel", ("id",)),
        "more": write(root, "more", ("id", "label", "extra")),
        "strings": write(root, "strings", ("id", "label"), label="string"),
    }


def test_a_column_the_dataset_has_not_is_refused(paths):
    ds = recordmill.open(paths["a"])
    with pytest.raises(ColumnError, match=r"^no column 'nope'; columns: id, label$"):
        ds.select(["nope"])
    with pytest.raises(TypeError) as caught:
        ds["label"]
    assert "ds.select(['label']) or ds.to_arrow()['label']" in str(caught.value)


def test_a_rank_outside_the_world_is_refused(paths):
    ds = recordmill.open(paths["a"])
    assert len(ds.shard(1, 2)) == 5  # the last rank
    m = recordmill.mix([paths["a"]])
    assert len(list(m.iter_batches(5, rank=1, world_size=2))) == 1
    for rank in (2, -1):
        with pytest.raises(ValueError, match=rf"^rank must be in 0\.\.1, got {rank}$"):
            ds.shard(rank, 2)
        with pytest.raises(ValueError, match=rf"^rank must be in 0\.\.1, got {rank}$"):
            next(m.iter_batches(5, rank=rank, world_size=2))


def test_a_row_outside_the_dataset_is_refused_on_both_sides(paths):
    ds = recordmill.open(paths["a"])
    assert ds[9]["id"] == 9 and ds[-10]["id"] == 0
    for row in (10, -11):
        with pytest.raises(
            IndexError, match=f"^row {row} is out of range for a dataset of 10 rows"
        ):
            ds[row]
    assert ds.take([9, -10])["id"].to_pylist() == [9, 0]
    for rows in ([0, 10], [-11]):
        with pytest.raises(IndexError, match=r"^indices out of range for a dataset of 10 rows$"):
            ds.take(rows)


def test_a_mixture_of_nothing_or_of_no_rows_is_refused(paths):
    with pytest.raises(ValueError, match=r"^mix\(\) needs at least one source$"):
        recordmill.mix([])
    assert len(recordmill.mix([paths["a"]], rows=1)) == 1
    for rows in (0, 1.5):
        with pytest.raises(ValueError) as caught:
            recordmill.mix([paths["a"]], rows=rows)
        assert (
            str(caught.value) == f"rows must be a whole number from 1 (rows per epoch), got {rows}"
        )


def test_a_mixture_row_outside_it_is_refused(paths):
    m = recordmill.mix([paths["a"], paths["b"]])
    source, local = m.locate([19])
    assert (source.tolist(), local.tolist()) == ([1], [9])
    with pytest.raises(IndexError, match=r"^row numbers of a mixture are 0 to 19$"):
        m.locate([20])


def test_sources_of_other_columns_are_refused(paths):
    with pytest.raises(ColumnError) as caught:
        recordmill.mix([paths["a"], paths["nolabel"]])
    assert str(caught.value) == (
        "source 'nolabel' has no column 'label', which 'a' has; give columns= the ones every "
        "source has"
    )
    with pytest.raises(ColumnError) as caught:
        recordmill.mix([paths["a"], paths["more"]])
    assert str(caught.value) == (
        "source 'more' has a column 'extra' that 'a' has not; give columns= the ones every "
        "source has"
    )
    assert recordmill.mix([paths["a"], paths["more"]], columns=["id"]).schema.names == ["id"]
    with pytest.raises(ColumnError) as caught:
        recordmill.mix([paths["a"], paths["strings"]])
    assert str(caught.value) == (
        "column 'label' is string in source 'strings' and int64 in 'a'; a mixture's sources hold "
        "the same columns"
    )


def test_weights_that_name_no_source_or_start_late_are_refused(paths):
    sources = {"a": paths["a"], "b": paths["b"]}
    with pytest.raises(ValueError, match=r"^weights names no source 'c'; sources: \['a', 'b'\]$"):
        recordmill.mix(sources, {"a": 1, "c": 1})
    with pytest.raises(ValueError, match=r"^a weight schedule starts at row 0, got 5$"):
        recordmill.mix(sources, [(5, [1, 1])])
    assert len(recordmill.mix(sources, [(0, [1, 1]), (5, [1, 0])], until="first_exhausted"))


FEW_FILES = """
import os, resource, sys
import recordmill

path, last, other = sys.argv[1:]
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
ds = recordmill.open(path)  # 32 of its 40 partitions pinned: half the files it may open
os.remove(os.path.join(path, last))
for row in (39, 38):
    try:
        if row == 38:  # every file this process may open, open
            hog = []
            while True:
                try:
                    hog.append(open(os.devnull))
                except OSError:
                    break
        ds[row]
    except recordmill.OutputError as e:
        print(e)
"""


FORTY = """
    def task_number():
        return 1

    def dict_data(task_id):
        for i in range(40):
            yield {"id": i}
"""


def test_a_file_removed_or_too_many_files_while_reading_is_one_line(tmp_path):
    out = tmp_path / "many"
    recordmill.write(make_plugin(tmp_path / "p", FORTY), out, partitions=40, workers=0)
    parts = [p["file"] for p in recordmill.read_manifest(out)["partitions"]]
    assert [p["rows"] for p in recordmill.read_manifest(out)["partitions"]] == [1] * 40
    script = tmp_path / "few.py"
    script.write_text(FEW_FILES)
    args = [sys.executable, str(script), str(out), parts[39], parts[38]]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert result.stdout.splitlines() == [
        f"{out}/{parts[39]} is missing: the dataset was replaced (a run with --overwrite) or "
        "damaged while it was read; open it again",
        f"cannot open {out}/{parts[38]}: too many open files (the dataset has 40 partitions; the "
        "process may open 64 files: ulimit -n)",
    ], result.stderr


def test_a_cache_folder_that_cannot_be_made_is_one_line(paths, tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(recordmill.ConfigError) as caught:
        recordmill.open(paths["a"], cache_dir=tmp_path / "afile" / "cache")
    assert str(caught.value) == (
        f"cannot use {tmp_path / 'afile' / 'cache'} as a cache folder: Not a directory (give "
        "cache_dir= a folder this user can write, or set RECORDMILL_CACHE_DIR)"
    )


class CommittedOnEachRead(pafs.LocalFileSystem):
    """A local disk where another run commits between any two reads of a dataset's manifest:
    before each read, the manifest of the other of two versions is put in its place, as a
    commit does it (a rename)."""

    def __init__(self, manifest: Path, versions: list[bytes]):
        super().__init__()
        self.manifest, self.versions, self.reads = manifest, versions, 0

    def open_input_stream(self, path, *args, **kwargs):
        # (a local file is opened by the name of the descriptor it was checked on)
        if Path(os.path.realpath(path)) == self.manifest.resolve():
            self.reads += 1
            new = self.manifest.with_name("manifest.new")
            new.write_bytes(self.versions[self.reads % 2])
            os.replace(new, self.manifest)
        return super().open_input_stream(path, *args, **kwargs)


def test_a_dataset_replaced_at_every_read_of_its_manifest_is_refused(tmp_path):
    out = write(tmp_path, "out")
    plugin = tmp_path / "pout"
    manifest = Path(out) / layout.manifest_file("parquet")
    first = manifest.read_bytes()
    recordmill.write(plugin, out, append=True, workers=0, progress=False)  # version 2
    versions = [manifest.read_bytes(), first]
    fs = CommittedOnEachRead(manifest, versions)
    with pytest.raises(recordmill.OutputError) as caught:
        recordmill.open(out, filesystem=fs)
    assert str(caught.value) == f"{out} was replaced 5 times while it was opened; open it again"
    assert fs.reads == 6  # the first read and five more, each finding another version
    # Once the commits stop, it opens: version 2 (the last one committed), whole.
    ds = recordmill.open(out)
    assert ds.version == 2 and ds.to_arrow()["id"].to_pylist() == [*range(10), *range(10)]
