"""Built-in plugin ``recordio``: MXNet RecordIO files (``.rec``, as im2rec writes them), without MXNet.

    python writer.py --script recordio --input /data/train.rec --output out/train

``--input`` is a ``.rec`` file or a folder (every file in it matching ``--pattern``); a task per
32 MB of each file, or ``--tasks N`` per file. With the ``.idx`` file beside a ``.rec`` (``train.idx`` for
``train.rec``, as ``MXIndexedRecordIO`` and im2rec write it), tasks are ranges of its entries and
their row counts are known at once; without it (or with ``--no-index``), tasks are byte ranges
that each begin at the first record starting in them, which the format lets a reader find.
Records written in several parts (where the data holds the format's magic number) are joined.

Fields of im2rec's image records (``IRHeader`` + image bytes): index (int64: the header's id),
label (``--label-type``, float32 by default as MXNet stores it: one value, or an array of the
record's label width: read from the first ``INFER_RECORDS`` records, or ``--label-width K``, -1
for widths that vary, as in detection records), and the image fields of ``--encode`` (see
``recordmill/inputs/images.py``). With ``--no-image-header`` (records of anything else): offset
(int64: the record's byte offset in its file) and data (bytes).

A damaged file (a wrong magic number, a part out of place, a file cut short) or an ``.idx`` that
does not match its ``.rec`` fails the run naming file, record and byte offset; with
``--on-bad-input skip`` it becomes a reject and reading goes on at the next record start.
"""

import functools
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
from recordmill.kit.features import check_pattern as input_files_check
from recordmill.kit.recordio import (
    RecordIOError,
    find_start,
    padded,
    read_index,
    records,
    unpack,
)

from recordmill import kit
from recordmill.kit import ConfigError, InputError, bad_input, images, input_files, tasks_for

INFER_RECORDS = 1000  # records read, across the files in order, to tell the label width
PATTERN = "*.rec"


def add_options(parser):
    parser.add_argument(
        "--input", required=True, type=kit.Path, help="a .rec file or a folder of them"
    )
    parser.add_argument(
        "--pattern", default=PATTERN, help="files to take from a folder (default: %(default)s)"
    )
    parser.add_argument(
        "--tasks",
        type=int,
        default=0,
        help="tasks per file: ranges of its records (default: 0, a task per 32 MB of the file)",
    )
    parser.add_argument(
        "--no-index",
        action="store_true",
        help="ignore the .idx files beside the .rec files (tasks are then byte ranges)",
    )
    parser.add_argument(
        "--no-image-header",
        action="store_true",
        help="records are not im2rec images: each becomes offset and data (its raw bytes)",
    )
    parser.add_argument(
        "--label-width",
        type=int,
        help="labels per record: 1 (a scalar), K (an array of K), -1 (a list, width varies) "
        f"(default: told by the first {INFER_RECORDS} records)",
    )
    parser.add_argument(
        "--label-type",
        choices=("float32", "int32", "int64"),
        default="float32",
        help="int labels must be whole numbers (default: float32, as MXNet stores them)",
    )
    images.add_options(parser)


class Task(NamedTuple):
    path: str
    start: int
    end: int
    offsets: tuple[int, ...] | None  # the .idx's record starts in [start, end), when indexed
    first_number: int | None  # the number of the task's first record in its file, when known


@functools.lru_cache(maxsize=4)
def _tasks(input_path, pattern, tasks, no_index):
    if str(input_path).endswith(".idx") and os.path.isfile(input_path):
        raise InputError(
            f"--input {input_path} is an index: give the .rec it indexes "
            f"({input_path[:-4]}.rec); the .idx beside it is found by itself"
        )
    plan = []
    files = input_files(input_path, pattern)
    total = sum(os.path.getsize(path) for path in files)
    for path in files:
        index = Path(path).with_suffix(".idx")
        count = tasks_for(os.path.getsize(path), tasks, total)
        try:
            if index.is_file() and not no_index:
                plan.extend(_indexed(path, str(index), count))
            else:
                plan.extend(_byte_ranges(path, count))
        except RecordIOError as e:
            raise InputError(str(e)) from None
    return tuple(plan)


