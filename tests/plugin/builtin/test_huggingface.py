"""The huggingface plugin on datasets written by Hugging Face datasets itself (save_to_disk, a
DatasetDict, and the Parquet files of to_parquet as the Hub holds them), read back value for value
as datasets' own reader gives them."""

from __future__ import annotations

import datetime
import io
import json

import numpy as np
import pytest
from PIL import Image

import recordmill
from tests.conftest import each_refused, write_here

datasets = pytest.importorskip("datasets", reason="Hugging Face datasets writes the inputs")


def png(i: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((4, 5, 3), i * 30 % 256, np.uint8)).save(buf, "PNG")
    return buf.getvalue()


def make(n: int = 12) -> datasets.Dataset:
    features = datasets.Features(
        {
            "text": datasets.Value("string"),
            "score": datasets.Value("float32"),
            "label": datasets.ClassLabel(names=["cat", "dog", "bird"]),
            "image": datasets.Image(),
            "ids": datasets.Sequence(datasets.Value("int32")),
            "grid": datasets.Array2D(shape=(2, 3), dtype="float32"),
            "meta": {"source": datasets.Value("string"), "n": datasets.Value("int64")},
            "tags": datasets.Sequence(datasets.ClassLabel(names=["O", "PER", "LOC"])),
            "when": datasets.Value("timestamp[s]"),
        }
    )
    rows = {
        "text": [f"row {i}" if i != 3 else None for i in range(n)],
        "score": [i / 4 for i in range(n)],
        "label": [i % 3 for i in range(n)],
        "image": [{"bytes": png(i), "path": None} for i in range(n)],
        "ids": [list(range(i % 4)) for i in range(n)],
        "grid": [np.full((2, 3), i, np.float32) for i in range(n)],
        "meta": [{"source": f"s{i}", "n": i} for i in range(n)],
        "tags": [[i % 3, (i + 1) % 3] for i in range(n)],
        "when": [datetime.datetime(2026, 1, 1 + i % 28) for i in range(n)],
    }
    return datasets.Dataset.from_dict(rows, features=features)


def check(out, theirs: datasets.Dataset) -> None:
    ds = recordmill.open(str(out))
    rows = ds.rows(range(len(ds)))  # numpy arrays for the tensors
    plain = theirs.cast_column("image", datasets.Image(decode=False))
    assert len(rows) == len(plain)
    names = plain.features["label"].names
    for ours, sample in zip(rows, plain, strict=True):
        assert ours["text"] == sample["text"]
        assert ours["score"] == pytest.approx(sample["score"])
        assert ours["label"] == sample["label"] and ours["label_name"] == names[sample["label"]]
        assert ours["image"] == sample["image"]["bytes"]
        assert list(ours["ids"]) == sample["ids"]
        assert np.array_equal(np.asarray(ours["grid"]), np.asarray(sample["grid"]))
        assert json.loads(ours["meta"]) == sample["meta"]
        assert json.loads(ours["tags"]) == sample["tags"]  # labels of a list: JSON text
        assert ours["when"] == str(sample["when"])


def test_a_save_to_disk_folder_and_a_dataset_dict(tmp_path):
    ds = make()
    ds.save_to_disk(str(tmp_path / "one"), num_shards=2)
    out = tmp_path / "out"
    result = write_here(
        "--script", "huggingface", "--input", tmp_path / "one", "--output", out,
        "--workers", "2", "--quiet",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    check(out, datasets.load_from_disk(str(tmp_path / "one")))
    splits = datasets.DatasetDict({"train": make(6), "test": make(3)})
    splits.save_to_disk(str(tmp_path / "dict"))
    test = write_here(
        "--script", "huggingface", "--input", tmp_path / "dict", "--split", "test",
        "--output", tmp_path / "test", "--quiet",
    )  # fmt: skip
    assert test.returncode == 0, test.stderr
    check(tmp_path / "test", splits["test"])
    wrong = write_here(
        "--script", "huggingface", "--input", tmp_path / "dict", "--split", "dev",
        "--output", tmp_path / "dev", "--quiet",
    )  # fmt: skip
    assert (
        wrong.returncode != 0
        and "--split dev: the dataset's splits are train, test" in wrong.stderr
    )


def test_the_parquet_files_of_a_hub_dataset(tmp_path):
    ds = make()
    (tmp_path / "hub" / "data").mkdir(parents=True)
    ds.select(range(7)).to_parquet(str(tmp_path / "hub" / "data" / "train-00000-of-00002.parquet"))
    ds.select(range(7, 12)).to_parquet(
        str(tmp_path / "hub" / "data" / "train-00001-of-00002.parquet")
    )
    out = tmp_path / "out"
    result = write_here(
        "--script", "huggingface", "--input", tmp_path / "hub", "--output", out, "--quiet"
    )
    assert result.returncode == 0, result.stderr
    check(out, ds)


def test_what_is_not_a_hugging_face_dataset_is_one_line_each(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    make(3).save_to_disk(str(tmp_path / "one"))
    (tmp_path / "empty").mkdir()
    pq.write_table(pa.table({"a": [1]}), tmp_path / "plain.parquet")  # no features kept
    datasets.DatasetDict({"a": make(2), "b": make(2)}).save_to_disk(str(tmp_path / "ab"))
    cases = [
        (["--input", tmp_path / "ab"], "give --split: the dataset's splits are a, b"),
        (["--input", tmp_path / "one", "--split", "train"], "is not a DatasetDict (no dataset_dict.json)"),
        (["--input", tmp_path / "empty"], "holds no save_to_disk dataset (state.json) and no file matching --pattern"),
        (["--input", tmp_path / "plain.parquet"], "no Hugging Face features in its metadata (not a Hub file?)"),
    ]  # fmt: skip
    each_refused("huggingface", cases, tmp_path)


def test_an_image_path_outside_the_dataset_s_folder_is_bad_input(tmp_path):
    """A Hub file's image given by a path (no bytes) is read only inside the dataset's folder:
    a path out of it (a planted ../../ or an absolute one) is bad input, never read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "secret.txt").write_text("not for the output")
    ds = datasets.Dataset.from_dict({"image": [{"bytes": png(1), "path": None}]},
                                    features=datasets.Features({"image": datasets.Image()}))  # fmt: skip
    (tmp_path / "hub").mkdir()
    ds.to_parquet(str(tmp_path / "hub" / "a.parquet"))
    table = pq.read_table(tmp_path / "hub" / "a.parquet")
    planted = pa.array([{"bytes": None, "path": "../secret.txt"}], table.schema.field("image").type)
    pq.write_table(table.set_column(0, "image", planted), tmp_path / "hub" / "a.parquet")
    common = ["--script", "huggingface", "--input", tmp_path / "hub", "--quiet"]
    failed = write_here(*common, "--output", tmp_path / "f")
    assert failed.returncode == 1 and "is outside the dataset's folder" in failed.stderr
    skipped = write_here(*common, "--output", tmp_path / "s", "--on-bad-input", "skip")
    assert skipped.returncode == 0 and len(recordmill.read_rejects(tmp_path / "s")) == 1
    missing = pa.array([{"bytes": None, "path": "gone.png"}], table.schema.field("image").type)
    pq.write_table(table.set_column(0, "image", missing), tmp_path / "hub" / "a.parquet")
    failed = write_here(*common, "--output", tmp_path / "g")
    assert failed.returncode == 1 and "its file 'gone.png' cannot be read (" in failed.stderr
