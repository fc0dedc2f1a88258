"""Built-in plugin ``csv``: CSV, TSV and JSON Lines files, a file or a folder of them.

    python writer.py --script csv --input data/ --schema columns.yaml --output out/table

One task per file, or per block of ``--rows-per-task`` records; CSV files need a header row.
Column types come from ``--schema`` (YAML: ``label: int32``, ``feat: {type: float32, shape:
[3]}``); the columns it does not name are inferred from the first 1,000 records of the first file
(int64, float64, bool, else string; nullable where cells are empty; leading zeros keep a string).
A column of numbers with text in a few cells is an error naming the first such line, never typed
string in silence. An empty cell is None except in string columns; an array cell is JSON. Column
names follow recordmill's field-name rule (``petal.width`` -> ``petal_width``).

JSON Lines files (``.jsonl``, ``.ndjson``, gzipped or zstd-compressed too: ``jsonl.py``) are read
by this plugin under its other names too, ``--script jsonl`` and ``--script json``: a nested
object becomes its JSON text, and a compressed file is one task.

A task is read by pyarrow's CSV reader; where it cannot be sure, record by record, a record that
does not parse naming the file, the line, the column, what was expected and what came
(``--on-bad-input skip`` lists it among the rejects instead).
"""

import contextlib
import csv
import decimal
import functools
import io
import json
import os
import re

import numpy as np
import pyarrow as pa

from recordmill import Reject, kit
from recordmill.kit import (
    SKIP_HINT,
    ConfigError,
    InputError,
    Options,
    SchemaError,
    did_you_mean,
    from_yaml,
    infer_schema,
    safe_name,
    to_arrow_schema,
)

from . import fast, jsonl

CSV_SUFFIXES = (".csv", ".tsv")
JSONL_SUFFIXES = jsonl.ALL_SUFFIXES
INFER_ROWS = 1000
# A column with numbers in at least this share of its (non-empty) cells and text in the others is
# taken for a numeric column with a few bad cells: an error that points to --schema.
MOSTLY_NUMBERS = 0.9
# A file up to this size is read whole by pyarrow (as one task) and to count its records; a
# larger one record by record (--rows-per-task splits it into tasks pyarrow reads).
FAST_BYTES = 512 << 20
# "00123", "-007": a number whose leading zeros a number type would drop (not "0" or "0.5").
_LEADING_ZERO = re.compile(r"^[+-]?0\d")


def worker_imports():
    # The tasks are pyarrow's tables (fast.py): the workers need pyarrow's CSV reader.
    return ["pyarrow.csv"]


def add_options(parser):
    parser.add_argument(
        "--input", required=True, type=kit.Path, help="a .csv/.tsv/.jsonl file or a folder of them"
    )
    parser.add_argument(
        "--schema",
        type=kit.Path,
        help="YAML file: column name -> type; the columns it does not name are inferred "
        "(default: all inferred)",
    )
    parser.add_argument(
        "--delimiter", default=None, help="CSV delimiter (default: ',' or a tab for .tsv)"
    )
    parser.add_argument(
        "--rows-per-task",
        type=int,
        default=0,
        help="split files into tasks of this many records (default: 0, one task per file)",
    )


@functools.lru_cache(maxsize=4)
def _files(path):
    if os.path.isfile(path):
        return (path,)
    if not os.path.isdir(path):
        raise InputError(f"--input {path} is neither a file nor a folder")
    names = sorted(n for n in os.listdir(path) if n.lower().endswith(CSV_SUFFIXES + JSONL_SUFFIXES))
    if not names:
        raise InputError(
            f"--input {path} holds no .csv, .tsv, .jsonl or .ndjson files (.jsonl.gz, .jsonl.zst too)"
        )
    return tuple(os.path.join(path, n) for n in names)


def _is_jsonl(path):
    return jsonl.is_jsonl(path)


def _lines(path, start=0, line_number=1):
    """(line number, byte offset after the line, text) from ``start``, in binary so that offsets
    are exact, and with CSV's embedded newlines left to the csv module."""
    return jsonl.lines(path, start, line_number)


def _utf8(path, number, text):
    """A CSV line's text; one that is not UTF-8 is the file's error (a record may span lines)."""
    if isinstance(text, jsonl.NotUtf8):
        raise InputError(f"{path}:{number}: {text.reason}")
    return text


