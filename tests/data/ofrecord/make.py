"""Writes the OFRecord part files beside it with Google's protobuf runtime and OneFlow's own
``record.proto``, length-prefixed as OneFlow's ``ofrecord`` writer and its docs' ``img2ofrecord.py``
do (``struct.pack("q", len)`` then ``SerializeToString()``); tests/test_ofrecord_plugin.py reads
them (neither protobuf nor OneFlow is needed to run the tests). ``oneflow`` itself has no wheel
for Python 3.11 on PyPI. Written with protobuf 7.36.2 (upb), grpcio-tools 1.85.1 (libprotoc
35.1), Pillow 13.0.0, and record.proto of Oneflow-Inc/oneflow at 25c8978c1c8b. Run again with:

    python -m venv /tmp/venv-oneflow
    /tmp/venv-oneflow/bin/pip install protobuf grpcio-tools Pillow numpy
    /tmp/venv-oneflow/bin/python tests/data/ofrecord/make.py ONEFLOW/oneflow/core/record/record.proto

Files: ``mnist/part-0``, ``mnist/part-1`` as the MNIST example (``images``: a JPEG, ``labels``:
int32); ``kinds/part-0`` (packed number lists, as OneFlow declares them) and ``kinds/part-1``
(the same messages with unpacked lists, from the proto without ``[packed = true]``): every list
kind, single and multi-value features, ``extra`` only in some records. ``expected.json`` holds
every record as protobuf reads it back from the files (bytes in hex).
"""

import io
import json
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent


def compile_proto(source: Path, out: Path, unpacked: bool):
    """record_pb2 from OneFlow's record.proto; ``unpacked`` drops ``[packed = true]`` (and renames
    the package, so that both can be loaded: the package is not on the wire)."""
    text = source.read_text()
    name = "record"
    if unpacked:
        text = re.sub(r"\s*\[packed = true\]", "", text).replace("package oneflow;", "package u;")
        name = "record_unpacked"
    (out / f"{name}.proto").write_text(text)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{out}",
            f"--python_out={out}",
            f"{name}.proto",
        ],
        check=True,
    )
    sys.path.insert(0, str(out))
    return __import__(f"{name}_pb2")


def write(path: Path, messages) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for m in messages:
            data = m.SerializeToString()
            f.write(struct.pack("<q", m.ByteSize()))
            f.write(data)


def jpeg(label: int) -> bytes:
    pixels = np.zeros((28, 28), dtype=np.uint8)
    pixels[4:24, 2 + 2 * label : 5 + 2 * label] = 255  # a bar whose position is the label
    buffer = io.BytesIO()
    Image.fromarray(pixels, "L").save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def mnist(pb, start: int, count: int):
    for i in range(start, start + count):
        label = (i * 7) % 10
        yield pb.OFRecord(
            feature={
                "images": pb.Feature(bytes_list=pb.BytesList(value=[jpeg(label)])),
                "labels": pb.Feature(int32_list=pb.Int32List(value=[label])),
            }
        )


def kinds(pb, count: int):
    for i in range(count):
        feature = {
            "name": pb.Feature(bytes_list=pb.BytesList(value=[f"rec-{i}".encode()])),
            "tokens": pb.Feature(bytes_list=pb.BytesList(value=[b"a" * i, b"\x00\xff", b""])),
            "score": pb.Feature(float_list=pb.FloatList(value=[i / 3])),
            "bbox": pb.Feature(float_list=pb.FloatList(value=[0.1 * i, -2.5, 1e30, 7.0])),
            "weight": pb.Feature(double_list=pb.DoubleList(value=[i / 7, -1e300][: 1 + i % 2])),
            "label": pb.Feature(int32_list=pb.Int32List(value=[i - 2])),
            "ids": pb.Feature(int32_list=pb.Int32List(value=[-(2**31), 2**31 - 1, i])),
            "offset/ns": pb.Feature(int64_list=pb.Int64List(value=[-(2**63) + i, 2**40 * i])),
        }
        if i % 3 == 1:  # only in some records: a nullable column
            feature["extra"] = pb.Feature(int64_list=pb.Int64List(value=[i, -i]))
        yield pb.OFRecord(feature=feature)


def read_back(pb, path: Path) -> list:
    """Every record of a file, as protobuf parses it (the tests' expected values)."""
    data, rows, pos = path.read_bytes(), [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<q", data, pos)
        record = pb.OFRecord.FromString(data[pos + 8 : pos + 8 + length])
        pos += 8 + length
        row = {}
        for name, feature in sorted(record.feature.items()):
            kind = feature.WhichOneof("kind")
            values = list(getattr(feature, kind).value)
            if kind == "bytes_list":
                values = [v.hex() for v in values]
            row[name] = [kind, values]
        rows.append(row)
    return rows


def main(proto: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        packed = compile_proto(proto, Path(tmp), unpacked=False)
        unpacked = compile_proto(proto, Path(tmp), unpacked=True)
        write(HERE / "mnist" / "part-0", mnist(packed, 0, 4))
        write(HERE / "mnist" / "part-1", mnist(packed, 4, 3))
        write(HERE / "kinds" / "part-0", kinds(packed, 5))
        write(HERE / "kinds" / "part-1", kinds(unpacked, 5))
        one = packed.Int32List(value=[1, 2]).SerializeToString()
        assert one == b"\x0a\x02\x01\x02", one  # packed
        assert unpacked.Int32List(value=[1, 2]).SerializeToString() == b"\x08\x01\x08\x02"
        expected = {
            f"{folder}/{part}": read_back(packed, HERE / folder / part)
            for folder in ("mnist", "kinds")
            for part in ("part-0", "part-1")
        }
        (HERE / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
        # The damage the tests make (a record's first byte set to 0x0f: field 1, wire type 7)
        # is refused by protobuf too.
        data = bytearray((HERE / "kinds" / "part-0").read_bytes())
        data[8] = 0x0F
        (length,) = struct.unpack_from("<q", data, 0)
        try:
            packed.OFRecord.FromString(bytes(data[8 : 8 + length]))
        except Exception as e:  # google.protobuf.message.DecodeError
            print("protobuf refuses the damaged record too:", type(e).__name__, e)
        else:
            raise AssertionError("protobuf parsed the damaged record")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
