"""The csv plugin: CSV with quoting and bad rows, JSON Lines, schemas from YAML or inferred."""

from __future__ import annotations

import csv
import json

import pytest

import recordmill
from recordmill.read.dataset import to_numpy
from tests.conftest import read_dataset, recordmill_here, run_writer, write_here

ROWS = [
    {"id": 1, "name": 'say "hi", then go', "score": 0.5, "ok": True},
    {"id": 2, "name": "two\nlines", "score": -1.25, "ok": False},
    {"id": 3, "name": "", "score": 3.0, "ok": True},
    {"id": 4, "name": "comma, inside", "score": 1e-3, "ok": False},
    {"id": 5, "name": "plain", "score": 7.0, "ok": True},
]


def write_csv(path, rows, header=("id", "name", "score", "ok")):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for row in rows:
            writer.writerow([row[h] for h in header])


def test_quoted_csv_with_inferred_types(tmp_path):
    write_csv(tmp_path / "a.csv", ROWS)
    out = tmp_path / "out"
    result = run_writer(
        "--script", "csv", "--input", tmp_path / "a.csv", "--output", out, "--quiet"
    )
    assert result.returncode == 0, result.stderr
    table = read_dataset(out)
    assert table.to_pylist() == ROWS
    types = {f["name"]: f["type"] for f in recordmill.read_manifest(out)["schema"]["fields"]}
    assert types == {"id": "int64", "name": "string", "score": "float64", "ok": "bool"}


