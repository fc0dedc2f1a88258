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
