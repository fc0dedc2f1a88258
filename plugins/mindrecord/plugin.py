"""Built-in plugin ``mindrecord``: MindSpore's MindRecord files, without MindSpore.

    python writer.py --script mindrecord --input /data/train.mindrecord0 --output out/train

``--input`` is any shard of a dataset (``x.mindrecord``, or ``x.mindrecord0`` .. ``N-1``: its
header lists the others, which are read too) or a folder (every dataset in it). The ``.db`` index
files are not needed. Tasks are runs of ``--pages-per-task`` pages of one shard (by default about
32 MB of pages: one of MindSpore's default pages), and each task's
row count comes from the shard's header, so rows are written straight to the partitions.

The schema is the header's: ``int32``, ``int64``, ``float32``, ``float64``, ``string`` and
``bytes`` fields keep their types; arrays keep their ``shape`` (``[-1]`` is a variable-length
list, ``[2, 3]`` a fixed shape). Bytes fields (such as JPEG ``data``) stay bytes. Column names
follow recordmill's rule for field names (other characters than letters, digits and ``_``
become ``_``). MindRecord has no checksums: a damaged page or row (lengths, msgpack or array sizes
that do not add up, a truncated file) fails the run naming file, row or page and byte offset, or
with ``--on-bad-input skip`` becomes a reject.
"""

import functools
import os

from recordmill.kit.mindrecord import (
    MindRecordError,
    read_header,
    recordmill_schema,
    rows,
    shard_paths,
)

from recordmill import kit
from recordmill.kit import ConfigError, InputError, bad_input, safe_name, task_size


def add_options(parser):
    parser.add_argument(
        "--input",
        required=True,
        type=kit.Path,
        help="a MindRecord shard file (its siblings are read too) or a folder",
    )
    parser.add_argument(
        "--pages-per-task",
        type=int,
        help="blob pages per task; 0: one task per shard (default: the shards in about 64 "
        "tasks of 256 KiB to 32 MB of pages, at least a page: one of MindSpore's default pages)",
    )


@functools.lru_cache(maxsize=4)
def _tasks(input_path, pages_per_task):
    """(shard path, page type ids or None, row count or None, header problem or None) per task."""
    tasks = []
    paths = shard_paths(input_path)
    size = task_size(sum(os.path.getsize(path) for path in paths))
    for path in paths:
        try:
            header = read_header(path)
        except MindRecordError as e:
            tasks.append((path, None, None, str(e)))
            continue
        pages = header.blob_pages
        if pages_per_task is None:
            step = max(1, size // header.page_size)
        else:
            step = pages_per_task if pages_per_task > 0 else max(1, len(pages))
        for start in range(0, len(pages), step):
            chunk = pages[start : start + step]
            count = sum(p["end_row_id"] - p["start_row_id"] for p in chunk)
            tasks.append((path, tuple(p["page_type_id"] for p in chunk), count, None))
    return tuple(tasks)


def task_number(options):
    if options.pages_per_task is not None and options.pages_per_task < 0:
        raise ConfigError(f"--pages-per-task must be 0 or more, got {options.pages_per_task}")
    return len(_tasks(options.input, options.pages_per_task))


def task_rows(task_id, options):
    return _tasks(options.input, options.pages_per_task)[task_id][2]


@functools.lru_cache(maxsize=4)
def _schema(input_path):
    spec, first, problem = None, None, None
    for path in shard_paths(input_path):
        try:
            found = recordmill_schema(read_header(path))
        except MindRecordError as e:
            problem = problem or e  # dict_data reports it; the other shards' schema counts
            continue
        if spec is None:
            spec, first = found, path
        elif found != spec:
            raise InputError(
                f"--input {input_path}: {path} has other fields than {first} ({', '.join(found)} "
                f"vs {', '.join(spec)}); give one dataset, or a folder holding one"
            )
    if spec is None:
        raise InputError(str(problem))
    columns = {}
    for name in spec:
        column = safe_name(name)
        if column in columns:
            raise InputError(
                f"fields {columns[column]!r} and {name!r} both become column {column!r}"
            )
        columns[column] = name
    return {column: spec[name] for column, name in columns.items()}, columns


def schema(options):
    return _schema(options.input)[0]


def dict_data(task_id, options):
    path, page_ids, _, problem = _tasks(options.input, options.pages_per_task)[task_id]
    if problem:
        yield bad_input(options, path, problem)
        return
    try:
        header = read_header(path)
    except MindRecordError as e:
        yield bad_input(options, path, str(e))
        return
    columns = _schema(options.input)[1]
    for source, row, problem in rows(header, page_ids):
        if problem:
            yield bad_input(options, source, problem)
        else:
            yield {column: row[name] for column, name in columns.items()}
