"""The image pipeline on real files made with Pillow: modes, orientation, resizing, bad files."""

from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

import recordmill
from recordmill.inputs import images
from tests.conftest import read_dataset, run_writer


def options(**kw):
    base = dict(
        encode="passthrough",
        size=None,
        resize_mode="shorter-side+center-crop",
        resize=None,
        quality=95,
        verify=False,
        on_bad_input="fail",
    )
    return SimpleNamespace(**{**base, **kw})


def save(path, image, fmt, **kw):
    buffer = io.BytesIO()
    image.save(buffer, fmt, **kw)
    path.write_bytes(buffer.getvalue())
    return path


@pytest.mark.parametrize(
    ("mode", "fmt", "expected"),
    [
        ("L", "PNG", (77, 77, 77)),
        ("P", "PNG", None),
        ("CMYK", "JPEG", None),
        ("RGBA", "PNG", (255, 255, 255)),  # fully transparent pixels become white
        ("I;16", "PNG", (128, 128, 128)),  # 16-bit is scaled, not clipped to white
        ("1", "PNG", (255, 255, 255)),
    ],
)
def test_every_mode_comes_out_rgb(tmp_path, mode, fmt, expected):
    if mode == "I;16":
        image = Image.fromarray(np.full((8, 8), 32896, dtype=np.uint16))
    elif mode == "RGBA":
        image = Image.new("RGBA", (8, 8), (10, 20, 30, 0))
    elif mode == "1":
        image = Image.new("1", (8, 8), 1)
    elif mode == "L":
        image = Image.new("L", (8, 8), 77)
    else:
        image = Image.new("RGB", (8, 8), (200, 30, 60)).convert(mode)
    path = save(tmp_path / f"x.{fmt.lower()}", image, fmt)
    fields = images.encode(path, options(encode="tensor", size=[4]))
    pixels = fields["image"]
    assert pixels.shape == (4, 4, 3) and pixels.dtype == np.uint8
    if expected is not None:
        assert tuple(pixels[0, 0]) == expected
    else:
        assert abs(int(pixels[0, 0, 0]) - 200) < 20 and int(pixels[0, 0, 1]) < 70


def test_exif_orientation_is_applied(tmp_path):
    # A 20 wide x 10 tall image whose EXIF says "rotate 90": it is 10 wide x 20 tall when shown.
    pixels = np.zeros((10, 20, 3), dtype=np.uint8)
    pixels[:, :10] = 255  # left half white
    image = Image.fromarray(pixels)
    exif = image.getexif()
    exif[0x0112] = 6
    path = save(tmp_path / "rotated.jpg", image, "JPEG", exif=exif, quality=100)
    fields = images.encode(path, options(encode="png"))
    decoded = Image.open(io.BytesIO(fields["data"]))
    assert (fields["width"], fields["height"]) == decoded.size == (10, 20)
    assert np.asarray(decoded)[2, 5].mean() > 200  # the white half is now on top
    assert np.asarray(decoded)[17, 5].mean() < 50


