"""The image pipeline: options and one call that turns an image file into a row's fields.

Plugins that read image files share it (``imagenet``, ``filelist``), and any plugin can use it::

    from recordmill.inputs import images

    def add_options(parser):
        images.add_options(parser)

    def schema(options):
        return {"label": {"type": "int32"}, **images.schema(options)}

    def dict_data(task_id, options):
        for path, label in my_files(task_id):
            yield images.row(path, options, label=label)

``--encode passthrough`` (default) stores the file's bytes untouched in ``data``;
``--encode jpeg|png`` re-encodes (after ``--resize S``, shorter side to S) into ``data``;
``--encode tensor --size S`` (or ``--size H W``) decodes to an RGB uint8 HWC array in ``image``.
Decoding applies EXIF orientation, turns every mode (grayscale, CMYK, palette, 16-bit) into RGB,
and uses Pillow's JPEG draft mode to decode at 1/2, 1/4 or 1/8 scale when shrinking (``--no-draft``
decodes at full size: slower, exact). An option that does nothing with the encoding chosen
(``--size`` without ``--encode tensor``...) is an error: :func:`check_options`.
A file that is not an image, or does not decode, fails the run naming it, or with
``--on-bad-input skip`` becomes an entry of the dataset's rejects (``recordmill rejects PATH``).
"""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from recordmill.dataset.rejects import Reject
from recordmill.errors import SKIP_HINT, ConfigError, InputError, RecordmillError
from recordmill.read.decode import image_error, to_rgb

ENCODINGS = ("passthrough", "jpeg", "png", "tensor")
RESIZE_MODES = ("stretch", "shorter-side+center-crop")
EXTENSIONS = ("jpg", "jpeg", "png", "bmp", "gif", "webp", "tif", "tiff")

# File signatures: a cheap check, in passthrough mode, that a file is an image at all.
_SIGNATURES = (
    b"\xff\xd8\xff",
    b"\x89PNG\r\n\x1a\n",
    b"GIF87a",
    b"GIF89a",
    b"BM",
    b"II*\x00",
    b"MM\x00*",
)


