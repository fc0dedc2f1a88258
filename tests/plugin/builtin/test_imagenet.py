"""The built-in imagenet plugin on a small folder of real JPEG and PNG files made with Pillow."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

import recordmill
from recordmill.read.dataset import to_numpy
from tests.conftest import read_dataset, run_writer, write_both_ways, write_here


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
    """Found before any task runs (it was found in a worker, with a traceback)."""
    root, _ = image_folder
    labels = tmp_path / "labels.txt"
    labels.write_text("n01440764 0\n")
    with pytest.raises(recordmill.RecordmillError) as info:
        recordmill.write(
            "imagenet",
            tmp_path / "out",
            options={"image_dir": root, "label_file": labels},
            progress=False,
        )
    assert not isinstance(info.value, recordmill.TaskError)
    assert str(info.value) == (
        f"plugin imagenet: class folder 'n02102040' (and 1 other) is not in --label-file {labels}"
    )
    assert not (tmp_path / ".out.recordmill-partial").exists()
    result = write_here(
        *("--script", "imagenet", "--image-dir", root, "--label-file", tmp_path / "nosuch.txt"),
        *("--output", tmp_path / "o"),
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"recordmill: error: plugin imagenet: --label-file {tmp_path / 'nosuch.txt'}: cannot "
        "read it: No such "
        "file or directory"
    )


def test_extensions_option(image_folder, tmp_path):
    root, made = image_folder
    out = tmp_path / "out"
    recordmill.write(
        "imagenet", out, options={"image_dir": root, "extensions": "png"}, progress=False
    )
    names = read_dataset(out)["file_name"].to_pylist()
    assert names == sorted(n for n in made if n.endswith(".png"))


def test_tensor_encoding_matches_pillow_and_keeps_label_text(image_folder, tmp_path):
    root, made = image_folder
    labels = tmp_path / "labels.txt"
    labels.write_text("n01440764 0 tench, Tinca tinca\nn02102040 1 English springer\nn03000684 2\n")
    out = tmp_path / "out"
    result = write_here(
        "--script",
        "imagenet",
        "--image-dir",
        root,
        "--label-file",
        labels,
        "--output",
        out,
        "--encode",
        "tensor",
        "--size",
        "16",
        "24",
        "--resize-mode",
        "stretch",
        "--workers",
        "2",
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    table = read_dataset(out)
    assert table["text"].to_pylist()[:4] == ["tench, Tinca tinca"] * 4
    assert table["text"].to_pylist()[-1] == ""
    tensors = to_numpy(table["image"], table.schema.field("image"))
    assert tensors.shape == (12, 16, 24, 3)
    assert set(table["channels"].to_pylist()) == {3}
    for name, tensor in zip(table["file_name"].to_pylist(), tensors, strict=True):
        source = Image.open(io.BytesIO(made[name][1]))
        if source.mode in ("RGBA", "CMYK"):
            continue  # composited on white / converted: checked in test_images
        expected = np.asarray(source.convert("RGB").resize((24, 16), Image.Resampling.BILINEAR))
        assert np.abs(tensor.astype(int) - expected.astype(int)).mean() < 2, name


def test_num_images_is_a_seeded_subset(image_folder, tmp_path):
    root, made = image_folder
    chosen = []
    for seed in (1, 1, 2):
        out = tmp_path / f"out{len(chosen)}"
        recordmill.write(
            "imagenet",
            out,
            options={"image_dir": root, "num_images": 5, "subset_seed": seed},
            progress=False,
        )
        chosen.append(read_dataset(out)["file_name"].to_pylist())
    assert len(chosen[0]) == 5 and set(chosen[0]) <= set(made)
    assert chosen[0] == chosen[1] and chosen[0] != chosen[2]
    assert chosen[0] == sorted(chosen[0])  # still in class, then file order


@pytest.mark.parametrize("encode", ["passthrough", "tensor"])
def test_rows_go_straight_to_partitions_the_same_as_through_fragments(
    image_folder, tmp_path, encode
):
    root, _ = image_folder
    options = {"image_dir": str(root), "encode": encode, "size": 8 if encode == "tensor" else None}
    direct = write_both_ways(
        "imagenet", tmp_path, options, partitions=3, workers=2, row_group_size=2, progress=False
    )
    assert [t["rows"] for t in direct.manifest["tasks"]] == [4, 4, 4]


def one_line_error(result):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith("recordmill: error: ")
    return lines[0]


def test_images_outside_class_folders_are_an_error_that_says_what_to_do(image_folder, tmp_path):
    root, made = image_folder
    flat = tmp_path / "flat"
    flat.mkdir()
    for name, (_, data) in made.items():
        (flat / name.split("/")[1]).write_bytes(data)
    line = one_line_error(
        write_here("--script", "imagenet", "--image-dir", flat, "--output", tmp_path / "o")
    )
    assert f"--image-dir {flat} holds 12 images at its top level" in line
    assert "and no class folder" in line and "expected one sub-folder per class" in line
    assert f"recordmill make-list {flat} flat --no-recursive" in line
    assert "--script filelist --list flat.lst" in line
    (root / "stray.png").write_bytes(made["n01440764/n01440764_1.png"][1])
    line = one_line_error(
        write_here("--script", "imagenet", "--image-dir", root, "--output", tmp_path / "o")
    )
    assert "holds 1 image at its top level (stray.png...) beside its 3 class folders" in line
    empty = tmp_path / "empty"
    empty.mkdir()
    line = one_line_error(
        write_here("--script", "imagenet", "--image-dir", empty, "--output", tmp_path / "o")
    )
    assert "holds no class folder; expected one sub-folder per class" in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--size", "64"], "--size has no effect with --encode passthrough"),
        (["--encode", "jpeg", "--size", "64"], "--size has no effect with --encode jpeg"),
        (["--encode", "tensor", "--size", "8", "--resize", "9"], "--resize has no effect"),
        (["--resize-mode", "stretch"], "--resize-mode has no effect with --encode passthrough"),
        (["--encode", "png", "--quality", "80"], "--quality has no effect with --encode png"),
        (["--encode", "jpeg", "--verify"], "--verify has no effect with --encode jpeg"),
        (["--no-draft"], "--no-draft has no effect with --encode passthrough"),
        (["--subset-seed", "3"], "--subset-seed has no effect without --num-images"),
    ],
)
def test_an_option_that_does_nothing_is_an_error(image_folder, tmp_path, flags, said):
    root, _ = image_folder
    result = write_here(
        *("--script", "imagenet", "--image-dir", root, "--output", tmp_path / "o", *flags)
    )
    assert said in one_line_error(result)