def _delimiter(path, delimiter):
    return delimiter or ("\t" if path.lower().endswith(".tsv") else ",")


def _csv_records(path, delimiter, start=0, line_number=1):
    """(first line number, byte offset after the record, fields) for each CSV record."""
    state = {"line": line_number, "offset": start}

    def tracked():
        for number, offset, text in _lines(path, start, line_number):
            state["line"], state["offset"] = number, offset
            yield _utf8(path, number, text)

    reader = csv.reader(tracked(), delimiter=_delimiter(path, delimiter))
    first = line_number
    for fields in reader:
        yield first, state["offset"], fields
        first = state["line"] + 1


@functools.lru_cache(maxsize=16)
def _header(path, delimiter):
    # The first line alone, as every line is read: a text file object decodes blocks ahead, and
    # a byte that is not UTF-8 further on would fail here, unnamed, not as its own line's error.
    with contextlib.closing(_lines(path)) as lines:
        number, end, line = next(lines, (1, 0, ""))
        header = next(
            csv.reader(
                io.StringIO(_utf8(path, number, line)),
                delimiter=delimiter or ("\t" if path.lower().endswith(".tsv") else ","),
            ),
            None,
        )
        names = tuple(_column(name) for name in header or ())
        if len(set(names)) != len(names):
            raise SchemaError(
                f"{path}: the header {header} names a column twice once names follow the "
                f"field-name rule ({list(names)}); give the columns other names"
            )
        return names, end  # where the records start: the bytes after the header, as read


@functools.lru_cache(maxsize=4)
def _tasks(input_path, rows_per_task, delimiter):
    """(file, byte offset, first line number, record count or -1 for all) for every task."""
    tasks = []
    for path in _files(input_path):
        if _is_jsonl(path):
            start, line = 0, 1
        else:
            _, start = _header(path, delimiter)
            line = 2
        if rows_per_task <= 0 or jsonl.is_compressed(path):  # read from its start: one task
            tasks.append((path, start, line, -1))
            continue
        tasks += _blocks(path, start, line, rows_per_task, delimiter)
    return tuple(tasks)


def task_rows(task_id, options):
    # Known where counting is cheap, so that each partition is written straight from the rows.
    path, start, _, count = _tasks(options.input, options.rows_per_task, options.delimiter)[task_id]
    if _is_jsonl(path):  # blank lines are passed over: not known without reading
        return None
    if count >= 0:
        return count
    ends = _record_ends(path, start)
    return None if ends is None else len(ends)


@functools.lru_cache(maxsize=4)
def _record_ends(path, start):
    """The byte offset after each record from ``start``, where newlines alone end records (JSON
    Lines, or CSV without a quote): numpy over the file's bytes; None otherwise."""
    if os.path.getsize(path) > FAST_BYTES:
        return None  # not read whole into memory: counted record by record
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read()
    if not _is_jsonl(path) and b'"' in data:
        return None
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == ord("\n")) + 1 + start
    if data and not data.endswith(b"\n"):
        ends = np.append(ends, start + len(data))  # a last record without its newline
    return ends


def _blocks(path, start, line, rows_per_task, delimiter):
    """A file's tasks of ``rows_per_task`` records: cut at newlines where no record can hold one
    (``_record_ends``), else by reading the records."""
    ends = _record_ends(path, start)
    if ends is not None:
        return [
            (path, int(ends[k - 1]) if k else start, line + k, min(rows_per_task, len(ends) - k))
            for k in range(0, len(ends), rows_per_task)
        ]
    blocks, block_start, block_line, count = [], start, line, 0
    for number, offset, _ in _csv_records(path, delimiter, start, line):
        if count == 0:
            block_line = number
        count += 1
        if count == rows_per_task:
            blocks.append((path, block_start, block_line, count))
            block_start, count = offset, 0
    if count:
        blocks.append((path, block_start, block_line, count))
    return blocks


def task_number(options):
    files = _files(options.input)
    if options.delimiter is not None and all(_is_jsonl(f) for f in files):
        raise ConfigError(
            f"--delimiter has no effect: --input {options.input} holds only JSON Lines files"
        )
    return len(_tasks(options.input, options.rows_per_task, options.delimiter))


def schema(options):
    first = _files(options.input)[0]
    if _is_jsonl(first):
        return _jsonl_schema(first, options.schema)
    return _csv_schema(first, options.delimiter, options.schema)