class BadImage(InputError):
    """An input file that is not a readable image."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"bad image file {path}: {reason} {SKIP_HINT}")
        self.path = path
        self.reason = reason


def add_options(parser: Any, passthrough: str = "the file's bytes untouched") -> None:
    """The image pipeline's command-line options; ``passthrough`` says, in ``--encode``'s help,
    what that encoding keeps (a plugin whose images are not files says what it does)."""
    parser.add_argument(
        "--encode",
        choices=ENCODINGS,
        default="passthrough",
        help=f"passthrough: {passthrough} (default); jpeg/png: re-encode; "
        "tensor: decoded RGB uint8 HWC arrays of --size",
    )
    parser.add_argument(
        "--size",
        type=int,
        nargs="+",
        metavar="S",
        help="with --encode tensor: S for S x S, or H W",
    )
    parser.add_argument(
        "--resize-mode",
        choices=RESIZE_MODES,
        default="shorter-side+center-crop",
        help="how --size is reached (default: shorter-side+center-crop)",
    )
    parser.add_argument(
        "--resize",
        type=int,
        metavar="S",
        help="with --encode jpeg/png: first resize so that the shorter side is S",
    )
    parser.add_argument(
        "--quality", type=int, default=95, help="JPEG quality for --encode jpeg (default: 95)"
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="with passthrough: decode every image to check it (otherwise only its signature)",
    )
    parser.add_argument(
        "--no-draft",
        action="store_true",
        help="with --encode tensor or --resize: decode each JPEG at full size before resizing "
        "(slower, exact) instead of Pillow's draft mode, which decodes at 1/2, 1/4 or 1/8 scale "
        "when shrinking (fast, and up to about 12/255 mean difference from a full decode)",
    )


# The options whose default says "not given": given with an encoding that does not use them,
# they would do nothing, which is an error (a --quality 95 given with passthrough, the default
# value, cannot be told from no --quality and passes).
_DEFAULTS = {"resize_mode": "shorter-side+center-crop", "quality": 95}


def given_options(options: Any) -> list[str]:
    """The image flags given (set to other than their defaults), for a plugin whose images are
    optional to say that they do nothing."""
    return [
        flag
        for flag, given in (
            ("--encode", options.encode != "passthrough"),
            ("--size", bool(options.size)),
            ("--resize-mode", options.resize_mode != _DEFAULTS["resize_mode"]),
            ("--resize", bool(options.resize)),
            ("--quality", options.quality != _DEFAULTS["quality"]),
            ("--verify", bool(options.verify)),
            ("--no-draft", bool(getattr(options, "no_draft", False))),
        )
        if given
    ]


def check_options(options: Any, pixels: bool = False) -> None:
    """Raise :class:`ConfigError` for an image option that does nothing with the others given
    (``--size 64`` without ``--encode tensor`` would store the files untouched); ``pixels``: the
    plugin's images are decoded pixels, not files (nothing to verify, no JPEG to draft)."""
    encode = options.encode
    decodes = encode == "tensor" or (encode in ("jpeg", "png") and options.resize)
    unused = [
        ("--size", options.size and encode != "tensor", "it is --encode tensor's size"),
        (
            "--resize-mode",
            options.resize_mode != _DEFAULTS["resize_mode"] and encode != "tensor",
            "it says how --encode tensor reaches --size",
        ),
        (
            "--resize",
            options.resize and encode not in ("jpeg", "png"),
            "it resizes for --encode jpeg or png; --encode tensor takes --size",
        ),
        (
            "--quality",
            options.quality != _DEFAULTS["quality"] and encode != "jpeg",
            "it is --encode jpeg's",
        ),
        (
            "--verify",
            options.verify and (pixels or encode != "passthrough"),
            "these images are decoded pixels already"
            if pixels
            else "it decodes passthrough's files; other encodings decode every image anyway",
        ),
        (
            "--no-draft",
            getattr(options, "no_draft", False) and (pixels or not decodes),
            "these images are decoded pixels already"
            if pixels
            else "JPEGs are decoded at a reduced scale only for --encode tensor or --resize",
        ),
    ]
    for flag, given, why in unused:
        if given:
            raise ConfigError(f"{flag} has no effect with --encode {encode}: {why}")


def target_size(options: Any) -> tuple[int, int]:
    """``--size`` as (height, width)."""
    size = options.size
    if not size or len(size) > 2 or min(size) < 1:
        raise RecordmillError("--encode tensor needs --size S or --size H W (positive pixels)")
    return (size[0], size[0]) if len(size) == 1 else (size[0], size[1])


def schema(options: Any) -> dict[str, Any]:
    """The image fields ``row`` produces with these options, for a plugin's ``schema()``."""
    if options.encode == "passthrough":
        return {"data": {"type": "bytes"}}
    decoded = {
        "height": {"type": "int32"},
        "width": {"type": "int32"},
        "channels": {"type": "int32"},
    }
    if options.encode == "tensor":
        height, width = target_size(options)
        return {"image": {"type": "uint8", "shape": [height, width, 3]}, **decoded}
    return {"data": {"type": "bytes"}, **decoded}


def row(path: str | os.PathLike[str], options: Any, **fields: Any) -> dict[str, Any] | Reject:
    """``fields`` plus the image fields of ``path``; a :class:`Reject` for a bad file when
    ``--on-bad-input skip`` (recordmill gives its policy to ``dict_data`` as
    ``options.on_bad_input``)."""
    try:
        return {**fields, **encode(path, options)}
    except BadImage as e:
        if options.get("on_bad_input", "fail") == "skip":
            return Reject(e.path, e.reason)
        raise


