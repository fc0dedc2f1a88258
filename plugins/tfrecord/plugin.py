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

import functools

from recordmill.kit.features import INFER_RECORDS
from recordmill.kit.tfrecord import COMPRESSIONS, TFRecordError, parse_example, records

from recordmill import kit
from recordmill.kit import bad_input, features, from_yaml, safe_name

TYPES = {"bytes": "bytes", "float": "float32", "int64": "int64"}
PATTERN = "*.tfrecord*"


def add_options(parser):
    parser.add_argument(
        "--input", required=True, type=kit.Path, help="a TFRecord file or a folder of them"
    )
    parser.add_argument(
        "--pattern",
        default=PATTERN,
        help="files to take from a folder (default: %(default)s)",
    )
    parser.add_argument(
        "--schema",
        type=kit.Path,
        help=f"YAML file: feature name -> type (default: from the first {INFER_RECORDS} records)",
    )
    parser.add_argument(
        "--compression-type",
        choices=COMPRESSIONS,
        default="auto",
        help="how the input files are compressed, TensorFlow's compression_type (default: "
        "%(default)s, told by their first bytes; --compression is the output's)",
    )


def task_number(options):
    features.check_pattern(options.input, options.pattern, PATTERN)
    return len(features.input_files(options.input, options.pattern))


@functools.lru_cache(maxsize=4)
def _schema(input_path, pattern, schema_path, compression):
    if schema_path:
        return from_yaml(schema_path, rename=safe_name)

    def read(path):
        for _, _, data, problem in records(path, compression):
            try:
                parsed = None if problem else parse_example(data)
            except ValueError:
                parsed = None
            yield parsed  # None for a damaged record: not evidence; dict_data reports it

    files = features.input_files(input_path, pattern)
    return features.infer_schema(files, read, TYPES, TFRecordError, input_path)


def schema(options):
    return _schema(options.input, options.pattern, options.schema, options.compression_type)


def dict_data(task_id, options):
    path = features.input_files(options.input, options.pattern)[task_id]
    spec = schema(options)
    yield kit.Source(path)  # a row that does not fit the schema is named by its record
    try:
        for index, offset, data, problem in records(path, options.compression_type):
            if problem:
                yield bad_input(options, f"{path}:{index}", problem)
                continue
            where = f"{path}: record {index} at byte {offset}"
            try:
                parsed = parse_example(data)
            except ValueError as e:
                # A ProtobufError, or a feature name not UTF-8, a float_list not a multiple of
                # 4 bytes: the CRC matched (the writer wrote it so), yet the record is damaged.
                reason = f"{where}: not a tf.train.Example message: {e}"
                yield bad_input(options, f"{path}:{index}", reason)
                continue
            yield features.to_row(parsed, spec, where, options)
    except TFRecordError as e:
        # A damaged header, a truncated file or compressed stream: nothing after it is trusted.
        yield bad_input(options, path, str(e))
