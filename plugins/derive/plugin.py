"""Built-in plugin ``derive``: a dataset from a dataset, each row through a function of yours
(a map, a filter, or both), in parallel and resumable like every write.

    python writer.py --script derive --input out/captions --function clean.py \
        --output out/clean --partitions 8 --workers 8

``--input`` is a recordmill dataset (a folder or URI; ``--version`` picks one of its versions)
or Parquet files (a file or a folder). ``--function FILE.py`` (or ``FILE.py:NAME``; the name is
``map`` by default) is called with each row, a dict (numpy arrays for arrays), and returns the new
row, a dict, or None to leave the row out. The output's columns are those of the rows it returns:
a column the input has keeps its type, a new one is typed from the first rows (or a
``schema()`` in the same file declares them all). Tasks are runs of rows of the
input (``--rows-per-task``, by default the input cut into about 64), so ``--workers`` matter, and
the rows keep the input's order. A row whose function raises is bad input naming the row: the
run stops, or with ``--on-bad-input skip`` the row is a listed reject.

``--append`` with the input's own folder as ``--output`` writes the derived rows as the dataset's
next version: the history records this plugin and its options (the input and the function
file).
"""

import functools
import glob
import hashlib
import importlib.util
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import recordmill
from recordmill import kit
from recordmill.kit import ConfigError, InputError, bad_input, infer_schema

TASKS = 64
INFER_ROWS = 100  # rows the function is run on to type the columns it adds
MIN_ROWS_PER_TASK = 1000


def add_options(parser):
    parser.add_argument(
        "--input", required=True, help="a recordmill dataset (folder or URI) or Parquet files"
    )
    parser.add_argument(
        "--function",
        required=True,
        type=_function_path,
        help="FILE.py or FILE.py:NAME, NAME(row) -> row or None (default NAME: map)",
    )
    parser.add_argument(
        "--version", type=int, help="the version of a recordmill dataset read (default: current)"
    )
    parser.add_argument(
        "--rows-per-task",
        type=int,
        default=0,
        help=f"rows a task (default: 0, the input cut into about {TASKS} tasks)",
    )


def _function_path(text):
    path, _, name = text.partition(":")
    return f"{kit.Path(path)}:{name or 'map'}"


