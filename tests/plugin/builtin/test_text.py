"""The text plugin: a real corpus (standard-library sources) tokenized with a BPE tokenizer
trained here, from plain text, JSONL (plain, gzip, zstd) and Parquet, cut into tasks by bytes."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import recordmill
from recordmill.errors import RecordmillError
from tests.conftest import read_dataset, recordmill_here, run_writer

EOS = "<|endoftext|>"


def write(out, **options):
    options = {k.replace("-", "_"): v for k, v in options.items()}
    settings = {k: options.pop(k) for k in ("workers", "on_bad_input", "dedup_key") if k in options}
    return recordmill.write("text", out, options=options, progress=False, **settings)


def reference(tokenizer, texts, eos=True):
    """Each text's ids as the tokenizer gives them one at a time, the end-of-document id after."""
    end = [tokenizer.token_to_id(EOS)] if eos else []
    return [tokenizer.encode(t).ids + end for t in texts]


def test_files_become_token_ids_whatever_the_tasks_and_workers(text_corpus, tmp_path):
    files, tok_path, tokenizer = text_corpus
    texts = [f.read_text() for f in files]
    runs = {}
    for name, task_bytes, workers in (("one", 1 << 30, 1), ("many", 20_000, 2)):
        summary = write(
            tmp_path / name, input=[str(f) for f in files], tokenizer=str(tok_path), eos=EOS,
            task_bytes=task_bytes, workers=workers,
        )  # fmt: skip
        runs[name] = [p["checksum"] for p in summary.manifest["partitions"]]
    assert runs["one"] == runs["many"]  # the same files, whatever the tasks and the workers
    ds = recordmill.open(tmp_path / "many")
    assert ds.schema.field("tokens").type == pa.list_(pa.uint16())
    got = [ds[i]["tokens"] for i in range(len(ds))]
    assert all(isinstance(t, np.ndarray) and t.dtype == np.uint16 for t in got)
    assert [t.tolist() for t in got] == reference(tokenizer, texts)
    assert [ds[i]["length"] for i in range(len(ds))] == [len(t) for t in got]


def test_lines_cut_at_any_byte_are_each_read_once(tmp_path):
    lines = [f"line {i} " + "x" * (i % 13) for i in range(300)] + ["", "last"]
    (tmp_path / "a.txt").write_text("\n".join(lines) + "\n")
    for task_bytes in (1, 7, 64, 1000):
        out = tmp_path / f"out{task_bytes}"
        write(out, input=[str(tmp_path / "a.txt")], documents="line", task_bytes=task_bytes)
        table = read_dataset(out)
        assert table.column("text").to_pylist() == lines, task_bytes
        assert table.column("length").to_pylist() == [len(t) for t in lines]


