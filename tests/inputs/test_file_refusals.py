"""Image lists, images and CSV files that the filelist and csv plugins cannot take, each one line
naming the file (and line) and what is wrong, through ``recordmill.write`` in this process."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

import recordmill
from recordmill.errors import SKIP_HINT


def refused(script, tmp_path, **options) -> str:
    out = tmp_path / "out"
    options = {k: str(v) if hasattr(v, "parent") else v for k, v in options.items()}
    with pytest.raises(recordmill.RecordmillError) as caught:
        recordmill.write(script, out, options=options, workers=0, progress=False)
    assert not out.exists()
    text = str(caught.value)
    assert "\n" not in text
    return text.removesuffix(f" {SKIP_HINT}")


def png(tmp_path, name="a.png"):
    buffer = io.BytesIO()
    Image.new("RGB", (3, 2), (9, 8, 7)).save(buffer, "PNG")
    (tmp_path / name).write_bytes(buffer.getvalue())
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("0\t1\t2\ta.png\n", "expected index, 1 label(s) and a path separated by tabs, got 4 "),
        ("a.png\n", "expected a path and 1 label(s), got 'a.png'"),
    ],
)
def test_a_list_line_of_another_shape_is_named(tmp_path, line, said):
    png(tmp_path)
    (tmp_path / "x.lst").write_text(line)
    text = refused("filelist", tmp_path, list=tmp_path / "x.lst")
    assert f"{tmp_path / 'x.lst'}:1: {said}" in text


def test_a_list_that_cannot_be_read_or_a_width_of_zero_is_refused(tmp_path):
    assert refused("filelist", tmp_path, list=tmp_path / "none.lst").endswith(
        f"--list {tmp_path / 'none.lst'}: cannot read it: No such file or directory"
    )
    (tmp_path / "x.lst").write_text("a.png 0\n")
    assert refused("filelist", tmp_path, list=tmp_path / "x.lst", label_width=0).endswith(
        "--label-width must be at least 1, got 0"
    )


def test_an_image_that_cannot_be_read_or_decoded_is_named(tmp_path):
    (tmp_path / "x.lst").write_text("gone.png 0\n")
    assert f"{tmp_path / 'gone.png'}: cannot read: No such file or directory" in refused(
        "filelist", tmp_path, list=tmp_path / "x.lst"
    )
    data = png(tmp_path)
    (tmp_path / "cut.png").write_bytes(data[:40])  # a PNG's header, then nothing
    (tmp_path / "y.lst").write_text("cut.png 0\n")  # another list: the plugin keeps x.lst's
    assert f"{tmp_path / 'cut.png'}: cannot decode: " in refused(
        "filelist",
        tmp_path,
        list=tmp_path / "y.lst",
        verify=True,  # decoded, not only its signature
    )


def test_a_tensor_without_a_size_is_refused(tmp_path):
    png(tmp_path)
    (tmp_path / "x.lst").write_text("a.png 0\n")
    line = refused("filelist", tmp_path, list=tmp_path / "x.lst", encode="tensor")
    assert line.endswith("--encode tensor needs --size S or --size H W (positive pixels)")


def csv(tmp_path, name, text, schema=None):
    (tmp_path / "in").mkdir(exist_ok=True)
    (tmp_path / "in" / name).write_text(text)
    if schema is not None:
        (tmp_path / "s.yaml").write_text(schema)
    return tmp_path / "in"


def test_a_csv_folder_without_csv_files_is_named(tmp_path):
    folder = csv(tmp_path, "notes.txt", "x")
    assert refused("csv", tmp_path, input=folder).endswith(
        f"--input {folder} holds no .csv, .tsv, .jsonl or .ndjson files (.jsonl.gz, .jsonl.zst too)"
    )


@pytest.mark.parametrize(
    ("declared", "cell", "said"),
    [
        ("ok: bool", "maybe", "not a bool: 'maybe'"),
        ("n: int8", "300", "out of int8's range, -128 to 127"),
    ],
)
def test_a_cell_its_declared_type_cannot_hold_is_named(tmp_path, declared, cell, said):
    name = declared.split(":")[0]
    folder = csv(tmp_path, "t.csv", f"{name}\n1\n{cell}\n", declared)
    line = refused("csv", tmp_path, input=folder / "t.csv", schema=tmp_path / "s.yaml")
    assert f"t.csv:3: column '{name}': " in line and said in line


@pytest.mark.parametrize(
    ("header", "differ"),
    [
        ("x,z", "not in the schema: z; not in the file: y"),
        ("x,y,z", "not in the schema: z"),  # a column more, and none less
        ("x", "not in the file: y"),
    ],
)
def test_a_second_file_of_other_columns_is_named(tmp_path, header, differ):
    csv(tmp_path, "a.csv", "x,y\n1,2\n")
    folder = csv(tmp_path, "b.csv", f"{header}\n{','.join('1' * len(header.split(',')))}\n")
    assert refused("csv", tmp_path, input=folder).endswith(
        f"{folder / 'b.csv'}: the header does not match the schema ({differ})"
    )


def test_mnist_files_that_are_missing_no_idx_or_of_other_counts_are_named(tmp_path):
    from recordmill.inputs.idx import write_idx

    assert refused("mnist", tmp_path, data_dir=tmp_path).endswith(
        f"found neither train-images-idx3-ubyte nor train-images-idx3-ubyte.gz in --data-dir "
        f"{tmp_path}"
    )
    write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((3, 2, 2), np.uint8))
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(2, np.uint8))
    assert refused("mnist", tmp_path, data_dir=tmp_path).endswith(
        "holds (2,): expected N images and N labels"
    )
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(b"PK\3\4 a zip, not idx")
    write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.zeros(3, np.uint8))
    line = refused("mnist", tmp_path, data_dir=tmp_path, split="t10k")
    assert f"{tmp_path / 't10k-images-idx3-ubyte'} is not an idx file (header b'PK" in line


def test_imagenet_folders_and_label_files_that_do_not_fit_are_named(tmp_path):
    assert refused("imagenet", tmp_path, image_dir=tmp_path / "none").endswith(
        f"--image-dir {tmp_path / 'none'} is not a folder"
    )
    (tmp_path / "img" / "n01").mkdir(parents=True)
    png(tmp_path / "img" / "n01")
    (tmp_path / "labels.txt").write_text("n01\n")
    line = refused(
        "imagenet", tmp_path, image_dir=tmp_path / "img", label_file=tmp_path / "labels.txt"
    )
    assert line.endswith(
        f"{tmp_path / 'labels.txt'}:1: expected 'synset label [name]', got 'n01\\n'"
    )
    (tmp_path / "other.txt").write_text("n02 0 dog\n")
    line = refused(
        "imagenet", tmp_path, image_dir=tmp_path / "img", label_file=tmp_path / "other.txt"
    )
    assert line.endswith(f"class folder 'n01' is not in --label-file {tmp_path / 'other.txt'}")


def test_a_task_count_below_zero_is_refused(tmp_path):
    from recordmill.inputs import recordio

    (tmp_path / "in").mkdir()
    recordio.write_records(tmp_path / "in" / "a.rec", [b"x" * 30])
    line = refused("recordio", tmp_path, input=tmp_path / "in", tasks=-1, no_image_header=True)
    assert line.endswith("--tasks must be 0 (split by size) or more, got -1")
