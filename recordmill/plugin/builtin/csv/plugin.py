"""Built-in plugin ``csv``: CSV, TSV and JSON Lines files, a file or a folder of them.

    python writer.py --script csv --input data/ --schema columns.yaml --output out/table

One task per file, or per block of ``--rows-per-task`` records. CSV files need a header row. Column
types come from ``--schema`` (YAML: ``label: int32`` or ``feat: {type: float32, shape: [3]}``, the
same types as a plugin's schema) or, without one, are inferred from the first 1,000 records of the
first file: whole numbers -> int64, other numbers -> float64, true/false -> bool, the rest ->
string; a column with empty cells becomes nullable. In CSV an empty cell is a missing value (None)
except in string columns, and an array cell is written as JSON (``[1, 2, 3]``).

Column names follow recordmill's rule for field names: other characters than letters, digits and
``_`` become ``_`` (``petal.width`` -> ``petal_width``, ``Sepal Length`` -> ``Sepal_Length``); a
``--schema`` file may use either form.

A record that does not parse names the file, the line, the column, what was expected and what came;
``--on-bad-input skip`` records it among the dataset's rejects instead and goes on.
"""

import csv
import functools
import io
import json
import os

from recordmill import Reject
from recordmill.dataset.schema import from_yaml, safe_name
from recordmill.errors import InputError, SchemaError

CSV_SUFFIXES = (".csv", ".tsv")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
INFER_ROWS = 1000


def add_options(parser):
    parser.add_argument(
        "--input", required=True, help="a .csv/.tsv/.jsonl file or a folder of them"
    )
    parser.add_argument("--schema", help="YAML file: column name -> type (default: inferred)")
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
        raise InputError(f"--input {path} holds no .csv, .tsv, .jsonl or .ndjson files")
    return tuple(os.path.join(path, n) for n in names)


def _is_jsonl(path):
    return path.lower().endswith(JSONL_SUFFIXES)


def _lines(path, start=0, line_number=1):
    """(line number, byte offset after the line, text) from ``start``, in binary so that offsets
    are exact, and with CSV's embedded newlines left to the csv module."""
    with open(path, "rb") as f:
        f.seek(start)
        offset = start
        for raw in f:
            offset += len(raw)
            yield line_number, offset, raw.decode("utf-8")
            line_number += 1


def _delimiter(path, delimiter):
    return delimiter or ("\t" if path.lower().endswith(".tsv") else ",")


def _csv_records(path, delimiter, start=0, line_number=1):
    """(first line number, byte offset after the record, fields) for each CSV record."""
    state = {"line": line_number, "offset": start}

    def tracked():
        for number, offset, text in _lines(path, start, line_number):
            state["line"], state["offset"] = number, offset
            yield text

    reader = csv.reader(tracked(), delimiter=_delimiter(path, delimiter))
    first = line_number
    for fields in reader:
        yield first, state["offset"], fields
        first = state["line"] + 1


@functools.lru_cache(maxsize=16)
def _header(path, delimiter):
    with open(path, newline="", encoding="utf-8") as f:
        line = f.readline()
        header = next(
            csv.reader(
                io.StringIO(line),
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
        return names, len(line.encode("utf-8"))


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
        if rows_per_task <= 0:
            tasks.append((path, start, line, -1))
            continue
        if _is_jsonl(path):
            records = _lines(path, start, line)
        else:
            records = _csv_records(path, delimiter, start, line)
        block_start, block_line, count = start, line, 0
        for number, offset, _ in records:
            if count == 0:
                block_line = number
            count += 1
            if count == rows_per_task:
                tasks.append((path, block_start, block_line, count))
                block_start, count = offset, 0
        if count:
            tasks.append((path, block_start, block_line, count))
    return tuple(tasks)


def task_number(options):
    return len(_tasks(options.input, options.rows_per_task, options.delimiter))


def schema(options):
    if options.schema:
        return from_yaml(options.schema, rename=_column)
    first = _files(options.input)[0]
    if _is_jsonl(first):
        return None  # recordmill infers from the first row of each task and checks they agree
    return _infer_csv(first, options.delimiter)


@functools.lru_cache(maxsize=4)
def _infer_csv(path, delimiter):
    header, start = _header(path, delimiter)
    columns = {name: [] for name in header}
    for i, (_, _, fields) in enumerate(_csv_records(path, delimiter, start, 2)):
        if i == INFER_ROWS:
            break
        for name, value in zip(header, fields, strict=False):  # short records fail later
            columns[name].append(value)
    return {name: _infer_column(values) for name, values in columns.items()}


def _infer_column(values):
    present = [v for v in values if v != ""]
    spec = {"type": "string"}
    for type_name, parse in (("int64", int), ("float64", float), ("bool", _parse_bool)):
        if present and all(_parses(parse, v) for v in present):
            spec = {"type": type_name}
            if len(present) < len(values):
                spec["nullable"] = True
            break
    return spec


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
    return PARSERS.get(type_name, int)(text)


def dict_data(task_id, options):
    path, start, line, count = _tasks(options.input, options.rows_per_task, options.delimiter)[
        task_id
    ]
    if _is_jsonl(path):
        yield from _jsonl_rows(path, start, line, count, options)
    else:
        yield from _csv_rows(path, start, line, count, options)


def _bad(options, where, reason):
    if options.get("on_bad_input", "fail") == "skip":
        return Reject(where, reason)
    raise InputError(f"{where}: {reason} (--on-bad-input skip records it and goes on)")


def _jsonl_rows(path, start, line, count, options):
    for i, (number, _, text) in enumerate(_lines(path, start, line)):
        if i == count:
            return
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
        renamed = {_column(k): v for k, v in row.items()}
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
        raise ValueError(
            f"{path}: the header {list(header)} does not match the schema {list(specs)} "
            f"(not in the schema: {unknown}, not in the file: {missing})"
        )
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
                error = f"column {name!r}: expected {specs[name]['type']}, got {text!r} ({e})"
                break
        if error:
            yield _bad(options, f"{path}:{number}", error)
            continue
        yield row
