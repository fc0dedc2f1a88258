"""The webdataset plugin on shards written by webdataset's own TarWriter, read back value for
value as webdataset's own reader gives them."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image

import recordmill
from tests.conftest import each_refused, read_dataset, write_here

wds = pytest.importorskip(
    "webdataset", reason="its TarWriter writes the shards: pip install webdataset"
)


def jpeg(i: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((8 + i % 5, 10, 3), i * 7 % 256, np.uint8)).save(buf, "JPEG")
    return buf.getvalue()


def write_shards(folder, shards=3, per_shard=7):
    """img2dataset-style image-text pairs: jpg, txt, json and cls per sample; sample 5 of each
    shard has no caption, and the last shard's samples carry a mask (seg.png) too."""
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(shards):
        with wds.TarWriter(str(folder / f"shard-{s:06d}.tar")) as sink:
            for i in range(per_shard):
                n = s * per_shard + i
                sample = {"__key__": f"{n:09d}", "jpg": jpeg(n), "cls": n % 4}
                sample["json"] = json.dumps({"url": f"http://x/{n}.jpg", "width": 10})
                if i != 5:
                    sample["txt"] = f"a photo number {n}"
                sink.write(sample)
    return folder


def expected_rows(pattern):
    """What webdataset's own reader gives, sample by sample (no decoding: bytes per file)."""
    return list(wds.WebDataset(pattern, shardshuffle=False))


