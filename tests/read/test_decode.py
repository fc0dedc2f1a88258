"""read/decode.py on real image files made with Pillow: every mode as 8-bit RGB, the EXIF
orientation applied, the pixel budget at its edge, and each refusal's whole line."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from recordmill.read import decode


def encoded(image: Image.Image, fmt: str = "PNG", **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def test_an_rgb_image_comes_back_as_its_pixels_in_a_writable_array():
    pixels = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    array = decode.image(encoded(Image.fromarray(pixels)))
    assert array.dtype == np.uint8 and array.shape == (5, 7, 3) and array.flags.writeable
    assert (array == pixels).all()
    assert decode.image(bytearray(encoded(Image.fromarray(pixels)))).shape == (5, 7, 3)
    assert decode.image(memoryview(encoded(Image.fromarray(pixels)))).shape == (5, 7, 3)


def test_sixteen_bit_grayscale_is_scaled_to_eight_bits_not_clipped():
    values = np.array([[0, 257, 65535]], dtype=np.uint16)
    image = Image.fromarray(values)
    assert image.mode.startswith("I;16")
    assert decode.image(encoded(image))[0, :, 0].tolist() == [0, 1, 255]


def test_thirty_two_bit_grayscale_scales_only_past_eight_bits():
    low = Image.fromarray(np.array([[0, 100, 255]], dtype=np.int32), "I")
    assert decode.to_rgb(low).getpixel((1, 0)) == (100, 100, 100)
    high = Image.fromarray(np.array([[0, 1000, 65535]], dtype=np.int32), "I")
    assert [decode.to_rgb(high).getpixel((x, 0))[0] for x in range(3)] == [0, 3, 255]


def test_float_images_are_clipped_to_eight_bits():
    image = Image.fromarray(np.array([[-5.0, 100.5, 300.0]], dtype=np.float32), "F")
    assert [decode.to_rgb(image).getpixel((x, 0)) for x in range(3)] == [
        (0, 0, 0),
        (100, 100, 100),
        (255, 255, 255),
    ]


@pytest.mark.parametrize("mode", ["RGBA", "LA"])
def test_transparent_pixels_become_white_and_opaque_ones_keep_their_colour(mode):
    image = Image.new("RGBA", (2, 1), (10, 20, 30, 255))
    image.putpixel((1, 0), (10, 20, 30, 0))
    image = image.convert(mode)
    got = decode.to_rgb(image)
    assert got.mode == "RGB"
    assert got.getpixel((1, 0)) == (255, 255, 255)
    assert got.getpixel((0, 0)) == image.convert("RGB").getpixel((0, 0))


def test_a_palette_with_a_transparent_colour_shows_it_white():
    image = Image.new("P", (2, 1))
    image.putpalette([0, 0, 0, 200, 0, 0] + [0] * 762)
    image.putpixel((1, 0), 1)
    image.info["transparency"] = 0
    got = decode.pil(encoded(image))
    assert got.getpixel((0, 0)) == (255, 255, 255) and got.getpixel((1, 0)) == (200, 0, 0)
    image.info.pop("transparency")
    assert decode.pil(encoded(image)).getpixel((0, 0)) == (0, 0, 0)


def test_the_exif_orientation_is_applied():
    image = Image.new("RGB", (4, 2), (0, 0, 0))
    exif = image.getexif()
    exif[0x0112] = 6  # rotated: shown 90 degrees clockwise
    assert decode.pil(encoded(image, "JPEG", exif=exif)).size == (2, 4)


def test_the_pixel_budget_refuses_past_its_edge_before_decoding():
    data = encoded(Image.new("RGB", (30, 20)))
    assert decode.image(data, max_pixels=600).shape == (20, 30, 3)
    assert decode.image(data, max_pixels=None).shape == (20, 30, 3)
    line = (
        "the PNG is 30 x 20 pixels, more than max_pixels=599: it is not decoded (give a larger "
        "max_pixels= where images are that large)"
    )
    with pytest.raises(ValueError) as refused:
        decode.image(data, max_pixels=599)
    assert str(refused.value) == line
    assert decode.MAX_PIXELS == 1 << 26


def test_what_is_not_an_image_is_named_in_one_line():
    with pytest.raises(ValueError) as refused:
        decode.image("a.png")
    assert str(refused.value) == "decode.image takes an image file's bytes, got str"
    with pytest.raises(ValueError) as refused:
        decode.image(np.zeros((2, 3), np.float32))
    assert str(refused.value) == (
        "decode.image takes an image file's bytes, got a float32 array of shape (2, 3) (a "
        "tensor column is stored decoded: leave it out of decode=)"
    )
    with pytest.raises(ValueError) as refused:
        decode.image(b"not an image")
    expected = "Pillow does not recognise these bytes as an image (they begin b'not an i')"
    assert str(refused.value) == expected


def test_a_cut_file_names_its_format_and_no_python_object():
    jpeg = encoded(Image.new("RGB", (64, 64), (1, 2, 3)), "JPEG")
    with pytest.raises(ValueError) as refused:
        decode.image(jpeg[:300])
    assert str(refused.value).startswith("Pillow cannot read this JPEG: ")
    assert " at 0x" not in str(refused.value)
    error = OSError("cannot read <_io.BytesIO object at 0x7f00aa>\nsecond line")
    assert decode.image_error(error, b"\x89PNG\r\n\x1a\n") == (
        "Pillow cannot read this PNG: cannot read the image"
    )
    assert decode.image_error(OSError(), b"II*\0") == "Pillow cannot read this TIFF: OSError"
    assert decode.image_error(OSError("x"), b"MM\0*") == "Pillow cannot read this TIFF: x"
    assert decode.image_error(OSError("x"), b"\xff\xd8") == "Pillow cannot read this JPEG: x"
    assert decode.image_error(OSError("x"), b"????") == "Pillow cannot read this image: x"


@pytest.mark.parametrize("mode", ["I;16", "I;16B", "I;16L", "I;16N"])
def test_every_sixteen_bit_layout_is_scaled_by_its_range(mode):
    values = np.array([[0, 257, 32768, 65535]], dtype=np.uint16)
    order = ">" if mode == "I;16B" else "<" if mode != "I;16N" else "="
    image = Image.frombytes(mode, (4, 1), values.astype(order + "u2").tobytes())
    assert [decode.to_rgb(image).getpixel((x, 0))[0] for x in range(4)] == [0, 1, 127, 255]


def test_thirty_two_bit_values_past_sixteen_bits_stay_white_and_256_scales():
    image = Image.fromarray(np.array([[256, 100_000, 65535 * 4]], dtype=np.int32), "I")
    assert [decode.to_rgb(image).getpixel((x, 0))[0] for x in range(3)] == [0, 255, 255]


def test_float_values_are_cut_not_rounded():
    image = Image.fromarray(np.array([[100.7, 254.9]], dtype=np.float32), "F")
    assert [decode.to_rgb(image).getpixel((x, 0))[0] for x in range(2)] == [100, 254]


def test_a_palette_with_alpha_shows_transparent_pixels_white():
    image = Image.new("RGBA", (2, 1), (200, 0, 0, 255))
    image.putpixel((1, 0), (200, 0, 0, 0))
    palette = image.convert("PA")
    assert palette.mode == "PA"
    got = decode.to_rgb(palette)
    assert got.getpixel((1, 0)) == (255, 255, 255) and got.getpixel((0, 0)) == (200, 0, 0)


def test_pillow_s_own_bomb_warning_is_silenced_only_under_a_tighter_bound(monkeypatch):
    import warnings

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 600)
    data = encoded(Image.new("RGB", (30, 21)))  # 630 pixels: past Pillow's bound
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would be an error here
        with pytest.raises(ValueError, match="more than max_pixels=600"):
            decode.image(data, max_pixels=600)
    with pytest.warns(Image.DecompressionBombWarning):  # the user's larger bound: Pillow's says
        assert decode.image(data, max_pixels=1000).shape == (21, 30, 3)


def test_a_format_is_named_by_its_signature_and_others_are_an_image():
    for fmt in ("GIF", "BMP", "PNG", "JPEG", "TIFF"):
        head = encoded(Image.new("RGB", (4, 4)), fmt)[:8]
        assert decode.image_error(OSError("x"), head) == f"Pillow cannot read this {fmt}: x"
    for head in (b"P4\n8 1\n\x00", b"P6 1 1 "):
        assert decode.image_error(OSError("x"), head) == "Pillow cannot read this PPM: x"
    webp = b"RIFF\x10\x00\x00\x00"  # a WebP's first bytes, a WAV's too
    assert decode.image_error(OSError("x"), webp) == "Pillow cannot read this image: x"
    assert decode.image_error(OSError("x")) == "Pillow cannot read this image: x"


def test_sixteen_bit_images_scale_by_their_type_not_their_values():
    dark = Image.fromarray(np.array([[0, 255]], dtype=np.uint16))  # 255 of 65,535: near black
    assert [decode.to_rgb(dark).getpixel((x, 0))[0] for x in range(2)] == [0, 0]
    past = Image.fromarray(np.array([[0, 256]], dtype=np.int32), "I")  # past 8 bits: 16-bit
    assert [decode.to_rgb(past).getpixel((x, 0))[0] for x in range(2)] == [0, 0]
