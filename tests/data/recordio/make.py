"""Writes the RecordIO files beside it with MXNet itself (tests/test_recordio_plugin.py reads them;
MXNet is not needed to run the tests). Written with mxnet 1.9.1 (numpy 1.23.5, opencv-python-headless
4.8.1, Pillow) in a separate virtualenv; to run again:

    python3.11 -m venv /tmp/venv-mxnet
    /tmp/venv-mxnet/bin/pip install mxnet==1.9.1 numpy==1.23.5 "opencv-python-headless<4.9" pillow
    /tmp/venv-mxnet/bin/python tests/data/recordio/make.py

Files (``.idx`` written by ``MXIndexedRecordIO`` beside its ``.rec``):

- ``im2rec.rec`` + ``.idx``: im2rec-style image records, one label each (``pack_img`` for most,
  ``pack`` for record 3, a JPEG whose comment holds the magic number at 4-byte-aligned positions of
  the record, twice in a row, so MXNet writes it as four parts: start, an empty middle, middle, end);
- ``multi.rec`` + ``.idx``: label_width 3 (``pack`` with a list of labels); record 2's first label
  is the float whose bytes are the magic number, so that record is split inside its header;
- ``det.rec`` (no .idx): labels of varying width (detection-style), and one single label;
- ``raw.rec`` (no .idx): ``MXRecordIO.write`` of raw bytes (no image header): empty, lengths 1-5,
  the magic alone, an unaligned magic, a record ending with an aligned magic, three in a row.

``expected.json`` holds what MXNet's own reader gives back for every record (``MXRecordIO.read``
then ``recordio.unpack``; pixels from ``unpack_img`` for the PNG records): the test compares with it.
"""

import io
import json
import struct
from pathlib import Path

import cv2
import mxnet as mx
import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
MAGIC = struct.pack("<I", 0xCED7230A)
rng = np.random.default_rng(16)


def pixels(h=6, w=8):
    return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def jpeg_with_magic_comment():
    """A JPEG whose COM segment, packed after a 24-byte IRHeader, puts the magic at record bytes
    32, 36 and 44 (aligned): SOI (24-25), COM marker (26-27), length (28-29), comment from 30."""
    buffer = io.BytesIO()
    Image.fromarray(pixels()).save(buffer, "JPEG", quality=90)
    jpeg = buffer.getvalue()
    comment = b"xx" + MAGIC + MAGIC + b"yyyy" + MAGIC + b"zz"
    segment = b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment
    return jpeg[:2] + segment + jpeg[2:]


def write_images():
    rec = mx.recordio.MXIndexedRecordIO(str(HERE / "im2rec.idx"), str(HERE / "im2rec.rec"), "w")
    for i in range(6):
        header = mx.recordio.IRHeader(0, float(i % 3), 100 + i, 0)
        if i == 3:
            rec.write_idx(i, mx.recordio.pack(header, jpeg_with_magic_comment()))
        else:
            fmt = ".png" if i % 2 == 0 else ".jpg"
            rec.write_idx(i, mx.recordio.pack_img(header, pixels(), quality=90, img_fmt=fmt))
    rec.close()

    rec = mx.recordio.MXIndexedRecordIO(str(HERE / "multi.idx"), str(HERE / "multi.rec"), "w")
    magic_float = float(np.frombuffer(MAGIC, "<f4")[0])
    for i in range(5):
        labels = [magic_float if i == 2 else i, i + 0.5, -i]
        header = mx.recordio.IRHeader(0, labels, 200 + i, 0)
        rec.write_idx(i, mx.recordio.pack_img(header, pixels(), img_fmt=".png"))
    rec.close()

    rec = mx.recordio.MXRecordIO(str(HERE / "det.rec"), "w")
    widths = [7, 12, 0, 2]
    for i, width in enumerate(widths):
        label = 1.5 if width == 0 else [float(v) / 4 for v in range(i, i + width)]
        header = mx.recordio.IRHeader(0, label, 300 + i, 7)
        rec.write(mx.recordio.pack_img(header, pixels(), img_fmt=".png"))
    rec.close()


RAW = [
    b"",
    b"a",
    b"ab",
    b"abc",
    b"abcd",
    MAGIC,
    b"xyz" + MAGIC + b"unaligned",
    b"abcd" + MAGIC,
    MAGIC * 3 + b"q",
    b"\x00\x00" + MAGIC + struct.pack("<I", 4) + b"fake header, unaligned",
]


def write_raw():
    rec = mx.recordio.MXRecordIO(str(HERE / "raw.rec"), "w")
    for data in RAW:
        rec.write(data)
    rec.close()


def read_back(name):
    """Every record as MXNet reads it, in file order."""
    rec = mx.recordio.MXRecordIO(str(HERE / name), "r")
    rows = []
    while (item := rec.read()) is not None:
        if name == "raw.rec":
            rows.append({"data": item.hex()})
            continue
        header, payload = mx.recordio.unpack(item)
        label = header.label
        row = {
            "flag": int(header.flag),
            "label": [float(v) for v in label] if header.flag > 0 else float(label),
            "id": int(header.id),
            "id2": int(header.id2),
            "data": payload.hex(),
        }
        if payload.startswith(b"\x89PNG"):
            _, image = mx.recordio.unpack_img(item, iscolor=1)
            row["rgb"] = cv2.cvtColor(image, cv2.COLOR_BGR2RGB).tolist()
        rows.append(row)
    rec.close()
    return rows


def continuation_parts(name):
    """(offset, cflag) of the physical records that are parts of a split record."""
    data = (HERE / name).read_bytes()
    parts, pos = [], 0
    while pos < len(data):
        magic, lrec = struct.unpack_from("<II", data, pos)
        assert magic == 0xCED7230A
        if lrec >> 29:
            parts.append((pos, lrec >> 29))
        pos += 8 + ((lrec & (1 << 29) - 1) + 3) // 4 * 4
    return parts


if __name__ == "__main__":
    write_images()
    write_raw()
    expected = {name: read_back(name) for name in ("im2rec.rec", "multi.rec", "det.rec", "raw.rec")}
    expected["idx"] = {
        name: [line.split("\t") for line in (HERE / name).read_text().splitlines()]
        for name in ("im2rec.idx", "multi.idx")
    }
    expected["parts"] = {
        name: continuation_parts(name) for name in ("im2rec.rec", "multi.rec", "raw.rec")
    }
    # MXNet itself must have split the records holding the magic: else the files test nothing.
    assert [f for _, f in expected["parts"]["im2rec.rec"]] == [1, 2, 2, 3], expected["parts"]
    assert [f for _, f in expected["parts"]["multi.rec"]] == [1, 3], expected["parts"]
    assert expected["raw.rec"][5]["data"] == MAGIC.hex()
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print({p.name: p.stat().st_size for p in sorted(HERE.iterdir())})