def test_samples_become_rows_equal_to_webdataset_s_own_reader(tmp_path):
    folder = write_shards(tmp_path / "shards")
    pattern = str(folder / "shard-{000000..000002}.tar")
    out = tmp_path / "out"
    result = write_here(
        "--script", "webdataset", "--input", pattern, "--output", out, "--workers", "2", "--quiet"
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    table = read_dataset(out).to_pylist()
    theirs = expected_rows(pattern)
    assert len(table) == len(theirs) == 21
    for ours, sample in zip(table, theirs, strict=True):
        assert ours["key"] == sample["__key__"]
        assert ours["data"] == sample["jpg"]  # the image pipeline's column, bytes as stored
        assert ours["cls"] == int(sample["cls"])
        assert json.loads(ours["json"]) == json.loads(sample["json"])
        assert ours["txt"] == (sample["txt"].decode() if "txt" in sample else None)
        assert ours["shard"] == sample["__url__"].rsplit("/", 1)[1]
    fields = {f["name"]: f["type"] for f in recordmill.read_manifest(out)["schema"]["fields"]}
    assert fields == {"key": "string", "shard": "string", "cls": "int64", "json": "string",
                      "txt": "string", "data": "bytes"}  # fmt: skip


def test_a_folder_and_the_image_options(tmp_path):
    folder = write_shards(tmp_path / "shards", shards=2)
    out = tmp_path / "out"
    result = write_here(
        "--script", "webdataset", "--input", folder, "--output", out,
        "--encode", "tensor", "--size", "4", "--quiet",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    table = read_dataset(out)
    assert table.num_rows == 14 and table["image"].type.byte_width == 4 * 4 * 3


def test_an_extension_first_seen_late_is_named_not_dropped(tmp_path):
    folder = write_shards(tmp_path / "shards", shards=1)
    with wds.TarWriter(str(folder / "shard-000001.tar")) as sink:
        sink.write(
            {"__key__": "x", "jpg": jpeg(1), "txt": "t", "cls": 1, "json": "{}", "npy": b"?"}
        )
    result = write_here(
        "--script", "webdataset", "--input", folder, "--output", tmp_path / "out", "--quiet"
    )
    assert result.returncode == 1
    assert "a .npy file, which the first 1000 samples" in result.stderr
    assert "--extensions" in result.stderr and "Traceback" not in result.stderr
    chosen = write_here(
        "--script", "webdataset", "--input", folder, "--output", tmp_path / "chosen",
        "--extensions", "jpg,txt", "--quiet",
    )  # fmt: skip
    assert chosen.returncode == 0, chosen.stderr
    assert read_dataset(tmp_path / "chosen").schema.names == ["key", "shard", "txt", "data"]


def test_a_damaged_shard_is_one_line_or_a_listed_reject(tmp_path):
    folder = write_shards(tmp_path / "shards", shards=2)
    whole = (folder / "shard-000001.tar").read_bytes()
    (folder / "shard-000001.tar").write_bytes(whole[: len(whole) // 2 + 100])
    common = ["--script", "webdataset", "--input", folder, "--quiet"]
    failed = write_here(*common, "--output", tmp_path / "fail")
    assert failed.returncode == 1 and "damaged after" in failed.stderr
    assert "shard-000001.tar" in failed.stderr and "Traceback" not in failed.stderr
    assert not (tmp_path / "fail").exists()
    skipped = write_here(*common, "--output", tmp_path / "skip", "--on-bad-input", "skip")
    assert skipped.returncode == 0, skipped.stderr
    rows = read_dataset(tmp_path / "skip")
    kept = [k for k in rows["key"].to_pylist() if int(k) >= 7]
    assert rows.num_rows == 7 + len(kept) and 0 < len(kept) < 7  # the samples before the damage
    (reject,) = recordmill.read_rejects(tmp_path / "skip")
    assert reject["source"].endswith("shard-000001.tar") and "damaged after" in reject["reason"]


def test_a_brace_pattern_naming_a_missing_shard_is_one_line(tmp_path):
    folder = write_shards(tmp_path / "shards", shards=2)
    result = write_here(
        "--script", "webdataset", "--input", str(folder / "shard-{000000..000003}.tar"),
        "--output", tmp_path / "out", "--quiet",
    )  # fmt: skip
    assert result.returncode == 1
    said = "(expected a .tar file, a folder of them or a brace pattern of them; 2 of 4 missing)"
    assert "no shard" in result.stderr and said in result.stderr


def test_shards_on_s3_by_a_brace_pattern(s3, tmp_path):
    import pyarrow.fs as pafs

    folder = write_shards(tmp_path / "shards", shards=2)
    for shard in sorted(folder.iterdir()):
        fs, path = pafs.FileSystem.from_uri(s3(f"wds/{shard.name}"))
        with fs.open_output_stream(path) as sink:
            sink.write(shard.read_bytes())
    given = s3("wds/shard-{000000..000001}.tar")
    out = tmp_path / "out"
    result = write_here("--script", "webdataset", "--input", given, "--output", out, "--quiet")
    assert result.returncode == 0, result.stderr
    local = expected_rows(str(folder / "shard-{000000..000001}.tar"))
    table = read_dataset(out)
    assert table["key"].to_pylist() == [s["__key__"] for s in local]
    assert table["data"].to_pylist() == [s["jpg"] for s in local]


def test_what_is_not_a_shard_set_is_one_line_each(tmp_path):
    folder = write_shards(tmp_path / "shards", shards=1)
    (tmp_path / "empty").mkdir()
    (tmp_path / "junk.tar").write_bytes(b"not a tar at all" * 40)
    import tarfile

    with tarfile.open(tmp_path / "plain.tar", "w") as tar:  # files with no extension: no sample
        info = tarfile.TarInfo("README")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    cases = [
        (["--input", tmp_path / "empty"], "holds no file matching --pattern '*.tar'"),
        (["--input", folder / "shard-000000.tar", "--pattern", "*.tgz"],
         "picks the shards of a folder only"),
        (["--input", tmp_path / "junk.tar"], "not a readable tar shard"),
        (["--input", tmp_path / "plain.tar"], "no sample in it (files named KEY.EXTENSION)"),
        (["--input", folder, "--image-ext", "png"], "--image-ext png: the samples have"),
    ]  # fmt: skip
    each_refused("webdataset", cases, tmp_path)


def test_a_member_cut_short_and_a_missing_end_are_damage(tmp_path):
    import tarfile

    folder = write_shards(tmp_path / "shards", shards=1)
    whole = (folder / "shard-000000.tar").read_bytes()
    end = whole.rstrip(b"\0")  # every sample whole, no end-of-archive blocks
    (tmp_path / "noend").mkdir()
    (tmp_path / "noend" / "a.tar").write_bytes(end + b"\0" * (-len(end) % 512))
    result = write_here(
        "--script", "webdataset", "--input", tmp_path / "noend", "--output", tmp_path / "o",
        "--quiet",
    )  # fmt: skip
    assert result.returncode == 1 and "bytes of tar, no end-of-archive blocks" in result.stderr
    # the same tar in a whole gzip stream: once read as whole (only a plain tar's end was seen)
    import gzip

    (tmp_path / "noend_gz").mkdir()
    (tmp_path / "noend_gz" / "a.tar.gz").write_bytes(gzip.compress(end + b"\0" * (-len(end) % 512)))
    result = write_here(
        "--script", "webdataset", "--input", tmp_path / "noend_gz", "--pattern", "*.tar.gz",
        "--output", tmp_path / "o_gz", "--quiet",
    )  # fmt: skip
    assert result.returncode == 1 and "bytes of tar, no end-of-archive blocks" in result.stderr
    (tmp_path / "cut").mkdir()
    with tarfile.open(folder / "shard-000000.tar") as tar:
        first = next(m for m in tar.getmembers() if m.size > 100)
    cut = whole[: first.offset_data + first.size // 2]  # inside a file's bytes
    (tmp_path / "cut" / "a.tar").write_bytes(cut)
    result = write_here(
        "--script", "webdataset", "--input", tmp_path / "cut", "--extensions", "jpg",
        "--output", tmp_path / "o2", "--quiet",
    )  # fmt: skip
    assert result.returncode == 1 and "damaged after 0 samples (unexpected end of data)" in (
        result.stderr
    )


def test_brace_patterns_count_up_and_down_as_bash_does():
    import importlib.util

    from recordmill.plugin.manager import BUILTIN_DIR

    spec = importlib.util.spec_from_file_location(
        "wds_plugin", BUILTIN_DIR / "webdataset" / "plugin.py"
    )
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    assert plugin.expand("s-{08..11}.tar") == ["s-08.tar", "s-09.tar", "s-10.tar", "s-11.tar"]
    assert plugin.expand("s-{3..1}-{a,b}") == ["s-3-a", "s-3-b", "s-2-a", "s-2-b", "s-1-a", "s-1-b"]


def test_gzipped_shards_read_as_the_plain_ones(tmp_path):
    """A .tar.gz (or .tgz) shard is told by its first bytes and read whole, its rows those of
    the same shard uncompressed (pyarrow's decompression by the name is not used: tarfile's is)."""
    import gzip

    folder = write_shards(tmp_path / "plain", shards=2)
    zipped = tmp_path / "zipped"
    zipped.mkdir()
    for k, shard in enumerate(sorted(folder.iterdir())):
        name = shard.name.replace(".tar", ".tar.gz" if k == 0 else ".tgz")
        (zipped / name).write_bytes(gzip.compress(shard.read_bytes()))
    rows = {}
    for name, given in (("plain", folder), ("zipped", zipped)):
        result = write_here(
            "--script", "webdataset", "--input", given, "--pattern", "*.t*",
            "--output", tmp_path / f"o-{name}", "--quiet",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        rows[name] = read_dataset(tmp_path / f"o-{name}").drop_columns(["shard"])
    assert rows["zipped"].num_rows == 14 and rows["zipped"].equals(rows["plain"])
