"""recordmill.open: random access, slices, batches, shuffles, shards, decoding, damage."""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
import recordmill.decode
from PIL import Image

import recordmill
from recordmill.read.dataset import gathered
from tests.conftest import edit_manifest, make_plugin, written

PLUGIN = """
    import io
    import numpy as np
    from PIL import Image

    def task_number():
        return 5

    def schema():
        return {
            "id": {"type": "int64"},
            "name": {"type": "string"},
            "vec": {"type": "float32", "shape": [2, 3]},
            "ids": {"type": "int32", "shape": [-1]},
            "png": {"type": "bytes"},
        }

    def dict_data(task_id):
        for i in range(37 * task_id):  # 0, 37, 74, ... rows: uneven tasks, one empty
            n = sum(37 * t for t in range(task_id)) + i
            buffer = io.BytesIO()
            Image.new("RGB", (3, 2), (n % 256, 7, 9)).save(buffer, "PNG")
            yield {
                "id": n,
                "name": f"row {n}",
                "vec": np.full((2, 3), n, dtype=np.float32),
                "ids": np.arange(n % 4, dtype=np.int32),
                "png": buffer.getvalue(),
            }
"""
TOTAL = 37 * (0 + 1 + 2 + 3 + 4)
MANY = """
    def task_number():
        return 1

    def dict_data(task_id):
        for i in range(2500):
            yield {"id": i}
"""


