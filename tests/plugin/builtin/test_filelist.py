"""The filelist plugin and ``recordmill make-list``, on real image files."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from PIL import Image

from recordmill.inputs.filelists import make_list
from recordmill.read.dataset import to_numpy
from tests.conftest import read_dataset, run_writer, write_here


def make_folder(root, classes=("cat", "dog"), per_class=5):
    for c, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            Image.new("RGB", (12 + i, 10), (c * 100, i * 40, 7)).save(
                root / name / f"{name}{i}.png"
            )


def test_make_list_then_write_compare_pixels_and_labels(tmp_path):
    root = tmp_path / "pets"
    make_folder(root)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "recordmill",
            "make-list",
            root,
            tmp_path / "pets",
            "--train-ratio",
            "0.8",
            "--seed",
            "3",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    train = (tmp_path / "pets_train.lst").read_text().splitlines()
    val = (tmp_path / "pets_val.lst").read_text().splitlines()
    assert len(train) == 8 and len(val) == 2
    listed = sorted(line.split("\t")[2] for line in train + val)
    assert listed == sorted(f"{n}/{n}{i}.png" for n in ("cat", "dog") for i in range(5))
    paths = [line.split("\t")[2] for line in train]
    assert paths != sorted(paths)  # shuffled

    out = tmp_path / "out"
    result = run_writer(
        "--script",
        "filelist",
        "--list",
        tmp_path / "pets_train.lst",
        "--root",
        root,
        "--output",
        out,
        "--tasks",
        "3",
        "--workers",
        "2",
        "--encode",
        "tensor",
        "--size",
        "10",
        "12",
        "--resize-mode",
        "stretch",
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    table = read_dataset(out)
    assert table["file_name"].to_pylist() == [line.split("\t")[2] for line in train]
    assert table["index"].to_pylist() == [int(line.split("\t")[0]) for line in train]
    for name, label, image in zip(
        table["file_name"].to_pylist(),
        table["label"].to_pylist(),
        to_numpy(table["image"], table.schema.field("image")),
        strict=True,
    ):
        assert label == (0 if name.startswith("cat") else 1)
        source = np.asarray(
            Image.open(root / name).convert("RGB").resize((12, 10), Image.Resampling.BILINEAR)
        )
        assert np.abs(image.astype(int) - source.astype(int)).max() <= 1


def test_multi_label_im2rec_lines_and_torchrecord_lines(tmp_path):
    make_folder(tmp_path / "img", classes=("a",), per_class=3)
    lst = tmp_path / "multi.lst"
    lst.write_text(
        "7\t1.000000\t0.000000\t3.000000\ta/a0.png\n9\t0.000000\t2.000000\t1.000000\ta/a1.png\n"
    )
    out = tmp_path / "out"
    result = write_here(
        "--script",
        "filelist",
        "--list",
        lst,
        "--root",
        tmp_path / "img",
        "--label-width",
        "3",
        "--output",
        out,
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    table = read_dataset(out)
    assert table["index"].to_pylist() == [7, 9]
    assert to_numpy(table["label"], table.schema.field("label")).tolist() == [[1, 0, 3], [0, 2, 1]]
    assert table["data"].to_pylist()[1] == (tmp_path / "img" / "a" / "a1.png").read_bytes()

    torch_list = tmp_path / "img" / "data_list.txt"
    torch_list.write_text("a/a2.png 4\na/a0.png 2\n")
    out2 = tmp_path / "out2"
    result = write_here("--script", "filelist", "--list", torch_list, "--output", out2, "--quiet")
    assert result.returncode == 0, result.stderr
    table = read_dataset(out2)
    assert table["label"].to_pylist() == [4, 2] and table["index"].to_pylist() == [0, 1]


def test_bad_lines_name_the_file_and_line(tmp_path):
    make_folder(tmp_path / "img", classes=("a",), per_class=1)
    lst = tmp_path / "img" / "bad.lst"
    lst.write_text("0\t1.000000\ta/a0.png\n1\tone\ta/a0.png\n")
    result = write_here(
        "--script", "filelist", "--list", lst, "--output", tmp_path / "o", "--quiet"
    )
    assert result.returncode == 1
    assert "bad.lst:2: could not convert string to float: 'one'" in result.stderr
    lst.write_text("0\t1.500000\ta/a0.png\n")
    result = write_here(
        "--script", "filelist", "--list", lst, "--output", tmp_path / "o", "--quiet"
    )
    assert (
        "bad.lst:1: label (1.5,) is not a whole number; use --label-type float32" in result.stderr
    )


def test_a_missing_image_is_rejected_or_fails(tmp_path):
    make_folder(tmp_path / "img", classes=("a",), per_class=1)
    lst = tmp_path / "img" / "list.lst"
    lst.write_text("0\t0.000000\ta/a0.png\n1\t0.000000\ta/gone.png\n")
    result = write_here(
        "--script", "filelist", "--list", lst, "--output", tmp_path / "o", "--quiet"
    )
    assert result.returncode == 1 and "a/gone.png: cannot read" in result.stderr
    result = write_here(
        "--script",
        "filelist",
        "--list",
        lst,
        "--output",
        tmp_path / "o",
        "--on-bad-input",
        "skip",
        "--quiet",
    )
    assert result.returncode == 0 and "1 input rejected" in result.stdout
    assert read_dataset(tmp_path / "o")["file_name"].to_pylist() == ["a/a0.png"]


def test_make_list_without_split_or_shuffle(tmp_path):
    make_folder(tmp_path / "img")
    (written,) = make_list(tmp_path / "img", tmp_path / "all", shuffle=False)
    lines = written.read_text().splitlines()
    assert lines[0] == "0\t0.000000\tcat/cat0.png" and lines[-1] == "9\t1.000000\tdog/dog4.png"


def test_an_image_option_that_does_nothing_is_an_error(tmp_path):
    (tmp_path / "a.lst").write_text("0\t1\ta.png\n")
    result = write_here(
        *("--script", "filelist", "--list", tmp_path / "a.lst", "--output", tmp_path / "o"),
        *("--encode", "png", "--size", "8"),
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert "--size has no effect with --encode png: it is --encode tensor's size" in lines[0]
