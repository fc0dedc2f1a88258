"""The MDS and LitData readers (recordmill/inputs/mds.py, litdata.py, packed.py) on bytes damaged
as a disk, a cut copy or a forger would damage them: each one clear error, never a wrong value."""

from __future__ import annotations

import gzip
import itertools
import json
import pickle
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from recordmill.errors import ConfigError, InputError
from recordmill.inputs import litdata, mds, packed

DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_sample_table_is_checked_against_its_index_and_its_size():
    assert [bytes(v) for v in packed.sample_table(packed.laid_out([b"ab", b"", b"c"]), 3, "f")] == [
        b"ab",
        b"",
        b"c",
    ]
    with pytest.raises(packed.Damaged, match="f: 1 bytes, too short for a sample count"):
        packed.sample_table(b"\x01", 1, "f")
    with pytest.raises(packed.Damaged, match="holds 3 samples, its index says 2"):
        packed.sample_table(packed.laid_out([b"a", b"b", b"c"]), 2, "f")
    with pytest.raises(packed.Damaged, match=r"f: its offset table is cut short \(12 bytes\)"):
        packed.sample_table(packed.laid_out([b"a", b"b"])[:12], 2, "f")
    backwards = bytearray(packed.laid_out([b"ab", b"cd"]))
    backwards[8:12] = struct.pack("<I", 13)
    with pytest.raises(packed.Damaged, match="expected increasing from 16 to at most the file's"):
        packed.sample_table(bytes(backwards), 2, "f")
    with pytest.raises(packed.Damaged, match="expected increasing from 16"):
        packed.sample_table(
            packed.laid_out([b"ab", b"cd"])[:-1], 2, "f"
        )  # the last sample cut short


def test_inflate_checks_the_codec_and_the_size_the_index_gives():
    assert packed.inflate("gz:9", gzip.compress(b"abc"), 3, "f") == b"abc"
    with pytest.raises(packed.Damaged, match="f: decompresses to 3 bytes, its index says 5"):
        packed.inflate("gz", gzip.compress(b"abc"), 5, "f")
    with pytest.raises(packed.Damaged, match="f: does not decompress as zstd"):
        packed.inflate("zstd", b"not zstd at all", 5, "f")
    with pytest.raises(ConfigError, match=r"compression 'lz4' is not read \(expected one of"):
        packed.inflate("lz4", b"", None, "f")


def test_an_array_of_another_type_than_its_column_is_refused_never_cast():
    spec = {"type": "int16", "shape": [-1]}
    with pytest.raises(ValueError, match="with 1 dimensions, the column holds int16 with 1"):
        packed.checked_array(np.zeros(2, np.float32), spec, "first sample")
    with pytest.raises(ValueError, match="int16 with 2 dimensions, the column holds int16 with 1"):
        packed.checked_array(np.zeros((1, 2), np.int16), spec, "first sample")


def copy(tmp_path, *parts):
    """A copy of a fixture folder, a new one at each call."""
    return Path(shutil.copytree(DATA.joinpath(*parts), tmp_path / f"{parts[-1]}-{next(COPIES)}"))


COPIES = itertools.count()


def edit_index(folder, change):
    index = json.loads((folder / "index.json").read_text())
    change(index)
    (folder / "index.json").write_text(json.dumps(index))
    return str(folder)


def test_an_mds_index_that_is_not_one_is_one_line(tmp_path):
    folder = copy(tmp_path, "mds", "zstd")
    (folder / "index.json").write_text("{")
    with pytest.raises(InputError, match=r"index.json: not an MDS index \(JSONDecodeError"):
        mds.read_index(str(folder))
    with pytest.raises(InputError, match="a shard of format 'xds' version 2"):
        edited = edit_index(
            copy(tmp_path, "mds", "gz"), lambda i: i["shards"][0].update(format="xds")
        )
        mds.read_index(edited)
    with pytest.raises(InputError, match="its column names, encodings and sizes are not as many"):
        edited = edit_index(
            copy(tmp_path, "mds", "gz"), lambda i: i["shards"][0]["column_sizes"].pop()
        )
        mds.read_index(edited)
    with pytest.raises(InputError, match=r"index\.json: lists no shard"):
        mds.read_index(edit_index(copy(tmp_path, "mds", "gz"), lambda i: i.update(shards=[])))


