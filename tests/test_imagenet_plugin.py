"""The built-in imagenet plugin on a small folder of real JPEG and PNG files made with Pillow."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

import recordmill
from tests.conftest import read_dataset, run_writer


@pytest.fixture
def image_folder(tmp_path):
    """Three class folders of real images in odd modes and sizes, plus files to be ignored."""
    root = tmp_path / "images"
    rng = np.random.default_rng(0)
    made = {}
    for c, synset in enumerate(["n01440764", "n02102040", "n03000684"]):
        folder = root / synset
        folder.mkdir(parents=True)
        for i, (mode, ext) in enumerate(
            [("RGB", "JPEG"), ("L", "png"), ("RGBA", "png"), ("CMYK", "jpg")]
        ):
            size = (int(rng.integers(5, 40)), int(rng.integers(5, 40)))
            pixels = rng.integers(0, 256, size=(size[1], size[0], len(mode)), dtype=np.uint8)
            image = (
                Image.fromarray(pixels.squeeze(), mode=mode)
                if mode != "CMYK"
                else Image.new("CMYK", size, (c, i, 0, 9))
            )
            buffer = io.BytesIO()
            image.save(buffer, "PNG" if ext == "png" else "JPEG")
            name = f"{synset}_{i}.{ext}"
            (folder / name).write_bytes(buffer.getvalue())
            made[f"{synset}/{name}"] = (c, buffer.getvalue())
        (folder / "notes.txt").write_text("not an image")
    return root, made


def test_passthrough_keeps_every_byte_and_label(image_folder, tmp_path):
    root, made = image_folder
    out = tmp_path / "out"
    result = run_writer(
        "--script",
        "imagenet",
        "--image-dir",
        root,
        "--output",
        out,
        "--partitions",
        "2",
        "--workers",
        "2",
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    table = read_dataset(out)
    assert sorted(table["file_name"].to_pylist()) == sorted(made)
    assert table["file_name"].to_pylist() == sorted(made)  # class order, then name order
    for name, label, data in zip(
        table["file_name"].to_pylist(),
        table["label"].to_pylist(),
        table["data"].to_pylist(),
        strict=True,
    ):
        assert (label, data) == made[name]
    decoded = Image.open(io.BytesIO(table["data"][1].as_py()))
    assert decoded.mode == "L"


def test_labels_from_a_label_file(image_folder, tmp_path):
    root, _ = image_folder
    labels = tmp_path / "labels.txt"
    labels.write_text("n01440764 7 tench\nn02102040 3\n\nn03000684 0\n")
    out = tmp_path / "out"
    recordmill.write(
        "imagenet", out, options={"image_dir": root, "label_file": labels}, progress=False
    )
    table = read_dataset(out)
    by_synset = dict(zip(table["synset"].to_pylist(), table["label"].to_pylist(), strict=True))
    assert by_synset == {"n01440764": 7, "n02102040": 3, "n03000684": 0}


def test_a_class_missing_from_the_label_file_names_the_folder(image_folder, tmp_path):
    root, _ = image_folder
    labels = tmp_path / "labels.txt"
    labels.write_text("n01440764 0\nn02102040 1\n")
    with pytest.raises(
        recordmill.TaskError, match=r"task 2 failed.*'n03000684' is not in --label-file"
    ):
        recordmill.write(
            "imagenet",
            tmp_path / "out",
            options={"image_dir": root, "label_file": labels},
            progress=False,
        )


def test_extensions_option(image_folder, tmp_path):
    root, made = image_folder
    out = tmp_path / "out"
    recordmill.write(
        "imagenet", out, options={"image_dir": root, "extensions": "png"}, progress=False
    )
    names = read_dataset(out)["file_name"].to_pylist()
    assert names == sorted(n for n in made if n.endswith(".png"))
