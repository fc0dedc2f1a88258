"""OFRecord and TFRecord files damaged in each way their readers name, converted with the
ofrecord and tfrecord plugins in this process: one line naming the file, the record and the
damage, and no output. The records are protobuf bytes built here field by field, so that each
is damaged in exactly one way; the first record of each file is intact (the schema is taken
from it)."""

from __future__ import annotations

import gzip
import struct
import zlib

import pytest

import recordmill
from recordmill.errors import SKIP_HINT
from recordmill.inputs import ofrecord, tfrecord


def varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return key(number, 2) + varint(len(payload)) + payload


def entry(name: bytes, feature: bytes) -> bytes:
    """An OFRecord (and Example) feature map entry: field 1 of the record."""
    return field(1, field(1, name) + field(2, feature))


GOOD = ofrecord.encode_ofrecord({"x": ("int64", [1])})


def ofrecord_file(path, *records: bytes) -> None:
    path.write_bytes(b"".join(struct.pack("<q", len(r)) + r for r in records))


def refused(plugin: str, folder, tmp_path) -> str:
    out = tmp_path / "out"
    with pytest.raises(recordmill.RecordmillError) as caught:
        recordmill.write(plugin, out, options={"input": str(folder)}, workers=0, progress=False)
    assert not out.exists()
    text = str(caught.value)
    assert "\n" not in text
    return text.removesuffix(f" {SKIP_HINT}")


OFRECORDS = {  # a record after an intact one -> the line's end
    "varint": (b"\x0a\x80", "the message ends inside a varint"),
    "field 0": (b"\x00\x01", "a field numbered 0 (damaged bytes)"),
    "wire 3": (b"\x0b", "field 1 has wire type 3, which is not supported"),
    "feature wire": (b"\x08\x01", "field 1 (feature) has wire type 0, not 2"),
    "entry wire": (field(1, b"\x08\x01"), "a feature map entry's field 1 has wire type 0, not 2"),
    "name": (entry(b"\xff", field(3, b"")), "a feature name is not UTF-8: b'\\xff'"),
    "no feature": (field(2, b""), "the record holds no feature"),
    "kind wire": (entry(b"x", b"\x08\x01"), "a Feature's field 1 has wire type 0, not 2"),
    "bytes wire": (entry(b"x", field(1, b"\x08\x01")), "a bytes_list holds a value of wire type 0"),
    "float wire": (entry(b"x", field(2, b"\x08\x01")), "a float_list holds a value of wire type 0"),
    "float bytes": (entry(b"x", field(2, field(1, b"\0\0\0"))), "a packed float_list of 3 bytes"),
    "int wire": (
        entry(b"x", field(5, key(1, 5) + b"\0\0\0\0")),
        "an int64_list holds a value of wire type 5",
    ),
}


@pytest.mark.parametrize("damage", sorted(OFRECORDS))
def test_an_ofrecord_that_does_not_parse_is_named(tmp_path, damage):
    record, line = OFRECORDS[damage]
    folder = tmp_path / "in"
    folder.mkdir()
    ofrecord_file(folder / "part-0", GOOD, record)
    text = refused("ofrecord", folder, tmp_path)
    where = f"{folder / 'part-0'}: record 1 at byte {8 + len(GOOD)}"
    assert text.endswith(f"{where}: not an OFRecord message: {line} at row 1"), text


def test_an_ofrecord_of_length_zero_is_named(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    ofrecord_file(folder / "part-0", GOOD, b"")
    assert refused("ofrecord", folder, tmp_path).endswith(
        f"{folder / 'part-0'}: record 1 at byte {8 + len(GOOD)}: the record's length is 0 (a "
        "damaged length) at row 1"
    )


def test_a_tfrecord_file_cut_inside_a_header_or_stream_is_named(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / "a.tfrecord"
    example = tfrecord.encode_example({"x": 1})
    tfrecord.write_records(path, [example, example])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 16 - len(example) + 5])  # 5 bytes of the second header
    assert refused("tfrecord", folder, tmp_path).endswith(
        f"{path}: record 1 at byte {16 + len(example)}: the file ends inside a record header at row 1"
    )
    gz = folder / "a.tfrecord"
    gz.write_bytes(gzip.compress(data)[:-12])  # the stream's end cut off
    text = refused("tfrecord", folder, tmp_path)
    assert (
        f"{gz}: record " in text
        and "(uncompressed): the gzip stream is damaged or cut short: " in (text)
    )


def test_a_zlib_tfrecord_stream_without_its_end_is_named(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / "a.tfrecord"
    example = tfrecord.encode_example({"x": 1})
    tfrecord.write_records(path, [example] * 3)
    path.write_bytes(zlib.compress(path.read_bytes())[:-6])
    text = refused("tfrecord", folder, tmp_path)
    assert (
        "(uncompressed): the zlib stream is damaged or cut short: the compressed stream ends "
        in (text)
    )
    assert text.endswith("before its end marker at row 1")


def test_features_that_become_one_column_or_change_kind_are_named(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / "a.tfrecord"
    tfrecord.write_records(
        path, [tfrecord.encode_example({"a-b": 1}), tfrecord.encode_example({"a.b": 2})]
    )
    assert refused("tfrecord", folder, tmp_path).endswith(
        "features 'a-b' and 'a.b' both become column 'a_b'; pass --schema naming one of them"
    )
    tfrecord.write_records(
        path, [tfrecord.encode_example({"x": 1}), tfrecord.encode_example({"x": 1.5})]
    )
    assert refused("tfrecord", folder, tmp_path).endswith(
        f"{path}: feature 'x' is a float_list here and a int64 list in an earlier record; pass "
        "--schema"
    )


def test_an_input_that_is_nothing_or_holds_no_file_is_named(tmp_path):
    assert refused("tfrecord", tmp_path / "nowhere", tmp_path).endswith(
        f"--input {tmp_path / 'nowhere'} is neither a file nor a folder"
    )
    (tmp_path / "in").mkdir()
    assert refused("tfrecord", tmp_path / "in", tmp_path).endswith(
        f"--input {tmp_path / 'in'} holds no file matching --pattern '*.tfrecord*'"
    )


def test_an_image_field_that_is_no_image_feature_is_refused(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    record = ofrecord.encode_ofrecord(
        {"x": ("int64", [1]), "img": ("bytes", [b"\x89PNG"]), "data": ("bytes", [b"d"])}
    )
    ofrecord_file(folder / "part-0", record)
    out = tmp_path / "out"

    def refused_with(field) -> str:
        options = {"input": str(folder), "image_field": field}
        with pytest.raises(recordmill.ConfigError) as caught:
            recordmill.write("ofrecord", out, options=options, workers=0, progress=False)
        assert not out.exists()
        return str(caught.value)

    assert refused_with("nope").endswith(
        "--image-field nope: no such feature (['data', 'img', 'x'])"
    )
    assert refused_with("x").endswith(
        "--image-field x: the feature must hold one bytes value per record, it is {'type': 'int64'}"
    )
    assert refused_with("img").endswith(
        "--image-field img: the image fields ['data'] clash with features of the same name"
    )
