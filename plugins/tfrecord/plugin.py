"""Built-in plugin ``tfrecord``: TFRecord files of ``tf.train.Example``, without TensorFlow.

    python writer.py --script tfrecord --input /data/train-*.tfrecord --output out/train

``--input`` is a file or a folder (every file in it whose name contains ``.tfrecord``, or any file
with ``--pattern``); one task per file; ``.gz`` files are read as GZIP-compressed TFRecords. Every
record's two CRC-32C checksums are checked (``pip install crc32c`` makes that fast).

Each feature becomes a column: bytes_list -> bytes, float_list -> float32, int64_list -> int64; a
feature holding one value is a scalar column, more than one a variable-length array. The types are
taken from the first record of the first file, or from ``--schema`` (YAML, as for the csv plugin:
``image/encoded: bytes``, ``bbox: {type: float32, shape: [-1]}``; add ``nullable: true`` for features
that some records lack). Column names follow recordmill's rule for field names: other characters
than letters, digits and ``_`` become ``_`` (``image/class/label`` -> ``image_class_label``).
"""

import fnmatch
import functools
import os

from recordmill import Reject
from recordmill.formats.tfrecord import TFRecordError, parse_example, records
from recordmill.schema import from_yaml, safe_name

TYPES = {"bytes": "bytes", "float": "float32", "int64": "int64"}


def add_options(parser):
    parser.add_argument("--input", required=True, help="a TFRecord file or a folder of them")
    parser.add_argument(
        "--pattern",
        default="*.tfrecord*",
        help="files to take from a folder (default: %(default)s)",
    )
    parser.add_argument(
        "--schema", help="YAML file: feature name -> type (default: from the first record)"
    )


@functools.lru_cache(maxsize=4)
def _files(path, pattern):
    if os.path.isfile(path):
        return (path,)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"--input {path} is neither a file nor a folder")
    names = sorted(n for n in os.listdir(path) if fnmatch.fnmatch(n, pattern))
    if not names:
        raise FileNotFoundError(f"--input {path} holds no file matching --pattern {pattern!r}")
    return tuple(os.path.join(path, n) for n in names)


def task_number(options):
    return len(_files(options.input, options.pattern))


@functools.lru_cache(maxsize=4)
def _schema(input_path, pattern, schema_path):
    if schema_path:
        return from_yaml(schema_path, rename=safe_name)
    for path in _files(input_path, pattern):
        for _, _, data, problem in records(path):
            if problem:
                raise TFRecordError(problem)
            spec = {}
            for name, (kind, values) in parse_example(data).items():
                column = _column(name)
                if column in spec:
                    raise ValueError(f"features {name!r} and another both become column {column!r}")
                spec[column] = {"type": TYPES[kind]}
                if len(values) != 1:
                    spec[column]["shape"] = [-1]
            return spec
    raise ValueError(
        f"--input {input_path} holds no records to take the schema from; pass --schema"
    )


def schema(options):
    return _schema(options.input, options.pattern, options.schema)


def dict_data(task_id, options):
    path = _files(options.input, options.pattern)[task_id]
    spec = schema(options)
    try:
        for index, offset, data, problem in records(path):
            if problem:
                yield _bad(options, f"{path}:{index}", problem)
                continue
            row = {}
            for feature, (_, values) in parse_example(data).items():
                name = _column(feature)
                if name not in spec:
                    raise ValueError(
                        f"{path}: record {index} at byte {offset} has feature {feature!r}, "
                        "which the schema lacks"
                    )
                scalar = not spec[name].get("shape") and len(values) == 1
                row[name] = values[0] if scalar else values
            for name in spec:
                row.setdefault(name, None)
            yield row
    except TFRecordError as e:
        # A damaged header or a truncated file: nothing after it can be trusted.
        yield _bad(options, path, str(e))


@functools.lru_cache(maxsize=1024)
def _column(feature):
    return safe_name(feature)


def _bad(options, source, reason):
    if options.get("on_bad_input", "fail") == "skip":
        return Reject(source, reason)
    raise TFRecordError(f"{reason} (--on-bad-input skip records it and goes on)")
