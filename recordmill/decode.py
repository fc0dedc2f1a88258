"""Decoders for ``recordmill.open(path, decode={...})``: stored bytes -> what training code wants."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageOps

from recordmill.formats.images import to_rgb


def pil(data: bytes) -> Image.Image:
    """JPEG/PNG/... bytes -> an RGB PIL image, EXIF orientation applied."""
    image = Image.open(io.BytesIO(data))
    image.load()
    return to_rgb(ImageOps.exif_transpose(image))


def image(data: bytes) -> np.ndarray:
    """JPEG/PNG/... bytes -> an RGB uint8 array of shape (height, width, 3)."""
    return np.asarray(pil(data))