def test_jsonl_plain_gzip_and_zstd_with_kept_fields(text_corpus, tmp_path):
    _, tok_path, tokenizer = text_corpus
    records = [
        {"text": f"def f{i}(x):\n    return x * {i}\n", "id": i, "lang": "py"} for i in range(50)
    ]
    records[7]["text"] = ""  # an empty document: kept, its tokens the end-of-document id
    (tmp_path / "in").mkdir()
    data = "".join(json.dumps(r) + "\n" for r in records).encode()
    (tmp_path / "in" / "a.jsonl").write_bytes(
        data[: len(data) // 2 + 3] + data[len(data) // 2 + 3 :]
    )
    (tmp_path / "in" / "b.jsonl.gz").write_bytes(gzip.compress(data))
    with pa.CompressedOutputStream(str(tmp_path / "in" / "c.jsonl.zst"), "zstd") as f:
        f.write(data)
    out = tmp_path / "out"
    write(out, input=[str(tmp_path / "in")], tokenizer=str(tok_path), eos=EOS, keep=["id", "lang"],
          keep_text=True, task_bytes=100)  # fmt: skip
    table = read_dataset(out)
    expected = reference(tokenizer, [r["text"] for r in records])
    assert table.column("tokens").to_pylist() == expected * 3
    assert table.column("id").to_pylist() == [r["id"] for r in records] * 3
    assert table.column("lang").to_pylist() == ["py"] * 150
    assert table.column("text").to_pylist()[7] == "" and expected[7] == [tokenizer.token_to_id(EOS)]


def test_parquet_input_by_row_groups(text_corpus, tmp_path):
    _, tok_path, tokenizer = text_corpus
    texts = [f"class C{i}:\n    pass\n" * (i % 4 + 1) for i in range(120)]
    pq.write_table(pa.table({"body": texts, "n": list(range(120))}), tmp_path / "t.parquet",
                   row_group_size=25)  # fmt: skip
    out = tmp_path / "out"
    write(out, input=[str(tmp_path / "t.parquet")], text_field="body", keep=["n"],
          tokenizer=str(tok_path), task_bytes=1)  # fmt: skip
    table = read_dataset(out)
    assert table.column("tokens").to_pylist() == reference(tokenizer, texts, eos=False)
    assert table.column("n").to_pylist() == list(range(120))
    assert recordmill.read_manifest(out)["total_rows"] == 120


def test_a_file_that_is_not_utf8_fails_or_is_a_listed_reject_or_replaced(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "good.txt").write_text("fine text")
    (corpus / "bad.txt").write_bytes(b"caf\xe9 au lait")
    with pytest.raises(RecordmillError, match=r"bad\.txt: not UTF-8 \(byte 0xe9 at offset 3\)"):
        write(tmp_path / "fail", input=[str(corpus)])
    assert not (tmp_path / "fail" / "manifest.json").exists()
    write(tmp_path / "skip", input=[str(corpus)], on_bad_input="skip")
    assert read_dataset(tmp_path / "skip").column("text").to_pylist() == ["fine text"]
    rejects = recordmill.read_rejects(tmp_path / "skip")
    assert [r["source"] for r in rejects] == [str(corpus / "bad.txt")]
    write(tmp_path / "replace", input=[str(corpus)], errors="replace")
    texts = read_dataset(tmp_path / "replace").column("text").to_pylist()
    assert texts == ["caf\ufffd au lait", "fine text"]


def test_a_binary_file_is_bad_input_not_a_document_of_nul_characters(tmp_path):
    """NUL bytes are valid UTF-8, but no text holds one: a file of them (or a line, read line
    by line) is named as binary, not tokenized into a document of nothing."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "good.txt").write_text("fine text\nmore\n")
    (corpus / "zeros.txt").write_bytes(b"\0" * 2000)
    said = r"zeros\.txt: a NUL byte at offset 0; expected text \(this is a binary file\)"
    with pytest.raises(RecordmillError, match=said):
        write(tmp_path / "fail", input=[str(corpus)])
    write(tmp_path / "skip", input=[str(corpus)], on_bad_input="skip")
    assert read_dataset(tmp_path / "skip").column("text").to_pylist() == ["fine text\nmore\n"]
    (corpus / "zeros.txt").write_bytes(b"a line\nx\0y\n")
    write(tmp_path / "lines", input=[str(corpus)], documents="line", on_bad_input="skip")
    assert read_dataset(tmp_path / "lines").column("text").to_pylist() == [
        "fine text",
        "more",
        "a line",
    ]
    assert [r["reason"] for r in recordmill.read_rejects(tmp_path / "lines")] == [
        f"{corpus / 'zeros.txt'}:2: a NUL byte at offset 1; expected text (this is a binary file)"
    ]


def test_patterns_as_glob_users_write_them_and_each_row_names_its_file(tmp_path):
    """--pattern takes several globs, matched below the folder (``**/`` any folders, none too;
    a bare name in any folder); the file column names each row's file as found."""
    root = tmp_path / "repo"
    for name in ("a.py", "pkg/b.py", "pkg/sub/c.py", "pkg/d.md", "e.txt", "pkg/sub/f.txt"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    cases = {
        ("**/*.py",): ["a.py", "pkg/b.py", "pkg/sub/c.py"],
        ("pkg/**/*.py",): ["pkg/b.py", "pkg/sub/c.py"],
        ("*.py", "*.md"): ["a.py", "pkg/b.py", "pkg/d.md", "pkg/sub/c.py"],
        ("pkg/*.??",): ["pkg/b.py", "pkg/d.md"],
        ("[ae].*",): ["a.py", "e.txt"],
    }
    for n, (patterns, expected) in enumerate(cases.items()):
        write(tmp_path / f"out{n}", input=[str(root)], pattern=list(patterns))
        table = read_dataset(tmp_path / f"out{n}")
        assert table.column("text").to_pylist() == expected, patterns
        assert table.column("file").to_pylist() == [f"repo/{name}" for name in expected]
    with pytest.raises(RecordmillError, match=r"holds no file matching --pattern '\*\.c' '\*\.h'"):
        write(tmp_path / "none", input=[str(root)], pattern=["*.c", "*.h"])
    glob = str(tmp_path / "repo" / "pkg" / "*.py")
    write(tmp_path / "g", input=[glob, str(root / "e.txt")])
    assert read_dataset(tmp_path / "g").column("file").to_pylist() == ["pkg/b.py", "e.txt"]


def test_tasks_are_cut_from_the_input_by_default_and_the_output_is_the_same(tmp_path):
    """Without --task-bytes a corpus is cut into about 64 tasks of 256 KiB or more: a 1.5 MB
    file is 6 tasks (every core busy), and the rows are those of one task."""
    lines = [json.dumps({"text": f"document {i} " + "x" * (i % 50)}) for i in range(28_000)]
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    size = (tmp_path / "a.jsonl").stat().st_size
    assert 5 * (256 << 10) < size <= 6 * (256 << 10)
    cut = write(tmp_path / "cut", input=[str(tmp_path / "a.jsonl")], workers=2)
    whole = write(tmp_path / "whole", input=[str(tmp_path / "a.jsonl")], task_bytes=1 << 30)
    assert len(cut.manifest["tasks"]) == 6 and len(whole.manifest["tasks"]) == 1
    assert read_dataset(tmp_path / "cut").equals(read_dataset(tmp_path / "whole"))


def test_the_summary_and_info_count_the_tokens_and_a_missing_eos_is_said(text_corpus, tmp_path):
    files, tok_path, tokenizer = text_corpus
    given = {"input": [str(f) for f in files[:4]], "tokenizer": str(tok_path)}
    with pytest.warns(recordmill.RecordmillWarning, match="--eos is not given"):
        write(tmp_path / "no-eos", **given)
    tokens = sum(len(tokenizer.encode(f.read_text()).ids) + 1 for f in files[:4])
    result = run_writer(
        "--script", "text", "--input", *given["input"], "--tokenizer", given["tokenizer"],
        "--eos", EOS, "--output", tmp_path / "out",
    )  # fmt: skip
    assert result.returncode == 0 and "--eos" not in result.stderr, result.stderr
    assert f"; {tokens:,} tokens (" in result.stdout and " tokens/s)" in result.stdout
    info = recordmill_here("info", str(tmp_path / "out"))
    assert f"tokens: {tokens:,} ids in all" in info.stdout
    assert recordmill.read_manifest(tmp_path / "out")["partitions"][0]["values"] == {
        "tokens": tokens
    }


def test_bad_jsonl_lines_name_their_file_and_line(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "ok"}\n{"body": "no text"}\nnot json\n{"text": 5}\n')
    with pytest.raises(
        RecordmillError, match=r"a\.jsonl:2: has no field 'text' \(its fields: body\)"
    ):
        write(tmp_path / "o", input=[str(path)], task_bytes=3)
    write(tmp_path / "s", input=[str(path)], task_bytes=3, on_bad_input="skip")
    reasons = [r["reason"] for r in recordmill.read_rejects(tmp_path / "s")]
    assert [r.split(": ")[0] for r in reasons] == [f"{path}:{n}" for n in (2, 3, 4)]
    assert "not JSON" in reasons[1] and "field 'text' is a JSON int (5)" in reasons[2]


def test_dedup_on_the_text_hash(tmp_path):
    (tmp_path / "a.txt").write_text("same\nother\nsame\nthird\nother\n")
    out = tmp_path / "out"
    write(out, input=[str(tmp_path / "a.txt")], documents="line", hash=True, dedup_key="text_hash")
    assert read_dataset(out).column("text").to_pylist() == ["same", "other", "third"]


def test_a_function_tokenizer_with_a_wide_vocabulary_is_uint32(tmp_path):
    module = tmp_path / "mytok.py"
    module.write_text(
        "def encode(texts):\n    return [[70_000 + ord(c) % 1000 for c in t] for t in texts]\n"
        "encode.vocab_size = 71_000\n"
    )
    (tmp_path / "a.txt").write_text("ab\nc\n")
    out = tmp_path / "out"
    write(out, input=[str(tmp_path / "a.txt")], documents="line",
          tokenizer=f"{module}:encode", eos="0")  # fmt: skip
    ds = recordmill.open(out)
    assert ds.schema.field("tokens").type == pa.list_(pa.uint32())
    assert [ds[i]["tokens"].tolist() for i in range(2)] == [[70_097, 70_098, 0], [70_099, 0]]


def test_the_command_line_with_a_relative_tokenizer_and_a_glob(text_corpus, tmp_path):
    files, tok_path, _ = text_corpus
    (tmp_path / "tok.json").write_bytes(tok_path.read_bytes())
    (tmp_path / "docs").mkdir()
    for f in files[:3]:
        (tmp_path / "docs" / f.name).write_text(f.read_text())
    result = run_writer(
        "--script", "text", "--input", "docs/*.py", "--tokenizer", "tok.json", "--eos", EOS,
        "--output", "out", "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert recordmill.read_manifest(tmp_path / "out")["total_rows"] == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"eos": "<nope>"}, r"--eos '<nope>' is not a token of --tokenizer .*tokenizer\.json"),
        (
            {"tokenizer": "nomodule"},
            r"--tokenizer 'nomodule' is neither a file nor module:function",
        ),
        ({"tokenizer": "json:nofunction"}, r"json has no function 'nofunction'"),
        ({"tokenizer": None, "eos": "1"}, r"--eos and --vocab-size need a --tokenizer"),
        ({"input": ["/no/such/*.txt"]}, r"--input /no/such/\*\.txt matches no file"),
        ({"keep": ["tokens"]}, r"--keep tokens: a column the text plugin writes itself"),
        ({"task_bytes": 0}, r"--task-bytes must be 1 or more, got 0"),
        ({"input": ["/no/such/file"]}, r"--input /no/such/file is neither a file, a folder nor"),
        ({"tokenizer": "no_such_module_x:f"}, r"cannot import no_such_module_x"),
        ({"input": ["EMPTY"]}, r"--input .*empty holds no file matching a known suffix"),
        ({"input": ["EMPTY"], "pattern": "*.py"}, r"holds no file matching --pattern '\*\.py'"),
        ({"tokenizer": "NOT_JSON"}, r"not a Hugging Face tokenizer\.json .*; expected the file"),
        ({"tokenizer": "TOK:short"}, r"returned 0 sequences for 1 texts; expected one a text"),
        ({"tokenizer": "TOK:wide", "vocab_size": 10}, r"gave the id 120; expected ids from 0 to 9"),
        ({"input": ["GZ_PARQUET"]}, r"a compressed Parquet file; expected a \.parquet file"),
        ({"input": ["PARQUET"]}, r"has no column 'text'; expected the --text-field and --keep"),
        (
            {"input": ["PARQUET"], "text_field": "n"},
            r"column 'n' is int64; expected a string column \(--text-field\)",
        ),
        (
            {"tokenizer": "/no/such.py:f"},
            r"there is no file /no/such\.py; expected a Python file that defines f",
        ),
        ({"keep": ["lang"], "input": ["BLANK"]}, r"--keep: no record to tell its fields' types"),
    ],
)
def test_refusals(text_corpus, tmp_path, options, message):
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    (tmp_path / "empty").mkdir()
    (tmp_path / "not.json").write_text("{}")
    (tmp_path / "tok.py").write_text("def short(texts):\n    return []\n"
                                     "def wide(texts):\n    return [[120] for t in texts]\n")  # fmt: skip
    pq.write_table(pa.table({"n": [1]}), tmp_path / "t.parquet")
    (tmp_path / "t.parquet.gz").write_bytes(b"")
    (tmp_path / "blank.jsonl").write_text("\n\n")
    named = {"EMPTY": str(tmp_path / "empty"), "NOT_JSON": str(tmp_path / "not.json"),
             "TOK": str(tmp_path / "tok.py"), "PARQUET": str(tmp_path / "t.parquet"),
             "GZ_PARQUET": str(tmp_path / "t.parquet.gz"), "BLANK": str(tmp_path / "blank.jsonl")}  # fmt: skip
    for key in ("input", "tokenizer"):
        if isinstance(options.get(key), list):
            options[key] = [named.get(v, v) for v in options[key]]
        elif isinstance(options.get(key), str):
            head, _, tail = options[key].partition(":")
            options[key] = named.get(head, head) + (":" + tail if tail else "")
    given = {"input": [str(tmp_path / "a.jsonl")], "tokenizer": str(text_corpus[1]), **options}
    with pytest.raises(RecordmillError, match=message):
        write(tmp_path / "out", **{k: v for k, v in given.items() if v is not None})
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_the_dataset_is_about_the_token_ids_own_bytes(text_corpus, tmp_path):
    files, tok_path, tokenizer = text_corpus
    summary = write(tmp_path / "out", input=[str(f) for f in files], tokenizer=str(tok_path))
    tokens = sum(len(tokenizer.encode(f.read_text()).ids) for f in files)
    written = sum(p["bytes"] for p in summary.manifest["partitions"])
    assert written <= 1.1 * 2 * tokens, (written, tokens)