def test_an_mds_sample_whose_sizes_do_not_add_up_is_refused():
    (shard, *_) = mds.read_index(str(DATA / "mds" / "zstd"))  # columns arr, id, name
    good = bytes(mds.samples(shard)[0])
    assert [len(v) for v in mds.columns(shard, memoryview(good))][1] == 8
    with pytest.raises(ValueError, match="3 bytes, too short for its 2 sizes"):
        mds.columns(shard, memoryview(good[:3]))
    with pytest.raises(ValueError, match=f"bytes, the sample has {len(good) + 1:,}"):
        mds.columns(shard, memoryview(good + b"\0"))
    with pytest.raises(ValueError, match="encoding 'tensor' is not one MDSWriter writes"):
        mds.field("tensor", None, "refuse")
    cut_list = struct.pack("<III", 0, 3, 10)  # 3 elements, one size given
    with pytest.raises(ValueError, match="a list of 3 elements whose sizes are cut short"):
        mds.decoder("list[jpeg]", {}, "refuse")(memoryview(cut_list))


def test_a_litdata_index_that_is_not_one_is_one_line(tmp_path):
    folder = copy(tmp_path, "litdata", "every_format")
    (folder / "index.json").write_text("[]")
    with pytest.raises(InputError, match=r"index.json: not a LitData index \(TypeError"):
        litdata.read_index(str(folder))
    folder = copy(tmp_path, "litdata", "zstd_batch")
    with pytest.raises(InputError, match="3 leaves, 2 formats, 2 chunks"):
        litdata.read_index(edit_index(folder, lambda i: i["config"]["data_format"].pop()))
    spec = [1, {"type": "builtins.dict", "context": '["a"]', "children_spec": []}]
    with pytest.raises(ValueError, match=r"a builtins\.dict node whose keys are"):
        litdata.leaf_names(spec, tokens=False)


def framed(tmp_path, change):
    """The first chunk of zstd_batch (framed zstd), changed by ``change(bytearray)``."""
    layout = litdata.read_index(str(copy(tmp_path, "litdata", "zstd_batch")))
    path = Path(layout.chunks[0][0])
    data = bytearray(path.read_bytes())
    change(data)
    path.write_bytes(bytes(data))
    return layout


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d.__delitem__(slice(20, None)), "its framed zstd header is cut short"),
        (
            lambda d: d.__setitem__(slice(8, 10), b"\x07\0"),
            "chunk-0-0.bin: framed zstd version 7 of 27 items, expected 1 of 27",
        ),
        (lambda d: d.__delitem__(slice(150, None)), "its framed zstd directory is cut short"),
        (lambda d: d.__delitem__(slice(-5, None)), "frame 0 runs past the file's end"),
    ],
)
def test_a_framed_zstd_chunk_that_does_not_hold_its_directory_is_damaged(tmp_path, change, said):
    layout = framed(tmp_path, change)
    with pytest.raises(packed.Damaged, match=said):
        litdata.items(layout, 0)


def test_a_litdata_item_or_leaf_that_does_not_add_up_is_refused():
    layout = litdata.read_index(str(DATA / "litdata" / "zstd_chunk"))
    item = bytes(litdata.items(layout, 0)[0])
    assert [bytes(v) for v in litdata.leaves(layout, memoryview(item))][1] == b"row 0"
    with pytest.raises(ValueError, match="bytes do not hold its 3 leaves' sizes and bytes"):
        litdata.leaves(layout, memoryview(item[:-1]))
    with pytest.raises(
        ValueError, match="no_header_numpy:14: dtype code 14 is not a type recordmill stores"
    ):
        litdata.array("no_header_numpy:14", memoryview(b""))
    with pytest.raises(ValueError, match="format 'video' is not read"):
        litdata.field("video", None, "refuse")


def test_a_loaded_pickle_without_json_text_is_that_rows_reject():
    load = packed.pickled("load")
    assert load(pickle.dumps({"a": [1, "b"]})) == '{"a": [1, "b"]}'
    with pytest.raises(ValueError, match="an unpickled set has no JSON text"):
        load(pickle.dumps({1, 2}))
    assert packed.pickled("bytes")(memoryview(b"\x80\x04N.")) == b"\x80\x04N."  # never loaded
