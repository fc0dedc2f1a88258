"""The mnist plugin on idx files written with numpy, gzipped and not."""

from __future__ import annotations

import gzip
import io

import numpy as np
import pytest
from PIL import Image

from recordmill.inputs.idx import read_idx, write_idx
from recordmill.read.dataset import to_numpy
from tests.conftest import read_dataset, run_writer, write_both_ways, write_here


@pytest.fixture
def mnist_dir(tmp_path):
    rng = np.random.default_rng(5)
    pixels = rng.integers(0, 256, size=(103, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=103, dtype=np.uint8)
    folder = tmp_path / "mnist"
    folder.mkdir()
    write_idx(folder / "train-images-idx3-ubyte.gz", pixels)
    write_idx(folder / "train-labels-idx1-ubyte.gz", labels)
    write_idx(folder / "t10k-images-idx3-ubyte", pixels[:7])
    write_idx(folder / "t10k-labels-idx1-ubyte", labels[:7])
    return folder, pixels, labels


def test_idx_files_are_the_real_format(mnist_dir):
    folder, pixels, _ = mnist_dir
    raw = gzip.decompress((folder / "train-images-idx3-ubyte.gz").read_bytes())
    assert raw[:4] == b"\x00\x00\x08\x03"  # ubyte, 3 dimensions
    assert int.from_bytes(raw[4:8], "big") == 103 and len(raw) == 16 + 103 * 784
    assert (read_idx(folder / "train-images-idx3-ubyte.gz") == pixels).all()


def test_tensor_images_and_labels_match_the_source(mnist_dir, tmp_path):
    folder, pixels, labels = mnist_dir
    out = tmp_path / "out"
    result = run_writer(
        "--script",
        "mnist",
        "--data-dir",
        folder,
        "--output",
        out,
        "--partitions",
        "3",
        "--workers",
        "2",
        "--tasks",
        "5",
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    table = read_dataset(out)
    assert table["label"].to_pylist() == labels.tolist()
    assert (to_numpy(table["image"], table.schema.field("image")) == pixels).all()


def test_png_images_and_the_test_split(mnist_dir, tmp_path):
    folder, pixels, labels = mnist_dir
    out = tmp_path / "out"
    result = write_here(
        "--script",
        "mnist",
        "--data-dir",
        folder,
        "--split",
        "t10k",
        "--image-format",
        "png",
        "--output",
        out,
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    table = read_dataset(out)
    assert table["label"].to_pylist() == labels[:7].tolist()
    for data, expected in zip(table["data"].to_pylist(), pixels[:7], strict=True):
        assert (np.asarray(Image.open(io.BytesIO(data))) == expected).all()


def test_missing_and_broken_files_are_named(mnist_dir, tmp_path):
    folder, _, _ = mnist_dir
    result = write_here(
        "--script", "mnist", "--data-dir", folder, "--split", "val", "--output", tmp_path / "o"
    )
    assert result.returncode == 1
    assert "found neither val-images-idx3-ubyte nor val-images-idx3-ubyte.gz" in result.stderr
    (folder / "t10k-labels-idx1-ubyte").write_bytes(b"\x00\x00\x08\x01\x00\x00\x00\x09" + bytes(5))
    result = write_here(
        "--script", "mnist", "--data-dir", folder, "--split", "t10k", "--output", tmp_path / "o"
    )
    assert result.returncode == 1
    assert "t10k-labels-idx1-ubyte: header says (9,) (17 bytes), file has 13" in result.stderr


@pytest.mark.parametrize("image_format", ["tensor", "png"])
def test_rows_go_straight_to_partitions_the_same_as_through_fragments(
    mnist_dir, tmp_path, image_format
):
    folder, _, _ = mnist_dir
    options = {"data_dir": str(folder), "tasks": 5, "image_format": image_format}
    write_both_ways(
        "mnist", tmp_path, options, partitions=3, workers=2, row_group_size=10, progress=False
    )
