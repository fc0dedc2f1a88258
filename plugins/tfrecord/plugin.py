"""Built-in plugin ``tfrecord``: TFRecord files of ``tf.train.Example``, without TensorFlow.

    python writer.py --script tfrecord --input /data/train-*.tfrecord --output out/train

``--input`` is a file or a folder (every file in it whose name contains ``.tfrecord``, or any file
with ``--pattern``); one task per file. Files compressed as TensorFlow writes them
(``TFRecordOptions(compression_type="GZIP")`` or ``"ZLIB"``) are recognised by their first bytes
(``--compression-type auto``, the default; or say ``gzip``, ``zlib`` or ``none``). Every record's two
CRC-32C checksums are checked (``pip install crc32c`` makes that fast).

Each feature becomes a column: bytes_list -> bytes, float_list -> float32, int64_list -> int64; a
feature holding one value in every record is a scalar column, else a variable-length array, and
a feature that some records lack is nullable. The types are taken from the first
``INFER_RECORDS`` records, or from ``--schema`` (YAML, as for the csv plugin: ``image/encoded:
bytes``, ``bbox: {type: float32, shape: [-1]}``; add ``nullable: true`` for features that some
records lack). Column names follow recordmill's rule for field names: other characters
than letters, digits and ``_`` become ``_`` (``image/class/label`` -> ``image_class_label``).
"""

import fnmatch
import functools
import os

from recordmill import Reject
from recordmill.errors import InputError
from recordmill.formats.tfrecord import COMPRESSIONS, TFRecordError, parse_example, records
from recordmill.schema import from_yaml, safe_name

TYPES = {"bytes": "bytes", "float": "float32", "int64": "int64"}
INFER_RECORDS = 1000  # records read, across the files in order, to infer the schema from


def add_options(parser):
    parser.add_argument("--input", required=True, help="a TFRecord file or a folder of them")
    parser.add_argument(
        "--pattern",
        default="*.tfrecord*",
        help="files to take from a folder (default: %(default)s)",
    )
    parser.add_argument(
        "--schema",
        help=f"YAML file: feature name -> type (default: from the first {INFER_RECORDS} records)",
    )
    parser.add_argument(
        "--compression-type",
        choices=COMPRESSIONS,
        default="auto",
        help="how the input files are compressed, TensorFlow's compression_type (default: "
        "%(default)s, told by their first bytes; --compression is the output's)",
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
def _schema(input_path, pattern, schema_path, compression):
    if schema_path:
        return from_yaml(schema_path, rename=safe_name)
    spec, seen, damage = {}, 0, None
    for path in _files(input_path, pattern):
        try:
            for _, _, data, problem in records(path, compression):
                if problem:
                    continue  # a damaged record is not evidence; dict_data reports it
                _learn(spec, parse_example(data), path, seen)
                seen += 1
                if seen >= INFER_RECORDS:
                    return _without_names(spec)
        except TFRecordError as e:
            damage = damage or e  # a file cut short: dict_data reports it; what came before counts
    if not spec and damage is not None:
        raise InputError(str(damage))
    if not spec:
        raise ValueError(
            f"--input {input_path} holds no records to take the schema from; pass --schema"
        )
    return _without_names(spec)


def _learn(spec, features, path, seen):
    """Widen ``spec`` (column -> type, shape, nullable) to hold one more record's features."""
    for name, (kind, values) in features.items():
        column = _column(name)
        if seen and column not in spec:  # absent from the records before
            spec[column] = {"type": TYPES[kind], "feature": name, "nullable": True}
        known = spec.setdefault(column, {"type": TYPES[kind], "feature": name})
        if known["feature"] != name:
            raise ValueError(
                f"features {known['feature']!r} and {name!r} both become column {column!r}; "
                "pass --schema naming one of them"
            )
        if known["type"] != TYPES[kind]:
            raise ValueError(
                f"{path}: feature {name!r} is a {kind}_list here and a {known['type']} list in "
                "an earlier record; pass --schema"
            )
        if len(values) != 1:
            known["shape"] = [-1]
    for known in spec.values():
        if known["feature"] not in features:
            known["nullable"] = True


def _without_names(spec):
    return {c: {k: v for k, v in known.items() if k != "feature"} for c, known in spec.items()}


def schema(options):
    return _schema(options.input, options.pattern, options.schema, options.compression_type)


def dict_data(task_id, options):
    path = _files(options.input, options.pattern)[task_id]
    spec = schema(options)
    try:
        for index, offset, data, problem in records(path, options.compression_type):
            if problem:
                yield _bad(options, f"{path}:{index}", problem)
                continue
            row = {}
            for feature, (_, values) in parse_example(data).items():
                name = _column(feature)
                where = f"{path}: record {index} at byte {offset}"
                if name not in spec:
                    raise ValueError(
                        f"{where} has feature {feature!r}, which the schema lacks ({_whence(options)}"
                        f"); pass --schema with it ({name}: {{type: ...}}, nullable: true)"
                    )
                if not spec[name].get("shape"):
                    if len(values) != 1:
                        raise ValueError(
                            f"{where} holds {len(values)} values for feature {feature!r}, which "
                            f"the schema has as one value ({_whence(options)}); pass --schema "
                            f"with {name}: {{type: {spec[name]['type']}, shape: [-1]}}"
                        )
                    row[name] = values[0]
                else:
                    row[name] = values
            for name in spec:
                row.setdefault(name, None)
            yield row
    except TFRecordError as e:
        # A damaged header, a truncated file or compressed stream: nothing after it is trusted.
        yield _bad(options, path, str(e))


def _whence(options):
    if options.schema:
        return f"--schema {options.schema}"
    return f"inferred from the first {INFER_RECORDS} records"


@functools.lru_cache(maxsize=1024)
def _column(feature):
    return safe_name(feature)


def _bad(options, source, reason):
    if options.get("on_bad_input", "fail") == "skip":
        return Reject(source, reason)
    # Not a TFRecordError: dict_data's handler of those must not take it for another one.
    raise InputError(f"{reason} (--on-bad-input skip records it and goes on)")