def _indexed(path, index, tasks):
    size = os.path.getsize(path)
    offsets = [offset for _, offset in read_index(index)]
    if offsets and offsets[-1] >= size:
        raise RecordIOError(
            f"{index}: offset {offsets[-1]} is past the end of {path} ({size} bytes); "
            "--no-index reads the .rec alone"
        )
    n = max(1, min(tasks, len(offsets)))
    bounds = [len(offsets) * t // n for t in range(n + 1)]
    for t in range(n):
        first, stop = bounds[t], bounds[t + 1]
        # Task 0 starts at byte 0 whatever the index says: records it does not list are reported.
        start = 0 if t == 0 else offsets[first]
        end = offsets[stop] if stop < len(offsets) else size
        yield Task(path, start, end, tuple(offsets[first:stop]), first)


def _byte_ranges(path, tasks):
    size = os.path.getsize(path)
    step = padded(-(-size // tasks))
    with open(path, "rb") as f:
        starts = [0] + [find_start(f, step * t, size) for t in range(1, tasks)] + [size]
    for t in range(tasks):
        yield Task(path, starts[t], max(starts[t], starts[t + 1]), None, 0 if t == 0 else None)


def _plan(options):
    return _tasks(options.input, options.pattern, options.tasks, options.no_index)


def task_number(options):
    input_files_check(options.input, options.pattern, PATTERN)
    if options.no_image_header:
        given = images.given_options(options) + [
            flag
            for flag, on in (
                ("--label-width", options.label_width is not None),
                ("--label-type", options.label_type != "float32"),
            )
            if on
        ]
        if given:
            raise ConfigError(
                f"{given[0]} has no effect with --no-image-header: each record is stored as it "
                "is, in offset and data"
            )
    else:
        images.check_options(options)
    return len(_plan(options))


def task_rows(task_id, options):
    offsets = _plan(options)[task_id].offsets
    return None if offsets is None else len(offsets)


@functools.lru_cache(maxsize=4)
def _inferred_width(input_path, pattern):
    widths, seen = set(), 0
    for path in input_files(input_path, pattern):
        for record in records(path):
            if record.problem:
                break  # damage is not evidence; dict_data reports it
            try:
                widths.add(max(1, unpack(record.data).flag))
            except ValueError:
                continue
            seen += 1
            if seen >= INFER_RECORDS:
                break
        if seen >= INFER_RECORDS:
            break
    if len(widths) > 1:
        return -1
    return widths.pop() if widths else 1


def label_width(options):
    """1 (a scalar), K (an array of K) or -1 (a list of varying length)."""
    if options.label_width is not None:
        if options.label_width == 0 or options.label_width < -1:
            raise ConfigError(f"--label-width must be -1 or at least 1, got {options.label_width}")
        return options.label_width
    return _inferred_width(options.input, options.pattern)


def schema(options):
    if options.no_image_header:
        return {"offset": {"type": "int64"}, "data": {"type": "bytes"}}
    label = {"type": options.label_type}
    width = label_width(options)
    if width != 1:
        label["shape"] = [width]
    return {"index": {"type": "int64"}, "label": label, **images.schema(options)}


def dict_data(task_id, options):
    task = _plan(options)[task_id]
    width = None if options.no_image_header else label_width(options)
    offsets = None if task.offsets is None else list(task.offsets)
    # Rows named by their record in the file, or, where its number is not known (no .idx), from
    # the byte the task starts at.
    if task.first_number is not None:
        yield kit.Source(task.path, first=task.first_number)
    else:
        yield kit.Source(f"{task.path} (from byte {task.start:,})")
    for record in records(task.path, task.start, task.end, offsets, task.first_number):
        number = record.number
        source = f"{task.path}:{record.offset if number is None else number}"
        if record.problem:
            skipped = ""
            if record.resume is not None:
                skipped = f"; bytes {record.offset} to {record.resume} passed over"
            yield bad_input(options, source, record.problem, skipped=skipped)
        elif options.no_image_header:
            yield {"offset": record.offset, "data": record.data}
        else:
            where = (
                f"{task.path}: record {number} at byte {record.offset}"
                if number is not None
                else f"{task.path}: a record at byte {record.offset}"
            )
            yield _image_row(record.data, where, source, width, options)


def _image_row(data, where, source, width, options):
    try:
        image = unpack(data)
    except ValueError as e:
        return bad_input(
            options,
            source,
            f"{where}: {e} (damaged, or not an image record: --no-image-header reads raw records)",
        )
    if image.id >= 1 << 63:  # MXNet's id is a uint64; im2rec's are list indexes
        return bad_input(
            options, source, f"{where}: its header's id {image.id} is past int64 (damaged header)"
        )
    labels = image.labels
    if width > 0 and len(labels) != width:
        return bad_input(
            options,
            source,
            f"{where} has {len(labels)} labels where the schema has {width} "
            f"({_whence(options)}); pass --label-width -1 for widths that vary",
        )
    if options.label_type != "float32":
        if not np.all(np.isfinite(labels)) or np.any(labels != np.round(labels)):
            return bad_input(
                options,
                source,
                f"{where}: label {labels.tolist()} is not a whole number; use --label-type float32",
            )
        labels = labels.astype(options.label_type)
    label = labels[0] if width == 1 else labels
    try:
        fields = images.encode_bytes(image.image, where, options)
    except images.BadImage as e:
        return bad_input(options, source, f"{where}: bad image: {e.reason}")
    return {"index": image.id, "label": label, **fields}


def _whence(options):
    if options.label_width is not None:
        return f"--label-width {options.label_width}"
    return f"told by the first {INFER_RECORDS} records"
