"""Decoders for ``recordmill.open(path, decode={...})``: stored bytes -> what training code wants."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageOps


def pil(data: bytes) -> Image.Image:
    """JPEG/PNG/... bytes -> an RGB PIL image, EXIF orientation applied."""
    image = Image.open(io.BytesIO(data))
    image.load()
    return to_rgb(ImageOps.exif_transpose(image))


def image(data: bytes) -> np.ndarray:
    """JPEG/PNG/... bytes -> an RGB uint8 array of shape (height, width, 3)."""
    return np.asarray(pil(data))


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