def encode(path: str | os.PathLike[str], options: Any) -> dict[str, Any]:
    """The image fields of one file (see :func:`schema`); raises :class:`BadImage`."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise BadImage(path, f"cannot read: {e.strerror or e}") from None
    return encode_bytes(data, path, options)


def encode_bytes(data: bytes, path: str, options: Any) -> dict[str, Any]:
    """The image fields of image bytes already read (a record of a packed file); ``path`` names
    them in errors. Raises :class:`BadImage`."""
    if options.encode == "passthrough":
        if options.verify:
            decode(path, data)
        elif not _looks_like_image(data):
            raise BadImage(path, f"not an image file (starts with {data[:8]!r})")
        return {"data": data}
    if getattr(options, "no_draft", False):
        draft = None
    elif options.encode == "tensor":
        draft = _draft_size(options)
    else:
        draft = (options.resize, options.resize) if options.resize else None
    return encode_pixels(decode(path, data, draft), options)


def encode_pixels(image: Image.Image | np.ndarray, options: Any) -> dict[str, Any]:
    """The image fields of a decoded RGB image (a Pillow image, or a uint8 [H, W, 3] array, as
    packed formats of pixels hold them). ``--encode passthrough`` keeps the pixels untouched, as
    ``image`` of their own size: unlike :func:`schema`'s ``data``, there are no file bytes."""
    if options.encode in ("passthrough", "tensor"):
        if options.encode == "tensor":
            image = fit(_as_image(image), target_size(options), options.resize_mode)
        array = np.asarray(image)
        return {"image": array, "height": array.shape[0], "width": array.shape[1], "channels": 3}
    image = _as_image(image)
    if options.resize:
        image = _shorter_side(image, options.resize)
    buffer = io.BytesIO()
    if options.encode == "jpeg":
        image.save(buffer, "JPEG", quality=options.quality)
    else:
        image.save(buffer, "PNG")
    return {"data": buffer.getvalue(), "height": image.height, "width": image.width, "channels": 3}


def _as_image(image: Image.Image | np.ndarray) -> Image.Image:
    return image if isinstance(image, Image.Image) else Image.fromarray(image)


def _looks_like_image(data: bytes) -> bool:
    """The common signatures at once; anything else Pillow identifies (BigTIFF, ICO, JPEG 2000,
    ...), by its header only: every format Pillow opens passes."""
    if data.startswith(_SIGNATURES) or (data[:4] == b"RIFF" and data[8:12] == b"WEBP"):
        return True
    try:
        with Image.open(io.BytesIO(data)):
            return True
    except Exception:  # Pillow raises many kinds for what it cannot identify
        return False


def _draft_size(options: Any) -> tuple[int, int]:
    height, width = target_size(options)
    if options.resize_mode == "stretch":
        # EXIF orientation may swap the axes after decoding: ask for the larger side both ways.
        side = max(height, width)
        return side, side
    return height, width


def decode(path: str, data: bytes, draft: tuple[int, int] | None = None) -> Image.Image:
    """Decode to an RGB image, EXIF orientation applied; ``draft`` (h, w) lets Pillow decode a
    JPEG at a reduced scale that still covers that size."""
    try:
        image = Image.open(io.BytesIO(data))
        if draft is not None and image.format == "JPEG":
            # Both sides at least the size asked, so a later resize only ever shrinks.
            need = max(draft)
            image.draft("RGB", (need, need))
        image.load()
        image = ImageOps.exif_transpose(image)
        return to_rgb(image)
    except BadImage:
        raise
    except Exception as e:  # Pillow raises many kinds for broken files
        raise BadImage(path, f"cannot decode: {image_error(e, data[:8])}") from None


def fit(image: Image.Image, size: tuple[int, int], mode: str) -> Image.Image:
    """Exactly ``size`` (h, w): stretched, or shorter side scaled then centre-cropped."""
    height, width = size
    if mode == "stretch":
        return image.resize((width, height), Image.Resampling.BILINEAR, reducing_gap=None)
    scale = max(width / image.width, height / image.height)
    scaled_w = max(width, round(image.width * scale))
    scaled_h = max(height, round(image.height * scale))
    left = (scaled_w - width) // 2
    top = (scaled_h - height) // 2
    return image.resize(
        (width, height),
        Image.Resampling.BILINEAR,
        box=(left / scale, top / scale, (left + width) / scale, (top + height) / scale),
    )


def _shorter_side(image: Image.Image, side: int) -> Image.Image:
    scale = side / min(image.width, image.height)
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.BILINEAR)