def test_a_folder_split_into_blocks_keeps_the_order(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    write_csv(folder / "1.csv", ROWS[:3])
    write_csv(folder / "2.csv", ROWS[3:])
    (folder / "schema.yaml").write_text("id: int32\nname: string\nscore: float32\nok: bool\n")
    out = tmp_path / "out"
    result = write_here(
        "--script",
        "csv",
        "--input",
        folder,
        "--schema",
        folder / "schema.yaml",
        "--rows-per-task",
        "2",
        "--output",
        out,
        "--workers",
        "2",
        "--partitions",
        "2",
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    manifest = recordmill.read_manifest(out)
    assert [t["rows"] for t in manifest["tasks"]] == [2, 1, 2]
    table = read_dataset(out)
    assert table["id"].to_pylist() == [1, 2, 3, 4, 5]
    assert table["name"].to_pylist()[1] == "two\nlines"
    assert str(table.schema.field("score").type) == "float"


def test_bad_rows_name_file_line_and_column(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text('id,score\n1,0.5\n2,"two\nlines"\n3\nx,1.0\n')
    (tmp_path / "s.yaml").write_text("id: int32\nscore: float32\n")
    args = ["--script", "csv", "--input", path, "--schema", tmp_path / "s.yaml", "--quiet"]
    result = write_here(*args, "--output", tmp_path / "o")
    assert result.returncode == 1
    assert "bad.csv:3: column 'score': expected float32, got 'two\\nlines'" in result.stderr
    result = write_here(*args, "--output", tmp_path / "o", "--on-bad-input", "skip")
    assert result.returncode == 0, result.stderr
    assert read_dataset(tmp_path / "o")["id"].to_pylist() == [1]
    rejects = recordmill.read_rejects(tmp_path / "o")
    assert [r["source"].rsplit(":", 1)[1] for r in rejects] == ["3", "5", "6"]
    assert "expected 2 fields (id, score), got 1" in rejects[1]["reason"]
    assert "column 'id': expected int32, got 'x'" in rejects[2]["reason"]


def test_a_header_that_does_not_match_the_schema(tmp_path):
    write_csv(tmp_path / "a.csv", ROWS)
    (tmp_path / "s.yaml").write_text("id: int32\nlabel: int32\n")
    result = write_here(
        "--script",
        "csv",
        "--input",
        tmp_path / "a.csv",
        "--schema",
        tmp_path / "s.yaml",
        "--output",
        tmp_path / "o",
        "--quiet",
    )
    assert result.returncode == 1
    assert "names ['label'], which the header of" in result.stderr
    assert "(its columns: ['id', 'name', 'score', 'ok'])" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_json_lines_with_arrays_and_a_bad_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    lines = [json.dumps({"id": i, "vec": [i, i + 1, i + 2]}) for i in range(4)]
    path.write_text("\n".join([*lines[:2], "{not json", *lines[2:]]) + "\n")
    (tmp_path / "s.yaml").write_text("id: int64\nvec: {type: float32, shape: [3]}\n")
    args = ["--script", "csv", "--input", path, "--schema", tmp_path / "s.yaml", "--quiet"]
    result = write_here(*args, "--output", tmp_path / "o")
    assert result.returncode == 1 and "rows.jsonl:3: not valid JSON" in result.stderr
    result = write_here(
        *args, "--output", tmp_path / "o", "--on-bad-input", "skip", "--rows-per-task", "2"
    )
    assert result.returncode == 0, result.stderr
    table = read_dataset(tmp_path / "o")
    assert table["id"].to_pylist() == [0, 1, 2, 3]
    assert to_numpy(table["vec"], table.schema.field("vec")).tolist()[3] == [3.0, 4.0, 5.0]


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_a_json_line_that_is_not_utf8_is_that_lines_reject(tmp_path, suffix):
    """Once the task's end (UnicodeDecodeError), now bad input naming the file, line and byte."""
    import gzip

    raw = b'{"id": 0, "name": "a"}\n{"id": 1, "name": "caf\xe9"}\n{"id": 2, "name": "b"}\n'
    path = tmp_path / f"rows{suffix}"
    path.write_bytes(gzip.compress(raw) if suffix.endswith(".gz") else raw)
    args = ["--script", "jsonl", "--input", path, "--quiet"]
    failed = write_here(*args, "--output", tmp_path / "o")
    said = f"rows{suffix}:2: not UTF-8 text: byte 23 of the line is 0xe9"
    assert failed.returncode == 1 and said in failed.stderr, failed.stderr
    kept = write_here(*args, "--output", tmp_path / "s", "--on-bad-input", "skip")
    assert kept.returncode == 0, kept.stderr
    assert read_dataset(tmp_path / "s")["id"].to_pylist() == [0, 2]
    (reject,) = recordmill.read_rejects(tmp_path / "s")
    assert reject["source"] == f"{path}:2" and said.split(":", 2)[2].strip() in reject["reason"]


def test_a_csv_file_with_a_byte_order_mark_reads_from_its_first_record(tmp_path):
    """The header's end is where the records start: the bytes read, its mark included."""
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfid,name\n1,a\n2,b\n3,c\n")
    args = ["--script", "csv", "--input", path, "--output", tmp_path / "o", "--quiet"]
    result = write_here(*args, "--rows-per-task", "1")
    assert result.returncode == 0, result.stderr
    table = read_dataset(tmp_path / "o")
    assert table.schema.names == ["id", "name"] and table["name"].to_pylist() == ["a", "b", "c"]


def test_a_csv_line_that_is_not_utf8_is_one_line_naming_it(tmp_path):
    """Never text with lone surrogates in a cell (which Arrow refuses later, naming nothing)."""
    path = tmp_path / "t.csv"
    path.write_bytes(b"id,name\n1,a\n2,caf\xe9\n")
    result = write_here("--script", "csv", "--input", path, "--output", tmp_path / "o", "--quiet")
    assert (
        result.returncode == 1
        and "t.csv:3: not UTF-8 text: byte 6 of the line is 0xe9" in result.stderr
    )
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


@pytest.mark.parametrize("name", ["x.tsv"])
def test_tsv_and_empty_cells_become_nulls(tmp_path, name):
    (tmp_path / name).write_text("a\tb\n1\t\n\t2.5\n")
    out = tmp_path / "out"
    result = write_here("--script", "csv", "--input", tmp_path / name, "--output", out, "--quiet")
    assert result.returncode == 0, result.stderr
    assert read_dataset(out).to_pylist() == [{"a": 1, "b": None}, {"a": None, "b": 2.5}]


def test_column_names_become_field_names(tmp_path):
    (tmp_path / "iris.csv").write_text("Sepal Length,petal.width,2nd\n5.1,0.2,a\n4.9,0.4,b\n")
    (tmp_path / "iris.yaml").write_text(
        "Sepal Length: float32\npetal_width: float64\n2nd: string\n"
    )
    out = tmp_path / "out"
    args = ("--script", "csv", "--input", tmp_path / "iris.csv", "--quiet")
    result = write_here(*args, "--output", out, "--schema", tmp_path / "iris.yaml")
    assert result.returncode == 0, result.stderr
    table = read_dataset(out)
    assert table.column_names == ["Sepal_Length", "petal_width", "_2nd"]
    assert table["petal_width"].to_pylist() == [0.2, 0.4] and table["_2nd"].to_pylist() == [
        "a",
        "b",
    ]
    (tmp_path / "twice.csv").write_text("a b,a_b\n1,2\n")
    result = write_here(*args[:3], tmp_path / "twice.csv", "--output", tmp_path / "o2", "--quiet")
    assert result.returncode == 1 and "names a column twice" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_empty_cell_of_a_nullable_list_is_none(tmp_path):
    (tmp_path / "t.csv").write_text('id,tags\n1,"[""a"", ""b""]"\n2,\n')
    (tmp_path / "t.yaml").write_text(
        "id: int32\ntags: {type: string, shape: [-1], nullable: true}\n"
    )
    args = ("--script", "csv", "--input", tmp_path / "t.csv", "--schema", tmp_path / "t.yaml")
    result = write_here(*args, "--output", tmp_path / "out", "--quiet")
    assert result.returncode == 0, result.stderr
    assert read_dataset(tmp_path / "out")["tags"].to_pylist() == [["a", "b"], None]


def one_line_error(result):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith("recordmill: error: ") and "Traceback" not in result.stderr
    return lines[0]


def test_a_number_column_with_a_few_words_is_said_not_typed_string(tmp_path):
    lines = ["x,label"] + [f"{i / 4},{i % 3}" for i in range(40)]
    lines[25] = "abc,1"
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    line = one_line_error(
        write_here("--script", "csv", "--input", tmp_path / "t.csv", "--output", tmp_path / "o")
    )
    assert f"{tmp_path / 't.csv'}:26: column 'x' holds numbers in 39 of the 40 cells" in line
    assert "'abc' here" in line and "--schema" in line and "'x: float64'" in line
    assert "more)" not in line  # one word: no "(and in 0 more)"
    two = [*lines[:30], "def,1", *lines[31:]]
    (tmp_path / "t2.csv").write_text("\n".join(two) + "\n")
    line = one_line_error(
        run_writer("--script", "csv", "--input", tmp_path / "t2.csv", "--output", tmp_path / "o")
    )
    assert "'abc' here (and in 1 more); rather" in line
    # Said by --schema, the column is what it says, and the word is bad input.
    (tmp_path / "s.yaml").write_text("x: float64\n")
    result = write_here(
        *("--script", "csv", "--input", tmp_path / "t.csv", "--schema", tmp_path / "s.yaml"),
        *("--output", tmp_path / "o", "--on-bad-input", "skip", "--quiet"),
    )
    assert result.returncode == 0, result.stderr
    assert "39 rows" in result.stdout and "1 input rejected" in result.stdout
    # A column of words with a few numbers stays a string column.
    words = ["name"] + [f"w{i}" for i in range(30)] + ["7"]
    (tmp_path / "w.csv").write_text("\n".join(words) + "\n")
    result = write_here(
        *("--script", "csv", "--input", tmp_path / "w.csv", "--output", tmp_path / "w"),
        "--quiet",
    )
    assert result.returncode == 0, result.stderr


def test_a_schema_naming_some_columns_infers_the_others(tmp_path):
    (tmp_path / "t.csv").write_text("id,name,score,ok\n1,a,0.5,true\n2,b,1.5,false\n")
    (tmp_path / "s.yaml").write_text("score: float32\nid: int16\n")
    out = tmp_path / "o"
    result = write_here(
        *("--script", "csv", "--input", tmp_path / "t.csv", "--schema", tmp_path / "s.yaml"),
        *("--output", out, "--quiet"),
    )
    assert result.returncode == 0, result.stderr
    table = recordmill.open(str(out)).to_arrow()
    assert table.schema.names == ["id", "name", "score", "ok"]  # the header's order
    assert [str(t) for t in table.schema.types] == ["int16", "string", "float", "bool"]
    assert table["name"].to_pylist() == ["a", "b"] and table["score"].to_pylist() == [0.5, 1.5]


def test_delimiter_for_json_lines_only_is_an_error(tmp_path):
    (tmp_path / "t.jsonl").write_text('{"a": 1}\n')
    line = one_line_error(
        write_here(
            *("--script", "csv", "--input", tmp_path / "t.jsonl", "--delimiter", ";"),
            *("--output", tmp_path / "o"),
        )
    )
    assert "--delimiter has no effect" in line and "only JSON Lines files" in line


def test_whole_numbers_written_as_floats_convert_exactly_into_integer_fields(tmp_path):
    """pandas writes an integer column as 2.0 after a float round trip."""
    big = 2**62 + 1  # past float64's exact integers: converted without a float
    (tmp_path / "t.csv").write_text(f"label,n\n2.0,{big}.0\n-3,1e3\n")
    (tmp_path / "s.yaml").write_text("label: int64\nn: int64\n")
    result = write_here(
        *("--script", "csv", "--input", tmp_path / "t.csv", "--schema", tmp_path / "s.yaml"),
        *("--output", tmp_path / "o", "--quiet"),
    )
    assert result.returncode == 0, result.stderr
    table = read_dataset(tmp_path / "o")
    assert table["label"].to_pylist() == [2, -3] and table["n"].to_pylist() == [big, 1000]


def test_an_append_refused_for_an_inferred_type_names_the_schema_flag(tmp_path):
    """2.0 after a pandas round trip is inferred float64; an int64 dataset refuses it, and the
    refusal says the --schema line that takes it."""
    (tmp_path / "a.csv").write_text("label,x\n1,0.5\n")
    (tmp_path / "b.csv").write_text("label,x\n2.0,1.5\n")
    out = ("--output", tmp_path / "o", "--quiet")
    assert run_writer("--script", "csv", "--input", tmp_path / "a.csv", *out).returncode == 0
    line = one_line_error(
        run_writer("--script", "csv", "--input", tmp_path / "b.csv", *out, "--append")
    )
    assert line == (
        "recordmill: error: cannot --append: field 'label' is int64 in the dataset, float64 in "
        "this plugin's declared schema (--schema gives it the dataset's type: 'label: int64')"
    )
    (tmp_path / "s.yaml").write_text("label: int64\n")
    flags = ("--input", tmp_path / "b.csv", "--schema", tmp_path / "s.yaml", "--append")
    result = run_writer("--script", "csv", *flags, *out)
    assert result.returncode == 0, result.stderr
    assert read_dataset(tmp_path / "o")["label"].to_pylist() == [1, 2]


def test_csv_messages_say_the_file_line_and_what_to_do(tmp_path):
    (tmp_path / "t.csv").write_text("id,code\n1,7\n99999999999999999999,8\n2.5,9\n")
    (tmp_path / "s.yaml").write_text("id: int64\ncode: int64\n")
    args = ["--script", "csv", "--input", tmp_path / "t.csv", "--schema", tmp_path / "s.yaml"]
    line = one_line_error(write_here(*args, "--output", tmp_path / "o", "--quiet"))
    assert (
        f"{tmp_path / 't.csv'}:3: column 'id': expected int64, got '99999999999999999999'" in line
    )
    assert "out of int64's range" in line and "--schema" in line
    result = write_here(*args, "--output", tmp_path / "o", "--on-bad-input", "skip", "--quiet")
    assert result.returncode == 0, result.stderr
    reasons = [r["reason"] for r in recordmill.read_rejects(tmp_path / "o")]
    assert len(reasons) == 2 and "got '2.5' (not a whole number;" in reasons[1]
    # a header that differs says the difference only
    (tmp_path / "s2.yaml").write_text("id: int64\ncode: int64\nextra: string\n")
    wide = ",".join(f"column_{i}" for i in range(60))
    (tmp_path / "w.csv").write_text(f"id,code,{wide}\n1,2,{','.join(['0'] * 60)}\n")
    line = one_line_error(
        write_here(
            *("--script", "csv", "--input", tmp_path / "w.csv", "--schema", tmp_path / "s2.yaml"),
            *("--output", tmp_path / "w", "--quiet"),
        )
    )
    assert "column_0" not in line or line.count("column_0") == 1
    assert "extra" in line and len(line) < 900


def test_a_file_whose_header_differs_from_the_first_file_s_says_the_difference_only(tmp_path):
    wide = [f"column_{i}" for i in range(60)]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text(",".join(wide) + "\n" + ",".join(["1"] * 60) + "\n")
    other = [*wide[:59], "col_59"]
    (tmp_path / "in" / "b.csv").write_text(",".join(other) + "\n" + ",".join(["2"] * 60) + "\n")
    line = one_line_error(
        run_writer(
            *("--script", "csv", "--input", tmp_path / "in", "--output", tmp_path / "o"), "--quiet"
        )
    )
    assert line.endswith(
        f"{tmp_path / 'in' / 'b.csv'}: the header does not match the schema "
        "(not in the schema: col_59; not in the file: column_59)"
    ), line


def test_zero_padded_codes_stay_strings(tmp_path):
    (tmp_path / "t.csv").write_text("zip,n\n00123,1\n02134,2\n90210,3\n")
    result = write_here(
        *("--script", "csv", "--input", tmp_path / "t.csv", "--output", tmp_path / "o"), "--quiet"
    )
    assert result.returncode == 0, result.stderr
    table = read_dataset(tmp_path / "o")
    assert table["zip"].to_pylist() == ["00123", "02134", "90210"]
    assert table["n"].to_pylist() == [1, 2, 3]


def test_pyarrows_reader_and_the_record_path_give_the_same_rows(tmp_path):
    """A task is read by pyarrow's CSV reader; one it cannot be sure of falls back to the
    record-by-record path. Either way the rows are what Python's csv module reads."""
    header = ["id", "name", "score", "ok", "blob"]
    records = [
        ["1", "plain", "0.5", "true", "ab"],
        ["2", "a, comma", "", "False", ""],
        ["3", "two\nlines", "-1e3", "yes", "x"],
        ["4", 'quote "q"', "2.25", "NO", "y"],
        ["5", "", "7", "1", "z"],
    ]
    (tmp_path / "s.yaml").write_text(
        "id: int32\nname: string\nscore: {type: float64, nullable: true}\nok: bool\nblob: bytes\n"
    )
    for name, rows in [("good", records), ("one_bad", [*records, ["x", "bad", "1", "true", "q"]])]:
        path = tmp_path / f"{name}.csv"
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows([header, *rows])
        result = write_here(
            *("--script", "csv", "--input", path, "--schema", tmp_path / "s.yaml"),
            *("--output", tmp_path / name, "--on-bad-input", "skip", "--rows-per-task", "2"),
            "--quiet",
        )
        assert result.returncode == 0, result.stderr
        table = read_dataset(tmp_path / name)
        assert table["id"].to_pylist() == [1, 2, 3, 4, 5]
        assert table["name"].to_pylist() == [r[1] for r in records]
        assert table["score"].to_pylist() == [0.5, None, -1000.0, 2.25, 7.0]
        assert table["ok"].to_pylist() == [True, False, True, False, True]
        assert table["blob"].to_pylist() == [b"ab", b"", b"x", b"y", b"z"]
    (reject,) = recordmill.read_rejects(tmp_path / "one_bad")
    assert reject["source"].endswith("one_bad.csv:8") and "got 'x'" in reject["reason"]


def test_a_huge_exponent_is_bad_input_at_once_and_a_blank_line_is_never_a_row(tmp_path):
    (tmp_path / "t.csv").write_text("id,n\n1,1e1000000\n2,3\n")
    (tmp_path / "s.yaml").write_text("id: int64\nn: int64\n")
    result = run_writer(  # a process: a hang is stopped by the timeout
        *("--script", "csv", "--input", tmp_path / "t.csv", "--schema", tmp_path / "s.yaml"),
        *("--output", tmp_path / "o", "--on-bad-input", "skip", "--quiet"),
        timeout=60,  # building 10**1000000 took minutes
    )
    assert result.returncode == 0, result.stderr
    assert read_dataset(tmp_path / "o")["n"].to_pylist() == [3]
    (tmp_path / "one.csv").write_text(
        "name\nalice\n\nbob\n"
    )  # one column: pyarrow takes "" for a row
    line = one_line_error(
        write_here("--script", "csv", "--input", tmp_path / "one.csv", "--output", tmp_path / "w")
    )
    assert "one.csv:3: expected 1 fields (name), got 0" in line


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".jsonl.zst"])
def test_json_lines_by_their_own_name_compressed_and_nested(tmp_path, suffix):
    """`--script jsonl` (an alias of csv, listed by recordmill plugins): plain, gzipped or zstd
    files; a nested object becomes its JSON text; a bad line is named by file and line."""
    import gzip

    import pyarrow as pa

    lines = [
        {"id": 1, "meta": {"url": "http://x/1", "size": [3, 4]}, "tags": ["a", "b"], "v": [1, 2]},
        {"id": 2, "meta": {"url": "http://x/2", "size": [5, 6]}, "tags": [], "v": [3]},
    ]
    text = "".join(json.dumps(r) + "\n" for r in lines) + "{not json\n"
    path = tmp_path / f"rows{suffix}"
    if suffix.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    elif suffix.endswith(".zst"):
        with pa.output_stream(str(path), compression="zstd") as sink:
            sink.write(text.encode())
    else:
        path.write_text(text)
    failed = write_here("--script", "jsonl", "--input", path, "--output", tmp_path / "f", "--quiet")
    assert failed.returncode == 1 and f"{path}:3: not valid JSON" in failed.stderr
    out = tmp_path / "out"
    result = write_here(
        "--script", "jsonl", "--input", path, "--output", out, "--on-bad-input", "skip", "--quiet"
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = read_dataset(out).to_pylist()
    assert [json.loads(r["meta"]) for r in rows] == [r["meta"] for r in lines]
    assert [r["id"] for r in rows] == [1, 2] and rows[0]["v"] == [1, 2]
    assert recordmill.read_rejects(out)[0]["source"] == f"{path}:3"
    listed = recordmill_here("plugins")
    assert "jsonl" in listed.stdout and "json " in listed.stdout