@functools.lru_cache(maxsize=4)
def _function(spec):
    """The user's function (its file imported once a process) and the file's SHA-256."""
    path, name = spec.rsplit(":", 1)
    if not os.path.isfile(path):
        raise ConfigError(f"--function {path}: no such file")
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    module_spec = importlib.util.spec_from_file_location(f"recordmill_derive_{digest[:12]}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    function = getattr(module, name, None)
    if not callable(function):
        raise ConfigError(f"--function {path}: defines no function {name!r}")
    return function, getattr(module, "schema", None)


@functools.lru_cache(maxsize=4)
def _input(given, version):
    """('dataset', rows) of a recordmill dataset, or ('parquet', ((file, rows), ...))."""
    local = "://" not in given
    has_manifest = not local or any(
        os.path.exists(os.path.join(given, f"_manifest.{f}")) for f in ("parquet", "arrow")
    )
    if has_manifest:  # a recordmill dataset: its own errors said as they are
        return "dataset", len(recordmill.open(given, version=version, cache_dir=False))
    if version is not None:
        raise ConfigError(f"--version: {given} is not a recordmill dataset (no manifest)")
    path = kit.Path(given)
    found = sorted(glob.glob(os.path.join(path, "*.parquet")))
    files = [path] if os.path.isfile(path) else [f for f in found if not _hidden(f)]
    if not files:
        raise InputError(f"--input {given}: no recordmill dataset and no .parquet file there")
    return "parquet", tuple((f, pq.ParquetFile(f).metadata.num_rows) for f in files)


@functools.lru_cache(maxsize=4)
def _tasks(given, version, rows_per_task):
    """(file or None, first row, stop) of every task."""
    kind, found = _input(given, version)
    pieces = [(None, found)] if kind == "dataset" else list(found)
    total = sum(rows for _, rows in pieces)
    size = rows_per_task or max(MIN_ROWS_PER_TASK, -(-total // TASKS))
    if size < 1:
        raise ConfigError(f"--rows-per-task must be 0 (about {TASKS} tasks) or more, got {size}")
    tasks = tuple(
        (file, lo, min(rows, lo + size)) for file, rows in pieces for lo in range(0, rows, size)
    )
    return tasks or ((pieces[0][0], 0, 0),)  # no rows: one empty task, of the input as it is


def task_number(options):
    _function(options.function)  # a mistake in it found before any task runs
    return len(_tasks(options.input, options.version, options.rows_per_task))


def schema(options):
    """The function file's ``schema()``, else: a column the input has keeps its type (an array
    its shape, whatever one row's length), a new one is typed from the first rows it returns."""
    declared = _function(options.function)[1]
    if declared is not None:
        return declared()
    first = _first_results(options)
    if not first:
        return None  # no row comes out of the first ones: recordmill types the later ones
    given = _input_schema(options.input, options.version)
    new = [k for k in first[0] if k not in given.names]
    # each new column typed from its first value that is not None
    sample = {k: next((r[k] for r in first if r.get(k) is not None), None) for k in new}
    inferred = infer_schema(sample, first[1:]) if new else None
    fields = [given.field(k) if k in given.names else inferred.field(k) for k in first[0]]
    return pa.schema(fields)


def _first_results(options, rows=INFER_ROWS):
    """What the function makes of the input's first rows (those it does not leave out)."""
    file, lo, hi = _tasks(options.input, options.version, options.rows_per_task)[0]
    function, found = _function(options.function)[0], []
    for row in _rows(options.input, options.version, file, lo, min(hi, lo + rows)):
        try:
            result = function(row)
        except Exception:
            continue  # dict_data says it, naming the row
        if isinstance(result, dict):
            found.append(result)
    return found


@functools.lru_cache(maxsize=4)
def _input_schema(given, version):
    kind, found = _input(given, version)
    if kind == "dataset":
        return recordmill.open(given, version=version, cache_dir=False).schema
    return pq.read_schema(found[0][0])


def task_rows(task_id, options):
    return None  # the function may leave rows out


def _rows(given, version, file, lo, hi):
    if file is None:
        ds = recordmill.open(given, version=version, cache_dir=False)
        return ds.rows(range(lo, hi))
    parquet = pq.ParquetFile(file)
    groups, first, start = [], None, 0
    for g in range(parquet.metadata.num_row_groups):  # only the row groups the task covers
        rows = parquet.metadata.row_group(g).num_rows
        if start < hi and start + rows > lo:
            groups.append(g)
            first = start if first is None else first
        start += rows
    if not groups:
        return []
    rows = parquet.read_row_groups(groups).slice(lo - first, hi - lo).to_pylist()
    return [{k: _array(v) for k, v in row.items()} for row in rows]


def _array(value):
    """A list of numbers as numpy, as a recordmill dataset's rows hold arrays."""
    if isinstance(value, list) and value and all(type(v) in (int, float) for v in value):
        return np.asarray(value)
    return value


def dict_data(task_id, options):
    file, lo, hi = _tasks(options.input, options.version, options.rows_per_task)[task_id]
    function = _function(options.function)[0]
    yield kit.Source(f"{file or options.input} rows {lo}-{hi}")
    for offset, row in enumerate(_rows(options.input, options.version, file, lo, hi)):
        try:
            result = function(row)
        except Exception as e:
            yield bad_input(
                options,
                f"{file or options.input} row {lo + offset}",
                f"--function raised on row {lo + offset}: {type(e).__name__}: {e}",
            )
            continue
        if result is None:
            continue
        if not isinstance(result, dict):
            raise InputError(
                f"--function returned {type(result).__name__} for row {lo + offset}; expected "
                "a dict (the new row) or None (to leave the row out)"
            )
        yield result


def _hidden(path):
    """A file Parquet readers pass over too (``_SUCCESS``, ``_metadata``, ``.crc``)."""
    return os.path.basename(path).startswith(("_", "."))
