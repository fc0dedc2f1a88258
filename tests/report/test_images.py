"""Image formats by their first bytes, thumbnails, and the mark of an image that does not decode."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from recordmill.report import images, sample


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "GIF", "WEBP", "TIFF", "BMP"])
def test_formats_are_told_by_their_header(fmt):
    data = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(data, fmt)
    assert images.sniff(data.getvalue()) == fmt


def test_other_bytes_are_no_image():
    assert images.sniff(b"RIFF\x00\x00\x00\x00WAVEfmt ") is None
    assert images.sniff(b"hello") is None and images.sniff(b"") is None


def test_thumbnails_fit_the_box_and_keep_the_shape():
    data = io.BytesIO()
    Image.new("RGB", (800, 400), "blue").save(data, "JPEG")
    assert images.thumbnail(data.getvalue()).size == (images.THUMB, images.THUMB // 2)
    small = images.thumbnail(np.zeros((20, 30, 1), np.uint8))
    assert small.size == (30, 20) and small.mode == "RGB"
    assert images.data_uri(small).startswith("data:image/jpeg;base64,")


def test_image_shaped_arrays():
    assert images.is_image_array(np.zeros((28, 28), np.uint8))
    assert images.is_image_array(np.zeros((28, 28, 3), np.uint8))
    assert not images.is_image_array(np.zeros((3, 28, 28), np.uint8))
    assert not images.is_image_array(np.zeros((28, 28), np.float32))


def test_an_image_that_does_not_decode_is_a_cell_with_the_reason():
    cell = sample._cell("data", b"\x89PNG\r\n\x1a\n" + b"\x00" * 30, picture=True)
    assert cell.image is None and cell.error and "38 bytes" in cell.text
    assert sample._cell("data", None, picture=True).text == "null"


def test_a_low_range_uint8_tensor_is_shown_with_its_contrast_stretched():
    """sklearn's digits are stored as 0-16: drawn as they are they are almost black."""
    import numpy as np

    from recordmill.report import images
    from recordmill.report.sample import _cell

    digit = (np.arange(64, dtype=np.uint8).reshape(8, 8) % 17).astype(np.uint8)
    thumb = np.asarray(images.thumbnail(digit))
    assert thumb.max() >= 250  # its 16 drawn as white
    plain = (np.arange(64, dtype=np.uint8).reshape(8, 8) * 4).astype(np.uint8)
    assert np.asarray(images.thumbnail(plain)).max() == plain.max()  # a full range: as it is
    assert _cell("image", digit, picture=True).text == "values 0-16, contrast stretched"
    assert _cell("image", plain, picture=True).text == ""


def bomb(width: int, height: int) -> bytes:
    """A PNG whose header says ``width`` x ``height``: a few bytes that Pillow, decoding them,
    would make a canvas of (a decompression bomb's header; its pixels hardly matter)."""
    import struct
    import zlib

    buffer = io.BytesIO()
    Image.new("L", (1, 1)).save(buffer, "PNG")
    data = bytearray(buffer.getvalue())
    ihdr = data.index(b"IHDR")
    data[ihdr + 4 : ihdr + 12] = struct.pack(">II", width, height)
    crc = zlib.crc32(bytes(data[ihdr : ihdr + 17]))
    data[ihdr + 17 : ihdr + 21] = struct.pack(">I", crc)
    return bytes(data)


def test_an_image_over_the_pixel_budget_is_refused_before_it_is_decoded(monkeypatch):
    """13,300 x 13,300 (under Pillow's own limit) took 107 s and 3.5 GB for one cell: refused
    by its header, in show's cells and in decode.image, no pixel decoded."""
    import recordmill.decode

    huge, over, under = bomb(13_300, 13_300), bomb(100, 11), bomb(100, 10)
    loads = []
    real = Image.Image.load
    monkeypatch.setattr(Image.Image, "load", lambda self: loads.append(self.size) or real(self))
    line = (
        "the PNG is 13,300 x 13,300 pixels, more than max_pixels=67,108,864: it is not decoded "
        "(give a larger max_pixels= where images are that large)"
    )
    with pytest.raises(ValueError) as caught:
        recordmill.decode.image(huge)
    assert str(caught.value) == line
    cell = sample._cell("photo", huge, picture=True)
    assert cell.error == line[:117] + "..." and cell.image is None
    assert loads == []  # nothing decoded
    with pytest.raises(ValueError, match="max_pixels=1,000"):
        recordmill.decode.image(over, max_pixels=1000)
    assert loads == []
    with pytest.raises(ValueError, match="Pillow cannot read this PNG"):  # decoded: its pixels
        recordmill.decode.image(under, max_pixels=1000)  # are not all there
    assert loads[0] == (100, 10)