@functools.lru_cache(maxsize=4)
def _csv_schema(path, delimiter, schema_path):
    """The columns of ``--schema``; those it does not name are inferred (in the header's
    order then; a schema that names them all keeps its own order)."""
    declared = from_yaml(schema_path, rename=_column) if schema_path else {}
    header, _ = _header(path, delimiter)
    absent = [name for name in declared if name not in header]
    if absent:
        close = did_you_mean(absent[0], header)
        shown = list(header) if len(header) <= 8 else [*header[:6], "...", header[-1]]
        count = f", {len(header):,} in all" if len(header) > 8 else ""
        raise SchemaError(
            f"--schema {schema_path} names {absent}, which the header of {path} lacks{close} "
            f"(its columns: {shown}{count})"
        )
    rest = tuple(name for name in header if name not in declared)
    if not rest:
        return declared
    inferred = _infer_csv(path, delimiter, rest)
    return {name: declared.get(name) or inferred[name] for name in header}


def _jsonl_schema(path, schema_path):
    """``--schema``, the keys it does not name typed from the first record; None without one
    (recordmill infers from the first row of each task and checks that they agree)."""
    if not schema_path:
        return None
    declared = from_yaml(schema_path, rename=_column)
    rows = _jsonl_rows(path, 0, 1, -1, Options(on_bad_input="skip"))  # bad lines: dict_data's
    first = next((row for row in rows if isinstance(row, dict)), None)
    rest = [k for k in (first or {}) if k not in declared]
    if not rest:
        return declared
    inferred = infer_schema({k: first[k] for k in rest})
    return pa.schema([*to_arrow_schema(declared), *inferred])


@functools.lru_cache(maxsize=4)
def _infer_csv(path, delimiter, names):
    """The types of columns ``names`` from the first ``INFER_ROWS`` records of ``path``."""
    header, start = _header(path, delimiter)
    columns = {name: [] for name in names}
    for i, (line, _, fields) in enumerate(_csv_records(path, delimiter, start, 2)):
        if i == INFER_ROWS:
            break
        for name, value in zip(header, fields, strict=False):  # short records fail later
            if name in columns:
                columns[name].append((line, value))
    return {name: _infer_column(values, path, name) for name, values in columns.items()}


def _infer_column(cells, path, name):
    """The type of a column from its (line, text) cells. A column of numbers but for a few text
    cells is an error, not a string column: one bad cell must not change its type in silence.
    Numbers written with leading zeros (codes: 00123) stay strings, which keep the zeros."""
    present = [(line, v) for line, v in cells if v != ""]
    spec = {"type": "string"}
    if any(_LEADING_ZERO.match(v) for _, v in present):
        return {"type": "string", **({"nullable": True} if len(present) < len(cells) else {})}
    for type_name, parse in (("int64", int), ("float64", float), ("bool", _parse_bool)):
        if present and all(_parses(parse, v) for _, v in present):
            spec = {"type": type_name}
            if len(present) < len(cells):
                spec["nullable"] = True
            return spec
    _check_mixed(present, path, name)
    return spec


def _check_mixed(present, path, name):
    """Raise when at least ``MOSTLY_NUMBERS`` of the cells are numbers and the others text."""
    text = [(line, v) for line, v in present if not _parses(float, v)]
    numbers = len(present) - len(text)
    if not text or numbers < MOSTLY_NUMBERS * len(present):
        return
    kind = "int64" if all(_parses(int, v) for _, v in present if _parses(float, v)) else "float64"
    line, value = text[0]
    more = f" (and in {len(text) - 1:,} more)" if len(text) > 1 else ""
    raise SchemaError(
        f"{path}:{line}: column {name!r} holds numbers in {numbers:,} of the {len(present):,} "
        f"cells read, but {value!r} here{more}; rather than type the "
        f"column string, say its type with --schema: '{name}: {kind}' (with --on-bad-input skip "
        f"to leave such rows out) or '{name}: string'"
    )


def _parses(parse, value):
    try:
        parse(value)
    except ValueError:
        return False
    return True


def _parse_bool(text):
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError(f"not a bool: {text!r}")


PARSERS = {
    "bool": _parse_bool,
    "float16": float,
    "float32": float,
    "float64": float,
    "string": str,
    "bytes": str.encode,
}


