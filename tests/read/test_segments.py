"""Row groups as the bytes they are in their files: offsets and CRC-32C recorded by the writer,
checked by every read that is not of a file checked before."""

from __future__ import annotations

import io
import threading

import pyarrow.parquet as pq
import pytest

import recordmill
from recordmill.dataset.checksum import crc32c
from recordmill.dataset.storage import Store
from recordmill.read.files import open_files
from recordmill.read.segments import Segments
from tests.conftest import make_plugin

PLUGIN = """
    import numpy as np

    def task_number():
        return 3

    def schema():
        return {"id": {"type": "int64"}, "name": {"type": "string"}, "img": {"type": "uint8", "shape": [8, 8]}}

    def dict_data(task_id):
        for i in range(40):
            n = task_id * 40 + i
            yield {"id": n, "name": f"row {n}", "img": np.full((8, 8), n % 251, dtype=np.uint8)}
"""


@pytest.fixture(scope="module", params=["parquet", "arrow"])
def dataset(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    recordmill.write(
        make_plugin(root / "p", PLUGIN),
        root / "out",
        partitions=2,
        row_group_size=16,
        format=request.param,
        progress=False,
    )
    return root / "out"


def test_each_row_group_is_one_run_of_bytes_whose_crc_the_manifest_records(dataset):
    manifest = recordmill.read_manifest(dataset)
    for entry in manifest["partitions"]:
        data = (dataset / entry["file"]).read_bytes()
        offsets, sums = entry["group_offsets"], entry["group_crc32c"]
        assert len(offsets) == len(sums) == entry["row_groups"] + 1
        assert offsets == sorted(offsets) and offsets[-1] < len(data) == entry["bytes"]
        runs = [data[a:b] for a, b in zip(offsets, [*offsets[1:], len(data)], strict=True)]
        assert [crc32c(run) for run in runs] == sums
        if manifest["format"] == "parquet":  # the runs are where Parquet's footer says
            meta = pq.ParquetFile(dataset / entry["file"]).metadata
            for g in range(meta.num_row_groups):
                columns = [meta.row_group(g).column(c) for c in range(meta.num_columns)]
                start = min(c.dictionary_page_offset or c.data_page_offset for c in columns)
                assert start == offsets[g]


def test_the_bytes_of_a_group_decode_to_the_rows_read_by_pyarrow(dataset):
    files = open_files(Store.at(str(dataset)), checksums=True).ready()
    segments = Segments(files)
    assert segments.available
    for g, group in enumerate(files.groups):
        data = segments.fetch(group.partition, group.index, group.index + 1)
        segments.check(group.partition, group.index, group.index + 1, data)
        (batch,) = segments.decode(group.partition, group.index, group.index + 1, data, files.names)
        assert batch.equals(files.read(g, files.names))


def test_a_group_is_decoded_on_the_calling_thread_alone(dataset, monkeypatch):
    """Arrow's thread pool never reads the Python file a group is decoded from: a pool thread
    still in it at exit aborts the interpreter (apache/arrow#50482)."""
    from recordmill.read import segments as module

    readers = set()
    readinto = module._Sparse.readinto

    def recording(self, buffer):
        readers.add(threading.get_ident())
        return readinto(self, buffer)

    monkeypatch.setattr(module._Sparse, "readinto", recording)
    files = open_files(Store.at(str(dataset)), checksums=True).ready()
    segments = Segments(files)
    data = segments.fetch(0, 0, 2)
    assert len(segments.decode(0, 0, 2, data, files.names)) == 2
    assert readers == ({threading.get_ident()} if not files.arrow else set())


def test_a_changed_byte_is_caught_by_random_access_too(dataset, tmp_path):
    """Before group checksums, ds[i] on a damaged Arrow file returned the damaged value."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(dataset, copy)
    entry = recordmill.read_manifest(copy)["partitions"][0]
    path = copy / entry["file"]
    data = bytearray(path.read_bytes())
    where = entry["group_offsets"][1] + (entry["group_offsets"][2] - entry["group_offsets"][1]) // 2
    data[where] ^= 0x01  # a byte in the middle of the second row group
    path.write_bytes(bytes(data))
    ds = recordmill.open(copy)
    assert ds[0]["id"] == 0  # the first group is whole
    with pytest.raises(recordmill.OutputError) as error:
        for i in range(16, 32):
            ds[i]
    message = str(error.value)
    assert entry["file"] in message and ("checksum" in message or "damaged" in message), message
    unchecked = recordmill.open(copy, checksums=False)
    assert unchecked[0]["id"] == 0


@pytest.mark.parametrize(
    "keys", [("group_offsets", "group_crc32c"), ("group_crc32c",), ("group_offsets",)]
)
def test_datasets_without_group_checksums_are_read_as_before(dataset, tmp_path, keys):
    """Neither recorded (an older layout), or one of the two left out (a forged manifest): no
    segments, read through pyarrow as before, never a crash on the half that is missing."""
    import shutil

    from tests.conftest import edit_manifest

    copy = tmp_path / "old"
    shutil.copytree(dataset, copy)

    def drop(manifest):
        for entry in manifest["partitions"]:
            for key in keys:
                entry.pop(key)

    edit_manifest(copy, drop)
    assert not Segments(open_files(Store.at(str(copy)), checksums=True)).available
    assert recordmill.open(copy).to_arrow().equals(recordmill.open(dataset).to_arrow())
    assert recordmill.open(copy)[50]["id"] == 50
    shuffled = recordmill.open(copy).iter_batches(16, shuffle=True, seed=1, format="arrow")
    assert sorted(i for b in shuffled for i in b.column("id").to_pylist()) == list(range(120))


def test_a_sparse_file_reads_only_the_runs_it_holds_from_where_it_stands():
    from recordmill.read.segments import _Sparse

    sparse = _Sparse(100, [(10, b"abcdef"), (90, b"0123456789")])
    assert sparse.readable() and sparse.seekable() and sparse.tell() == 0
    with pytest.raises(OSError, match=r"^bytes at offset 0 were not fetched$"):
        sparse.read(1)
    assert sparse.seek(10) == 10
    assert sparse.read(4) == b"abcd" and sparse.tell() == 14
    assert sparse.read(4) == b"ef" and sparse.tell() == 16  # the run ends: what it holds
    with pytest.raises(OSError, match=r"^bytes at offset 16 were not fetched$"):
        sparse.read(1)
    assert sparse.seek(-3, io.SEEK_END) == 97 and sparse.read() == b"789"
    sparse.seek(91)
    assert sparse.seek(2, io.SEEK_CUR) == 93 and sparse.read(2) == b"34"