@pytest.fixture(scope="module", params=["parquet", "arrow"])
def dataset(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    plugin = make_plugin(root / "p", PLUGIN)
    recordmill.write(
        plugin,
        root / "out",
        partitions=3,
        workers=2,
        row_group_size=16,
        format=request.param,
        progress=False,
    )
    return root / "out"


def test_length_schema_and_manifest(dataset):
    ds = recordmill.open(str(dataset))
    assert len(ds) == TOTAL
    assert ds.schema.names == ["id", "name", "vec", "ids", "png"]
    assert ds.manifest["total_rows"] == TOTAL


def test_random_access_any_row_and_negative(dataset):
    ds = recordmill.open(str(dataset))
    for i in [0, 1, 15, 16, 17, 123, TOTAL - 1]:
        row = ds[i]
        assert row["id"] == i and row["name"] == f"row {i}"
        assert (
            row["vec"].shape == (2, 3) and row["vec"].dtype == np.float32 and row["vec"][1, 2] == i
        )
        assert row["ids"].tolist() == list(range(i % 4))
    assert ds[-1]["id"] == TOTAL - 1 and ds[-TOTAL]["id"] == 0
    with pytest.raises(IndexError):
        ds[TOTAL]


def test_slices_and_take(dataset):
    ds = recordmill.open(str(dataset))
    assert ds[10:50]["id"].to_pylist() == list(range(10, 50))
    assert ds[-3:]["id"].to_pylist() == [TOTAL - 3, TOTAL - 2, TOTAL - 1]
    assert ds[5:20:5]["id"].to_pylist() == [5, 10, 15]
    assert ds.take([300, 2, -1, 2])["id"].to_pylist() == [300, 2, TOTAL - 1, 2]
    assert isinstance(ds.take([1]), pa.Table)


def test_sequential_batches_cover_every_row_in_order(dataset):
    ds = recordmill.open(str(dataset))
    batches = list(ds.iter_batches(batch_size=50, columns=["id", "vec"]))
    assert [len(b["id"]) for b in batches] == [50] * 7 + [20]
    assert np.concatenate([b["id"] for b in batches]).tolist() == list(range(TOTAL))
    assert batches[1]["vec"].shape == (50, 2, 3)
    assert set(batches[0]) == {"id", "vec"}
    # A batch of pieces of several groups (16 rows each) is the same as one Arrow batch's values.
    arrow = list(ds.iter_batches(batch_size=50, format="arrow"))
    for joined, whole in zip(ds.iter_batches(batch_size=50), arrow, strict=True):
        assert joined["name"] == whole["name"].to_pylist()
        assert joined["png"] == whole["png"].to_pylist()
        assert [a.tolist() for a in joined["ids"]] == whole["ids"].to_pylist()
        assert joined["vec"].tolist() == whole["vec"].to_pylist()


def test_shuffle_is_a_seeded_permutation(dataset):
    ds = recordmill.open(str(dataset))
    orders = [
        np.concatenate(
            [b["id"] for b in ds.iter_batches(batch_size=32, shuffle=True, seed=s)]
        ).tolist()
        for s in (4, 4, 5)
    ]
    assert sorted(orders[0]) == list(range(TOTAL))
    assert orders[0] == orders[1] and orders[0] != orders[2] and orders[0] != sorted(orders[0])


def test_shuffle_decodes_each_row_group_once_when_it_fits_the_cache(dataset):
    ds = recordmill.open(str(dataset), cache_dir=False)  # no disk cache: decoded in memory
    if ds.manifest["format"] == "arrow":
        pytest.skip("Arrow partitions are memory-mapped, nothing is decoded")
    for _ in ds.iter_batches(batch_size=2, shuffle=True, seed=1):  # windows of 128 rows
        pass
    groups = sum(-(-p["rows"] // 16) for p in ds.manifest["partitions"])
    assert ds.stats.groups_read == groups
    small = recordmill.open(str(dataset), cache_bytes=1, cache_dir=False)
    for _ in small.iter_batches(batch_size=2, shuffle=True, seed=1):
        pass
    assert small.stats.groups_read > groups  # a cache too small to hold them: reads again


def test_shards_are_disjoint_covering_and_balanced(dataset):
    ds = recordmill.open(str(dataset))
    shards = [ds.shard(r, 4) for r in range(4)]
    ids = [s.to_arrow()["id"].to_pylist() for s in shards]
    assert sorted(i for shard in ids for i in shard) == list(range(TOTAL))
    assert max(map(len, ids)) - min(map(len, ids)) <= 1
    assert shards[2][0]["id"] == ids[2][0] and len(shards[2]) == len(ids[2])
    for shard, expected in zip(shards, ids, strict=True):  # every way of reading a shard agrees
        batches = [b["id"].tolist() for b in shard.iter_batches(7)]
        assert [i for b in batches for i in b] == expected
        assert [row["id"] for row in shard] == expected
        shuffled = [i for b in shard.iter_batches(7, shuffle=True, seed=3) for i in b["id"]]
        assert sorted(shuffled) == expected
    with pytest.raises(ValueError):
        ds.shard(4, 4)


def test_select_and_decode(dataset):
    ds = recordmill.open(str(dataset), decode={"png": recordmill.decode.image})
    row = ds.select(["id", "png"])[42]
    assert set(row) == {"id", "png"}
    assert row["png"].shape == (2, 3, 3) and tuple(row["png"][0, 0]) == (42, 7, 9)
    image = recordmill.decode.pil(recordmill.open(str(dataset))[3]["png"])
    assert isinstance(image, Image.Image) and image.size == (3, 2)
    with pytest.raises(KeyError, match="no column 'nope'"):
        ds.select(["nope"])


def test_a_file_uri(dataset):
    ds = recordmill.open(dataset.as_uri())
    assert ds[100]["id"] == 100


def test_a_truncated_partition_is_a_clear_error(dataset, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(dataset, copy)
    part = sorted(copy.glob("part-*"))[1]
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    with pytest.raises(recordmill.RecordmillError, match="bytes, the manifest says"):
        recordmill.open(str(copy))


def test_a_deleted_partition_is_a_clear_error(dataset, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(dataset, copy)
    sorted(copy.glob("part-*"))[1].unlink()
    with pytest.raises(recordmill.RecordmillError, match="is missing"):
        recordmill.open(str(copy))


def test_row_groups_come_from_the_manifest_and_are_checked_against_the_files(dataset, tmp_path):
    import shutil

    manifest = recordmill.read_manifest(dataset)
    assert [p["row_groups"] for p in manifest["partitions"]] == [
        -(-p["rows"] // 16) for p in manifest["partitions"]
    ]  # one row group (Parquet) or record batch (Arrow IPC) of 16 rows at a time, the last smaller
    copy = tmp_path / "copy"
    shutil.copytree(dataset, copy)

    def other_groups(m, lists=False):  # groups of 8 rows: twice as many as the files hold
        m["settings"]["row_group_size"] = 8
        for p in m["partitions"]:
            p["row_groups"] = -(-p["rows"] // 8)
            if not lists:  # the offsets and checksums of the groups left out, as older ones
                p.update(group_offsets=None, group_crc32c=None, batch_crc32=None)

    shutil.copytree(dataset, tmp_path / "lists")
    edit_manifest(tmp_path / "lists", lambda m: other_groups(m, lists=True))
    with pytest.raises(recordmill.OutputError, match=r'"group_offsets" lists \d+, \d+ expected'):
        recordmill.open(str(tmp_path / "lists"))  # the manifest disagrees with itself
    edit_manifest(copy, other_groups)
    ds = recordmill.open(str(copy))
    with pytest.raises(recordmill.OutputError, match="does not match the manifest"):
        ds[len(ds) - 1]
    edit_manifest(copy, lambda m: m["partitions"][1].update(row_groups=1))
    with pytest.raises(
        recordmill.OutputError, match=r"part-00001-of-00003.* has 123 rows in 1 row groups of 8"
    ):
        recordmill.open(str(copy))[0]


def test_not_a_dataset(tmp_path):
    with pytest.raises(recordmill.OutputError, match="not a recordmill dataset"):
        recordmill.open(str(tmp_path))


def test_image_decoder_handles_grayscale_bytes():
    buffer = io.BytesIO()
    Image.new("L", (4, 5), 200).save(buffer, "PNG")
    array = recordmill.decode.image(buffer.getvalue())
    assert array.shape == (5, 4, 3) and (array == 200).all()


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_shuffled_large_values_arrive_whole_and_in_order(tmp_path, fmt):
    # Values of 1 KB and more take the one-copy gather path; check it byte for byte.
    plugin = make_plugin(
        tmp_path / "big",
        """
        def task_number():
            return 3

        def dict_data(task_id):
            for i in range(40):
                n = task_id * 40 + i
                yield {"id": n, "blob": bytes([n % 256]) * (1024 + n), "text": "é" * (600 + n)}
        """,
    )
    recordmill.write(
        plugin, tmp_path / "ds", partitions=2, row_group_size=7, format=fmt, progress=False
    )
    ds = recordmill.open(str(tmp_path / "ds"))
    seen = []
    for batch in ds.iter_batches(batch_size=5, shuffle=True, seed=2):
        for n, blob, text in zip(batch["id"], batch["blob"], batch["text"], strict=True):
            assert blob == bytes([n % 256]) * (1024 + n) and text == "é" * (600 + n)
            seen.append(int(n))
    assert sorted(seen) == list(range(120)) and seen != sorted(seen)
    assert ds.take([119, 0, 64])["blob"].to_pylist()[0] == bytes([119]) * 1143


def test_big_columns_of_small_values_are_gathered_where_they_lie(dataset, monkeypatch):
    import recordmill.read.gather

    monkeypatch.setattr(recordmill.read.gather, "JOIN_BYTES", 0)  # no column is joined
    ds = recordmill.open(str(dataset))
    order = np.random.default_rng(3).permutation(len(ds))
    assert [r["name"] for r in ds.rows(order)] == [f"row {i}" for i in order]
    assert [r["id"] for r in ds.iter_rows(order[:50], batch_size=7)] == order[:50].tolist()


def _read_all(location: str, shuffle: bool) -> pa.Table | Exception:
    """Every row, or the error that stopped the read."""
    try:
        # The files themselves each time: a disk cache would serve what it checked before a flip.
        ds = recordmill.open(location, cache_dir=False)
        batches = list(ds.iter_batches(64, shuffle=shuffle, seed=1, format="arrow"))
        return pa.Table.from_batches(batches).sort_by("id")
    except (recordmill.RecordmillError, OSError, pa.ArrowException) as e:
        return e


@pytest.mark.parametrize("shuffle", [False, True], ids=["sequential", "shuffled"])
def test_a_flipped_byte_is_never_returned_as_data(dataset, tmp_path, shuffle):
    """Any byte of a partition flipped: reading it whole fails, or gives exactly the rows that
    were written (a flip in padding changes no value)."""
    import shutil

    reference = _read_all(str(dataset), shuffle)
    assert isinstance(reference, pa.Table) and reference.num_rows == TOTAL
    copy = tmp_path / "copy"
    shutil.copytree(dataset, copy)
    part = sorted(copy.glob("part-*"))[2]
    original = part.read_bytes()
    caught = 0
    for offset in np.linspace(0, len(original) - 1, 60).astype(int):
        damaged = bytearray(original)
        damaged[offset] ^= 0x10
        part.write_bytes(bytes(damaged))
        found = _read_all(str(copy), shuffle)
        if isinstance(found, Exception):
            caught += 1
        else:
            assert found.equals(reference), f"byte {offset} flipped was returned as data"
    assert caught >= 40  # nearly every byte is data or structure


def test_a_reader_keeps_reading_the_version_it_opened(tmp_path):
    """A dataset replaced (--overwrite) while it is read: the reader that opened the first
    version reads all of it, and nothing of the second; a reader opened after sees the second."""
    for fmt in ("parquet", "arrow"):
        plugin = make_plugin(tmp_path / "p", PLUGIN)
        out = tmp_path / f"out-{fmt}"
        settings = dict(partitions=3, row_group_size=16, format=fmt, progress=False)
        recordmill.write(plugin, out, **settings)
        first = recordmill.open(str(out))
        rows = first.iter_batches(50, format="arrow")
        head = [next(rows)]
        # Another size as well: bytecode cached in the same second is checked by size and mtime.
        plugin.joinpath("plugin.py").write_text(
            plugin.joinpath("plugin.py").read_text().replace('f"row {n}"', 'f"newer {n}"')
        )
        recordmill.write(plugin, out, overwrite=True, **settings)
        names = pa.Table.from_batches(head + list(rows))["name"].to_pylist()
        assert names == [f"row {n}" for n in range(TOTAL)]
        assert first[TOTAL - 1]["name"] == f"row {TOTAL - 1}"
        assert recordmill.open(str(out))[TOTAL - 1]["name"] == f"newer {TOTAL - 1}"


def test_misused_arguments_are_one_line_naming_what_was_expected(dataset):
    for version, shown in [("2", "str '2'"), (True, "bool True"), (2.0, "float 2.0"), (0, "int 0")]:
        with pytest.raises(ValueError) as info:
            recordmill.open(str(dataset), version=version)
        assert str(info.value) == (
            "version must be a whole number from 1 (recordmill history lists them), got " + shown
        )
    assert recordmill.open(str(dataset), version=1).version == 1  # the first: a version
    with pytest.raises(ValueError, match=r"cache_limit"):  # checked at the open, cache or not
        recordmill.open(str(dataset), cache_dir=False, cache_limit="lots")
    ds = recordmill.open(str(dataset))
    with pytest.raises(ValueError, match=r"^batch_size must be a whole number from 1, got 0$"):
        next(ds.iter_batches(batch_size=0))
    for shuffle in (False, True):  # another format was read as numpy
        with pytest.raises(ValueError) as info:
            next(ds.iter_batches(4, shuffle=shuffle, format="pandas"))
        assert str(info.value) == "format must be 'numpy' or 'arrow', got 'pandas'"
    with pytest.raises(TypeError, match=r"indexed by row number or slice; for a column: ds.sel"):
        ds["id"]
    with pytest.raises(KeyError) as info:  # a ColumnError: a KeyError and a RecordmillError
        recordmill.open(str(dataset), decode={"nope": bytes})
    assert str(info.value) == "decode= names no column 'nope'; columns: id, name, vec, ids, png"
    assert isinstance(info.value, recordmill.RecordmillError)
    tensors = recordmill.open(str(dataset), decode={"vec": recordmill.decode.image})
    with pytest.raises(ValueError, match=r"takes an image file's bytes, got a float32 array of sh"):
        tensors[0]
    garbage = recordmill.open(str(dataset), decode={"name": recordmill.decode.image})
    with pytest.raises(ValueError, match=r"^decode.image takes an image file's bytes, got str$"):
        garbage[0]


def test_the_image_decoder_says_what_failed_without_python_objects():
    import io

    from PIL import Image

    with pytest.raises(ValueError) as info:
        recordmill.decode.image(b"not an image at all")
    assert str(info.value) == (
        "Pillow does not recognise these bytes as an image (they begin b'not an i')"
    )
    jpeg = io.BytesIO()
    Image.new("RGB", (64, 64), "red").save(jpeg, "JPEG")
    with pytest.raises(ValueError, match=r"^Pillow cannot read this JPEG: ") as info:
        recordmill.decode.image(jpeg.getvalue()[:300])
    assert " at 0x" not in str(info.value)


def test_float32_values_come_back_as_float32_and_print_as_stored(tmp_path):
    plugin = make_plugin(
        tmp_path / "p",
        """
        def task_number():
            return 1

        def schema():
            return {"price": {"type": "float32"}, "weight": {"type": "float64"}}

        def dict_data(task_id):
            yield {"price": 17.99, "weight": 17.99}
        """,
    )
    recordmill.write(plugin, tmp_path / "ds", progress=False, workers=0)
    ds = recordmill.open(str(tmp_path / "ds"))
    for row in (ds[0], next(iter(ds))):
        assert type(row["price"]) is np.float32 and str(row["price"]) == "17.99"
        assert type(row["weight"]) is float and row["weight"] == 17.99
    shown = subprocess.run(
        [sys.executable, "-m", "recordmill", "head", tmp_path / "ds"],
        capture_output=True,
        text=True,
    )
    assert shown.stdout.strip() == "[0] price=17.99, weight=17.99"


def test_parquet_shuffles_go_through_the_users_cache_by_default(
    dataset, tmp_path, monkeypatch, caplog
):
    import logging

    import recordmill.read.machine.cache_folder

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(recordmill.read.machine.cache_folder, "_SAID", set())
    with caplog.at_level(logging.INFO, logger="recordmill"):
        ds = recordmill.open(str(dataset))
        again = recordmill.open(str(dataset))
    said = [r.getMessage() for r in caplog.records if "disk cache" in r.getMessage()]
    if ds.manifest["format"] == "arrow":  # local Arrow IPC is mapped where it is
        assert ds.cache is None and not said
        return
    assert len(said) == 1 and "cache_dir=False: none" in said[0]  # said once
    assert ds.cache is not None and ds.cache.implicit
    assert str(ds.cache.root).startswith(str(tmp_path / "xdg" / "recordmill" / "user-"))
    assert [r["id"] for r in ds] == list(range(TOTAL)) and ds.cache.fetched_parts == 0  # direct
    ids = [i for b in ds.iter_batches(16, shuffle=True, seed=2) for i in b["id"].tolist()]
    assert sorted(ids) == list(range(TOTAL)) and ds.cache.fetched_parts == len(ds.cache.parts)
    assert again.rows(np.arange(TOTAL))[5]["id"] == 5 and again.cache.fetched_parts == 0
    assert recordmill.open(str(dataset), cache_dir=False).cache is None


def test_rows_of_long_numeric_arrays_are_gathered_from_where_they_lie(tmp_path):
    import recordmill.read.gather as gather

    plugin = make_plugin(tmp_path / "p", """
        import numpy as np

        def task_number():
            return 2

        def schema():
            return {"wave": {"type": "float32", "shape": [-1]}, "ids": {"type": "uint16", "shape": [-1]}}

        def dict_data(task_id):
            for i in range(40):
                n = task_id * 40 + i
                yield {"wave": np.arange(n * 7, n * 7 + 300 + n, dtype=np.float32),
                       "ids": np.full(600 + n, n, dtype=np.uint16)}
    """)  # fmt: skip
    out = tmp_path / "out"
    recordmill.write(plugin, out, format="arrow", row_group_size=16, progress=False)
    ds = recordmill.open(str(out))
    whole = ds.to_arrow()
    chunks = [whole.column("wave").chunk(0)]
    assert gather.Values.fits(whole.schema.field("wave").type, chunks)  # the path under test
    order = np.random.default_rng(1).permutation(len(ds))
    for view, rows in ((ds, order), (ds.shard(1, 3), order[: len(ds.shard(1, 3))] % 26)):
        got = view.take(rows)
        expected = view.to_arrow().take(pa.array(rows))
        assert got.column("wave").to_pylist() == expected.column("wave").to_pylist()
        assert got.column("ids").to_pylist() == expected.column("ids").to_pylist()


@pytest.mark.parametrize("cache", ["default", "given", "none"])
def test_a_dataset_travels_pickled_as_the_same_view(dataset, tmp_path, cache, monkeypatch):
    """As a DataLoader worker gets it: the same rows and columns of the same version, decoded
    alike, through the same cache (or none), opened again in the other process."""
    import pickle

    import pyarrow.fs as pafs

    monkeypatch.setenv("RECORDMILL_CACHE_DIR", str(tmp_path / "default"))
    given = {"default": {}, "given": {"cache_dir": tmp_path / "c"}, "none": {"cache_dir": False}}
    ds = recordmill.open(
        str(dataset) + "/",  # a folder's path as a user may write it, on a filesystem given
        filesystem=pafs.LocalFileSystem(),
        decode={"png": recordmill.decode.image},
        **given[cache],
    )
    view = ds.select(["id", "png"]).shard(1, 3)
    again = pickle.loads(pickle.dumps(view))
    assert len(again) == len(view) == 123 and again.schema == view.schema
    assert again.version == view.version == 1
    assert again.to_arrow().equals(view.to_arrow())
    assert again[0]["id"] == view[0]["id"] == 124 and again[0]["png"].shape == (2, 3, 3)
    assert repr(again) == f"<recordmill.Dataset {dataset}: 123 rows, columns ['id', 'png']>"
    if ds.manifest["format"] == "parquet":  # (Arrow IPC is read where it lies: no cache)
        folder = {"default": tmp_path / "default", "given": tmp_path / "c", "none": None}[cache]
        caches = [d.cache.folder.cache_dir if d.cache else None for d in (view, again)]
        assert caches == [folder, folder]


def test_the_first_row_read_may_be_of_any_group(dataset):
    ds = recordmill.open(str(dataset), cache_dir=False)
    assert ds[20]["id"] == 20 and ds[5]["id"] == 5 and ds[-1]["id"] == TOTAL - 1
    # the arrays of the group read last, kept: its next rows ask for nothing again
    fresh = recordmill.open(str(dataset), cache_dir=False)
    asked, group = [], fresh._groups.group
    fresh._groups.group = lambda *args: asked.append(args[0]) or group(*args)
    for i in range(20):
        assert fresh[i]["id"] == i
    assert asked == [0, 1]


def test_views_and_defaults_as_documented(dataset):
    ds = recordmill.open(str(dataset), cache_dir=False)
    assert ds[0:10:2]["id"].to_pylist() == [0, 2, 4, 6, 8]  # a step of 2
    assert ds[10:0]["id"].to_pylist() == []
    assert [len(b["id"]) for b in ds.iter_batches(1)][:3] == [1, 1, 1]  # batches of one row
    assert (ds.shuffled(3) == ds.shuffled(3, 0)).all() and ds.order_blocks() == 0
    assert not (ds.shuffled(3) == ds.shuffled(3, 1)).all()
    with pytest.raises(TypeError) as info:
        ds["id"]
    assert str(info.value) == (
        "ds['id']: a Dataset is indexed by row number or slice; for a column: "
        "ds.select(['id']) or ds.to_arrow()['id']"
    )


def test_batches_of_1024_rows_by_default(tmp_path):
    path = written(tmp_path, MANY, workers=0)
    ds = recordmill.open(str(path))
    assert [len(b["id"]) for b in ds.iter_batches()] == [1024, 1024, 452]
    assert [len(b["id"]) for b in ds.iter_batches(shuffle=True, seed=1)] == [1024, 1024, 452]
    assert [row["id"] for row in ds.iter_rows()] == list(range(2500))


def test_rows_read_for_a_batch_keep_their_groups_for_the_next(tmp_path):
    path = written(tmp_path, MANY, workers=0, row_group_size=100)
    ds = recordmill.open(str(path), cache_dir=False)
    ds.gather([0, 150])
    ds.gather([2, 152])
    assert ds.stats.groups_read == 2  # groups 0 and 1, decoded once, kept for the next
    ds = recordmill.open(str(path), cache_dir=False)
    ds.rows([0, 150])
    ds.rows([2, 152])
    assert ds.stats.groups_read == 2
    ds = recordmill.open(str(path), cache_dir=False)
    gathered(ds, [0, 150])  # (what a torch MapDataset gathers)
    gathered(ds, [2, 152])
    assert ds.stats.groups_read == 2