def _parse(text, spec):
    type_name = spec["type"]
    if text == "" and (type_name not in ("string", "bytes") or spec.get("shape")):
        return None
    if spec.get("shape"):
        return json.loads(text)
    if type_name in PARSERS:
        return PARSERS[type_name](text)
    value = _whole(text)
    limits = np.iinfo(type_name)
    if not limits.min <= value <= limits.max:
        raise ValueError(f"out of {type_name}'s range, {limits.min:,} to {limits.max:,}")
    return value


def _whole(text):
    """A whole number from its text, ``2.0`` and ``1e3`` too (as pandas writes integers after a
    float round trip), exactly: never through a float."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = decimal.Decimal(text.strip())
        # A finite whole number of at most 40 digits (1e1000000 would take minutes to build).
        if number.is_finite() and number.adjusted() < 40 and number == number.to_integral_value():
            return int(number)
    except decimal.InvalidOperation:
        pass
    raise ValueError("not a whole number")


def dict_data(task_id, options):
    path, start, line, count = _tasks(options.input, options.rows_per_task, options.delimiter)[
        task_id
    ]
    if _is_jsonl(path):
        yield from _jsonl_rows(path, start, line, count, options)
    else:
        fast = _fast_csv(path, start, count, options)
        if fast is not None:
            yield from fast
        else:  # record by record, each bad one named by its line
            yield from _csv_rows(path, start, line, count, options)


def _fast_csv(path, start, count, options):
    """A task's records read by pyarrow's CSV reader (``fast.py``), or None where it cannot be
    sure to give what the record path gives (see there; and one column, or a file past
    ``FAST_BYTES`` read as one task)."""
    header, _ = _header(path, options.delimiter)
    specs = schema(options)
    whole = count < 0 and os.path.getsize(path) > FAST_BYTES  # a large file read as one task
    if len(header) < 2 or set(header) != set(specs) or whole:
        return None  # one column: pyarrow reads a blank line as a row, the record path refuses it
    return fast.read(path, start, count, header, specs, _delimiter(path, options.delimiter))


def _bad(options, where, reason):
    if options.get("on_bad_input", "fail") == "skip":
        return Reject(where, reason)
    raise InputError(f"{where}: {reason} {SKIP_HINT}")


def _jsonl_rows(path, start, line, count, options):
    for i, (number, _, text) in enumerate(_lines(path, start, line)):
        if i == count:
            return
        if isinstance(text, jsonl.NotUtf8):
            yield _bad(options, f"{path}:{number}", text.reason)
            continue
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as e:
            yield _bad(options, f"{path}:{number}", f"not valid JSON: {e.msg} at column {e.colno}")
            continue
        if not isinstance(row, dict):
            yield _bad(
                options, f"{path}:{number}", f"expected a JSON object, got {type(row).__name__}"
            )
            continue
        renamed = {_column(k): v for k, v in jsonl.flattened(row).items()}
        if len(renamed) != len(row):
            yield _bad(options, f"{path}:{number}", f"two keys name the same column: {list(row)}")
            continue
        yield renamed


@functools.lru_cache(maxsize=1024)
def _column(name):
    return safe_name(name)


def _csv_rows(path, start, line, count, options):
    header, _ = _header(path, options.delimiter)
    specs = schema(options)
    unknown = [name for name in header if name not in specs]
    missing = [name for name in specs if name not in header]
    if unknown or missing:
        differ = [f"not in the schema: {', '.join(unknown)}"] if unknown else []
        differ += [f"not in the file: {', '.join(missing)}"] if missing else []
        raise SchemaError(f"{path}: the header does not match the schema ({'; '.join(differ)})")
    for i, (number, _, fields) in enumerate(_csv_records(path, options.delimiter, start, line)):
        if i == count:
            return
        if len(fields) != len(header):
            yield _bad(
                options,
                f"{path}:{number}",
                f"expected {len(header)} fields ({', '.join(header)}), got {len(fields)}",
            )
            continue
        row, error = {}, None
        for name, text in zip(header, fields, strict=True):
            try:
                row[name] = _parse(text, specs[name])
            except ValueError as e:
                error = (
                    f"column {name!r}: expected {specs[name]['type']}, got {text!r} ({e}; "
                    f"--schema gives a column another type: '{name}: string')"
                )
                break
        if error:
            yield _bad(options, f"{path}:{number}", error)
            continue
        yield row