def test_draft_mode_decodes_large_photos_small_and_right(tmp_path):
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:1200, 0:1600]
    pixels = np.stack([xx * 255 // 1600, yy * 255 // 1200, np.full_like(xx, 90)], axis=-1).astype(
        np.uint8
    )
    pixels = np.clip(pixels + rng.integers(-3, 4, pixels.shape), 0, 255).astype(np.uint8)
    path = save(tmp_path / "photo.jpg", Image.fromarray(pixels), "JPEG", quality=92)
    fields = images.encode(path, options(encode="tensor", size=[120, 160], resize_mode="stretch"))
    reference = np.asarray(
        Image.open(path).convert("RGB").resize((160, 120), Image.Resampling.BILINEAR)
    )
    assert fields["image"].shape == (120, 160, 3)
    assert np.abs(fields["image"].astype(int) - reference.astype(int)).mean() < 3


def test_shorter_side_then_center_crop(tmp_path):
    pixels = np.zeros((100, 300, 3), dtype=np.uint8)
    pixels[:, 100:200] = (0, 255, 0)  # a green centre third
    path = save(tmp_path / "wide.png", Image.fromarray(pixels), "PNG")
    crop = images.encode(path, options(encode="tensor", size=[50]))["image"]
    assert crop.shape == (50, 50, 3) and (crop[:, 1:-1, 1] > 250).all()  # edges blend a little
    stretched = images.encode(path, options(encode="tensor", size=[50], resize_mode="stretch"))[
        "image"
    ]
    assert stretched[:, :10, 1].max() < 10  # the black left third is still there


def test_jpeg_reencode_with_resize(tmp_path):
    path = save(tmp_path / "big.png", Image.new("RGB", (400, 200), (9, 99, 199)), "PNG")
    fields = images.encode(path, options(encode="jpeg", resize=100, quality=80))
    decoded = Image.open(io.BytesIO(fields["data"]))
    assert decoded.format == "JPEG" and decoded.size == (200, 100)
    assert (fields["height"], fields["width"], fields["channels"]) == (100, 200, 3)


def test_tensor_needs_a_size(tmp_path):
    with pytest.raises(recordmill.RecordmillError, match="--size"):
        images.schema(options(encode="tensor"))


@pytest.fixture
def folder_with_bad_files(tmp_path):
    root = tmp_path / "images"
    good = root / "n01"
    good.mkdir(parents=True)
    for i in range(3):
        save(good / f"ok{i}.jpg", Image.new("RGB", (30, 20), (i * 50, 0, 0)), "JPEG")
    bad = root / "n02"
    bad.mkdir()
    save(bad / "fine.png", Image.new("L", (10, 10), 5), "PNG")
    whole = io.BytesIO()
    Image.fromarray(np.random.default_rng(1).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(
        whole, "JPEG"
    )
    (bad / "truncated.jpg").write_bytes(whole.getvalue()[: len(whole.getvalue()) // 2])
    (bad / "notes.jpg").write_text("this is not an image")
    return root


def test_a_bad_file_fails_the_run_naming_it(folder_with_bad_files, tmp_path):
    result = run_writer(
        "--script",
        "imagenet",
        "--image-dir",
        folder_with_bad_files,
        "--output",
        tmp_path / "out",
        "--encode",
        "tensor",
        "--size",
        "8",
        "--quiet",
    )
    assert result.returncode == 1
    assert (
        "n02/notes.jpg: cannot decode" in result.stderr
        or "n02/truncated.jpg: cannot decode" in result.stderr
    )
    assert not (tmp_path / "out").exists()


def test_passthrough_catches_a_non_image_by_its_signature(folder_with_bad_files, tmp_path):
    result = run_writer(
        "--script",
        "imagenet",
        "--image-dir",
        folder_with_bad_files,
        "--output",
        tmp_path / "out",
        "--quiet",
    )
    assert result.returncode == 1
    assert "notes.jpg: not an image file (starts with b'this is " in result.stderr


@pytest.mark.parametrize("extra", [["--encode", "tensor", "--size", "8"], ["--verify"]])
def test_skip_lists_every_bad_file_and_keeps_the_rest(folder_with_bad_files, tmp_path, extra):
    out = tmp_path / "out"
    result = run_writer(
        "--script",
        "imagenet",
        "--image-dir",
        folder_with_bad_files,
        "--output",
        out,
        "--on-bad-input",
        "skip",
        "--quiet",
        *extra,
    )
    assert result.returncode == 0, result.stderr
    assert "2 inputs rejected, listed by: recordmill rejects" in result.stdout
    lines = recordmill.read_rejects(out)
    assert sorted(line["source"].rsplit("/", 1)[1] for line in lines) == [
        "notes.jpg",
        "truncated.jpg",
    ]
    assert all(line["task_id"] == 1 and "cannot decode" in line["reason"] for line in lines)
    manifest = recordmill.read_manifest(out)
    assert manifest["rejects"] == {"count": 2, "file": "_rejects.parquet"}
    table = read_dataset(out)
    assert sorted(table["file_name"].to_pylist()) == [
        "n01/ok0.jpg",
        "n01/ok1.jpg",
        "n01/ok2.jpg",
        "n02/fine.png",
    ]


@pytest.mark.parametrize(
    ("fmt", "kw"),
    [("TIFF", {"big_tiff": True}), ("ICO", {}), ("JPEG2000", {}), ("TGA", {}), ("PPM", {})],
)
def test_passthrough_takes_every_format_pillow_opens(tmp_path, fmt, kw):
    path = save(tmp_path / f"x.{fmt.lower()}", Image.new("RGB", (16, 16), (9, 8, 7)), fmt, **kw)
    assert images.encode(path, options())["data"] == path.read_bytes()
    (tmp_path / "not.img").write_bytes(b"this is text, not an image at all")
    with pytest.raises(images.BadImage, match="not an image file"):
        images.encode(tmp_path / "not.img", options())


@pytest.mark.parametrize(
    "kw",
    [{"encode": "tensor", "size": [6, 10]}, {"encode": "png", "resize": 5}, {"encode": "jpeg"}],
)
def test_bytes_and_pixels_give_what_a_file_gives(tmp_path, kw):
    """encode_bytes (packed files' records) and encode_pixels (their decoded arrays) are the
    steps of encode after reading the file, or after decoding it."""
    pixels = np.random.default_rng(0).integers(0, 255, (12, 20, 3), dtype=np.uint8)
    path = save(tmp_path / "x.png", Image.fromarray(pixels), "PNG")
    expected = images.encode(path, options(**kw))
    for fields in (
        images.encode_bytes(path.read_bytes(), "record 3", options(**kw)),
        images.encode_pixels(pixels, options(**kw)),
    ):
        assert fields.keys() == expected.keys()
        for name, value in expected.items():
            assert np.array_equal(fields[name], value), name
    with pytest.raises(images.BadImage, match="record 3: not an image file"):
        images.encode_bytes(b"text", "record 3", options())
    kept = images.encode_pixels(pixels, options())
    assert np.array_equal(kept["image"], pixels) and kept["height"] == 12


def test_reject_reasons_are_the_same_in_every_run():
    from recordmill.dataset.rejects import Reject

    a = Reject("x.jpg", "cannot identify image file <_io.BytesIO object at 0x7f3a2b1c0d90>")
    b = Reject("x.jpg", "cannot identify image file <_io.BytesIO object at 0x7f00deadbeef>")
    assert a == b and a.reason == "cannot identify image file <_io.BytesIO object>"


def test_no_draft_decodes_at_full_size_as_pillow_does(tmp_path):
    """Draft decoding (1/2, 1/4, 1/8 scale) is fast but not a full decode; --no-draft is."""
    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)  # detail that scaling shows
    (tmp_path / "images" / "cat").mkdir(parents=True)
    save(tmp_path / "images" / "cat" / "a.jpg", Image.fromarray(pixels), "JPEG", quality=90)
    full = Image.open(tmp_path / "images" / "cat" / "a.jpg").convert("RGB")
    reference = np.asarray(images.fit(full, (60, 80), "shorter-side+center-crop"))
    found = {}
    for no_draft in (False, True):
        out = tmp_path / f"out-{no_draft}"
        recordmill.write(
            "imagenet",
            out,
            options={
                "image_dir": tmp_path / "images",
                **{"encode": "tensor", "size": [60, 80], "no_draft": no_draft},
            },
            progress=False,
        )
        found[no_draft] = next(iter(recordmill.open(str(out))))["image"]
    assert np.array_equal(found[True], reference)
    assert not np.array_equal(found[False], reference)  # the draft's, close but not the same
