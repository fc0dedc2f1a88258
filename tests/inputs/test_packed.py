"""The MDS and LitData readers (recordmill/inputs/mds.py, litdata.py, packed.py) on bytes damaged
as a disk, a cut copy or a forger would damage them: each one clear error, never a wrong value."""

from __future__ import annotations

import bz2
import gzip
import itertools
import json
import pickle
import shutil
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
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
    with pytest.raises(ValueError, match="12 bytes, too short for the sizes of its 3 elements"):
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
    with pytest.raises(ValueError, match=r"28 bytes, its 3 leaves and their sizes take 29"):
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


def test_a_forged_pil_header_is_refused_before_anything_is_allocated():
    huge = struct.pack("<III", 60000, 60000, 4) + b"RGBA" + b"\0" * 16
    with pytest.raises(ValueError, match="a PIL image of 60,000 x 60,000 pixels in 16 bytes"):
        packed.pil_png(memoryview(huge))
    with pytest.raises(ValueError, match="a PIL image of 5 bytes, too short for its size and mode"):
        packed.pil_png(memoryview(b"12345"))


def test_decompression_stops_at_the_size_the_index_gives_or_at_the_cap(monkeypatch):
    bomb = gzip.compress(b"\0" * 100_000)
    with pytest.raises(
        packed.Damaged, match=r"f: decompresses to more bytes than it may \(its index says 10\)"
    ):
        packed.inflate("gz", bomb, 10, "f")
    monkeypatch.setattr(packed, "MAX_INFLATE", 1000)
    zstd = pa.compress(b"\0" * 100_000, codec="zstd", asbytes=True)
    with pytest.raises(packed.Damaged, match=r"more bytes than it may \(more than 1,000\)"):
        packed.inflate("zstd", zstd, None, "f")
    assert packed.inflate("bz2", bz2.compress(b"abc"), 3, "f") == b"abc"
    snappy = pa.compress(b"abcdef" * 100, codec="snappy", asbytes=True)
    assert packed.inflate("snappy", snappy, 600, "f") == b"abcdef" * 100
    with pytest.raises(packed.Damaged, match="it says 600 bytes, more than the 599 it may hold"):
        packed.inflate("snappy", snappy, 599, "f")
    with pytest.raises(
        packed.Damaged, match=r"does not decompress as snappy \(no length at its start\)"
    ):
        packed.inflate("snappy", b"\xff" * 6, 10, "f")


def test_a_framed_chunks_frames_must_follow_each_other(tmp_path):
    def reorder(data):  # the first frame says it starts at item 3
        at = 24 + 4 * 28
        data[at : at + 4] = struct.pack("<I", 3)

    with pytest.raises(packed.Damaged, match="frame 0 starts at item 3, expected 0"):
        litdata.items(framed(tmp_path, reorder), 0)

    def fewer(data):  # the frame holds 20 items of the header's 27
        at = 24 + 4 * 28 + 4
        data[at : at + 4] = struct.pack("<I", 20)

    with pytest.raises(packed.Damaged, match="its frames hold 20 items, its header says 27"):
        litdata.items(framed(tmp_path, fewer), 0)


def test_a_tensor_header_of_either_byte_order_is_read_and_one_of_neither_refused():
    values = np.arange(6, dtype=np.float32)
    for order in (">", "<"):  # litdata 0.2.76 writes big-endian headers, earlier ones little
        data = struct.pack(f"{order}IIII", 0, 2, 2, 3) + values.tobytes()
        assert litdata.array("tensor", memoryview(data)).tolist() == values.reshape(2, 3).tolist()
    with pytest.raises(ValueError, match="tensor: 25 bytes that no tensor header accounts for"):
        litdata.array(
            "tensor", memoryview(struct.pack("<IIII", 0, 2, 2, 3) + values.tobytes()[:-15])
        )


def test_mds_values_of_the_wrong_size_or_type_are_refused():
    with pytest.raises(ValueError, match="9 bytes, where int64 takes 8"):
        mds.decoder("int", {}, "refuse")(memoryview(b"\0" * 9))
    with pytest.raises(ValueError, match="dtype code 7 is not one MDSWriter writes"):
        mds.ndarray("ndarray", memoryview(bytes([7, 4, 1, 0])))
    with pytest.raises(
        ValueError, match="'ndarray:complex64': dtype 'complex64' is not one MDSWriter writes"
    ):
        mds.field("ndarray:complex64", None, "refuse")
    with pytest.raises(ValueError, match="a list of 2 bytes, too short for its count"):
        mds.decoder("jpeg_array", {}, "refuse")(memoryview(b"\0\0"))
    with pytest.raises(ValueError, match="a bool of 2 bytes"):
        litdata.decoder("bool", {}, "refuse")(memoryview(b"\0\0"))


def test_mds_column_sizes_must_be_whole_numbers_or_null(tmp_path):
    edited = edit_index(
        copy(tmp_path, "mds", "gz"), lambda i: i["shards"][0].update(column_sizes=[None, "8", None])
    )
    with pytest.raises(
        InputError, match=r"column sizes \[None, '8', None\]; expected whole numbers or null"
    ):
        mds.read_index(edited)
