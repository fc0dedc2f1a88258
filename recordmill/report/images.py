"""Images on the page: formats told by their first bytes, thumbnails as ``data:`` URIs.

A thumbnail is the image as RGB (EXIF orientation applied, transparency on white, 16-bit gray
scaled: :func:`recordmill.read.decode.to_rgb`; a JPEG decoded at a reduced scale that is still
at least twice the thumbnail's size), shrunk with Pillow's ``Image.thumbnail`` to fit
:data:`THUMB` x :data:`THUMB` pixels (never enlarged), saved as JPEG of quality
:data:`THUMB_QUALITY` without chroma subsampling. Arrays of uint8 of shape ``[H, W]``, ``[H, W, 1]``, ``[H, W, 3]`` or
``[H, W, 4]`` are images too, taken as they are.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from recordmill.read.decode import MAX_PIXELS, image_error, opened, to_rgb

THUMB = 160
THUMB_QUALITY = 85
# (offset, magic bytes, format) in the order they are tried.
SIGNATURES = (
    (0, b"\xff\xd8\xff", "JPEG"),
    (0, b"\x89PNG\r\n\x1a\n", "PNG"),
    (0, b"GIF87a", "GIF"),
    (0, b"GIF89a", "GIF"),
    (8, b"WEBP", "WEBP"),  # after RIFF and the size
    (0, b"II*\x00", "TIFF"),
    (0, b"MM\x00*", "TIFF"),
    (0, b"BM", "BMP"),
    (4, b"ftypavif", "AVIF"),
    (4, b"ftypheic", "HEIC"),
)


def sniff(data: bytes) -> str | None:
    """The image format that ``data`` starts like, or None."""
    for offset, magic, name in SIGNATURES:
        if data[offset : offset + len(magic)] == magic and (name != "WEBP" or data[:4] == b"RIFF"):
            return name
    return None


def is_image_array(value: Any) -> bool:
    """A uint8 array shaped like an image (gray, gray with a channel axis, RGB, RGBA)."""
    if not isinstance(value, np.ndarray) or value.dtype != np.uint8:
        return False
    if value.ndim == 2:
        return min(value.shape) >= 2
    return value.ndim == 3 and value.shape[2] in (1, 3, 4) and min(value.shape[:2]) >= 2


# A uint8 tensor whose largest value is under this is shown with its contrast stretched.
LOW_RANGE = 64


def thumbnail(value: bytes | np.ndarray, max_pixels: int | None = MAX_PIXELS) -> Image.Image:
    """An RGB image at most THUMB pixels on each side, from encoded bytes or a uint8 array;
    raises (PIL's own errors, OSError, ValueError) what does not decode, or holds more than
    ``max_pixels`` pixels (refused before it is decoded)."""
    if isinstance(value, np.ndarray):
        array = value[:, :, 0] if value.ndim == 3 and value.shape[2] == 1 else value
        image = Image.fromarray(np.ascontiguousarray(stretched(array)[0]))
    else:
        image = opened(value, max_pixels)
        image.draft(None, (2 * THUMB, 2 * THUMB))  # a large JPEG decoded at 1/2, 1/4 or 1/8
        image.load()
        image = ImageOps.exif_transpose(image)
    image = to_rgb(image)
    image.thumbnail((THUMB, THUMB))
    return image


def stretched(array: np.ndarray) -> tuple[np.ndarray, int | None]:
    """A uint8 image whose values use a small part of 0-255 (digits stored as 0-16) scaled up
    to the whole range, and the top value it had (None: shown as it is); else as it is."""
    top = int(array.max(initial=0))
    if array.dtype != np.uint8 or top == 0 or top >= LOW_RANGE:
        return array, None
    return (array.astype(np.uint16) * 255 // top).astype(np.uint8), top


def data_uri(image: Image.Image) -> str:
    """A JPEG ``data:`` URI of an image."""
    buffer = io.BytesIO()
    # 4:4:4: chroma at full resolution, so colour edges (a class's marks, a digit) stay sharp.
    image.save(buffer, "JPEG", quality=THUMB_QUALITY, subsampling=0)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def png_uri(data: bytes) -> str:
    """A ``data:`` URI of PNG bytes (the charts)."""
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def decode_error(error: BaseException, value: Any = b"") -> str:
    """Why an image did not decode, in one short line that names no Python object."""
    head = bytes(value[:8]) if isinstance(value, (bytes, bytearray, memoryview)) else b""
    text = str(error) if "max_pixels=" in str(error) else image_error(error, head)
    return text if len(text) <= 120 else text[:117] + "..."
