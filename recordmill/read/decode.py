"""Decoders for ``recordmill.open(path, decode={...})``: stored bytes -> what training code wants."""

from __future__ import annotations

import io
import re
import warnings
from typing import Any

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

# "<_io.BytesIO object at 0x7f...>" and the like: a memory address tells a user nothing.
_OBJECT = re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>")
# An image of more pixels than this (about 8,192 x 8,192) is refused before it is decoded: a
# small file can hold a huge image (a 2 MB PNG of 13,300 x 13,300 took minutes and gigabytes).
MAX_PIXELS = 1 << 26


def opened(data: bytes, max_pixels: int | None = MAX_PIXELS) -> Image.Image:
    """An image file's bytes opened (its header read, nothing decoded), refused (``ValueError``)
    where it is not one or holds more than ``max_pixels`` pixels (None: no bound)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ValueError(f"decode.image takes an image file's bytes, got {_kind(data)}")
    try:
        with warnings.catch_warnings():  # Pillow's warning of a large image: refused below
            if max_pixels is not None and max_pixels <= (Image.MAX_IMAGE_PIXELS or max_pixels):
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except Exception as e:  # Pillow raises many kinds for broken files
        raise ValueError(image_error(e, bytes(data[:8]))) from e
    width, height = image.size
    if max_pixels is not None and width * height > max_pixels:
        raise ValueError(
            f"the {image.format or 'image'} is {width:,} x {height:,} pixels, more than "
            f"max_pixels={max_pixels:,}: it is not decoded (give a larger max_pixels= where "
            "images are that large)"
        )
    return image


def pil(data: bytes, max_pixels: int | None = MAX_PIXELS) -> Image.Image:
    """JPEG/PNG/... bytes -> an RGB PIL image, EXIF orientation applied. What is not an image
    file's bytes, does not decode, or is larger than ``max_pixels``, raises ``ValueError``
    saying what (see :func:`image_error`)."""
    image = opened(data, max_pixels)
    try:
        image.load()
        return to_rgb(ImageOps.exif_transpose(image))
    except Exception as e:  # Pillow raises many kinds for broken files
        raise ValueError(image_error(e, bytes(data[:8]))) from e


def image_error(error: BaseException, head: bytes = b"") -> str:
    """Why Pillow could not read an image, in one line that names no Python object:
    ``Pillow cannot read this TIFF: cannot handle this data type: (1, 1, 1), <f8``."""
    if isinstance(error, UnidentifiedImageError):
        return f"Pillow does not recognise these bytes as an image (they begin {head!r})"
    text = _OBJECT.sub("the image", str(error).splitlines()[0] if str(error) else "")
    kind = _format(head)
    return f"Pillow cannot read this {kind}: {text or type(error).__name__}"


# The formats a file's first bytes announce, for a message (a Pillow probe of so few bytes named
# only PPM's).
_SIGNATURES = {
    b"\xff\xd8": "JPEG",
    b"\x89PNG": "PNG",
    b"II*\0": "TIFF",
    b"MM\0*": "TIFF",
    b"GIF8": "GIF",
    b"BM": "BMP",
    **{b"P%d" % n: "PPM" for n in range(1, 7)},  # PBM, PGM and PPM, as Pillow names them
}


def _format(head: bytes) -> str:
    """The image format a file's first bytes announce, by name (or "image")."""
    return next((n for sig, n in _SIGNATURES.items() if head.startswith(sig)), "image")


def _kind(value: Any) -> str:
    """What a value is, for a message: a numpy array by dtype and shape."""
    if isinstance(value, np.ndarray):
        return (
            f"a {value.dtype} array of shape {tuple(value.shape)} (a tensor column is stored "
            "decoded: leave it out of decode=)"
        )
    return type(value).__name__


def image(data: bytes, max_pixels: int | None = MAX_PIXELS) -> np.ndarray:
    """JPEG/PNG/... bytes -> an RGB uint8 array of shape (height, width, 3); an image of more
    than ``max_pixels`` pixels is refused before it is decoded (``functools.partial(image,
    max_pixels=...)`` for larger ones; None: no bound)."""
    # its own, writable: torch makes tensors of it without a warning
    return np.array(pil(data, max_pixels))


def to_rgb(image: Image.Image) -> Image.Image:
    """Any mode as 8-bit RGB: 16-bit and 32-bit grayscale are scaled, not clipped."""
    if image.mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
        values = np.asarray(image).astype(np.float64)
        top = 65535.0 if image.mode.startswith("I;16") or values.max(initial=0) > 255 else 255.0
        image = Image.fromarray(np.clip(values * (255.0 / top), 0, 255).astype(np.uint8), "L")
    elif image.mode == "F":
        image = Image.fromarray(np.clip(np.asarray(image), 0, 255).astype(np.uint8), "L")
    elif image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        # Transparent pixels become white, as viewers show them, not whatever colour they hide.
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(background, rgba)
    return image if image.mode == "RGB" else image.convert("RGB")
