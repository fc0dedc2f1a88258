"""Built-in plugin ``ofrecord``: OneFlow's OFRecord part files, without OneFlow.

    python writer.py --script ofrecord --input /data/mnist/train --output out/train

``--input`` is a part file or a folder of them (``--pattern``, default ``part-*``); one task per
file. Each record is an ``int64`` length and a serialized ``OFRecord`` (see
``recordmill/inputs/ofrecord.py``); a length that runs past the end of the file, or a message
that does not parse, fails the run naming file, record and byte offset (``--on-bad-input skip``:
a reject instead).

Each feature becomes a column: bytes_list -> bytes, float_list -> float32, double_list -> float64,
int32_list -> int32, int64_list -> int64; a feature holding one value in every record is a scalar
column, else a variable-length array, and a feature that some records lack is nullable. The types
are taken from the first ``INFER_RECORDS`` records, or from ``--schema`` (YAML, as for the
tfrecord plugin). Column names follow recordmill's rule for field names (``image/raw`` ->
``image_raw``). ``--image-field images`` sends that bytes feature (one image per record) through
the image pipeline (``--encode``, ``--size``, ``--verify``: ``recordmill/inputs/images.py``),
whose fields (``data``, or ``image``, ``height``, ``width``, ``channels``) take its place.
"""

import functools

from recordmill.kit.features import INFER_RECORDS
from recordmill.kit.ofrecord import OFRecordError, parse_ofrecord, records
from recordmill.kit.protobuf import ProtobufError

from recordmill import Reject, kit
from recordmill.kit import ConfigError, bad_input, features, from_yaml, images, safe_name

TYPES = {
    "bytes": "bytes",
    "float": "float32",
    "double": "float64",
    "int32": "int32",
    "int64": "int64",
}
PATTERN = "part-*"


def add_options(parser):
    parser.add_argument(
        "--input", required=True, type=kit.Path, help="an OFRecord part file or a folder of them"
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
        "--image-field",
        metavar="FEATURE",
        help="a bytes feature holding one encoded image per record, to send through the image "
        "pipeline (--encode, --size, --verify); its fields replace the feature's column",
    )
    images.add_options(parser)


def task_number(options):
    features.check_pattern(options.input, options.pattern, PATTERN)
    return len(features.input_files(options.input, options.pattern))


# No task_rows: the format has no index, and counting means a pass over every record's length.


def _read(path):
    for _, _, data in records(path):
        try:
            yield parse_ofrecord(data)
        except ProtobufError:
            yield None  # not evidence; dict_data reports it


@functools.lru_cache(maxsize=4)
def _feature_schema(input_path, pattern, schema_path):
    if schema_path:
        return from_yaml(schema_path, rename=safe_name)
    files = features.input_files(input_path, pattern)
    return features.infer_schema(files, _read, TYPES, OFRecordError, input_path)


def _image_column(options, spec):
    """The column of ``--image-field``, checked against the features' schema; None without it."""
    if not options.image_field:
        image_options = images.given_options(options)
        if image_options:
            raise ConfigError(
                f"{image_options[0]} has no effect without --image-field FEATURE (the image "
                "options are for the feature it names)"
            )
        return None
    images.check_options(options)
    name = features.column(options.image_field)
    if name not in spec:
        raise ConfigError(f"--image-field {options.image_field}: no such feature ({sorted(spec)})")
    if spec[name]["type"] != "bytes" or spec[name].get("shape"):
        raise ConfigError(
            f"--image-field {options.image_field}: the feature must hold one bytes value per "
            f"record, it is {spec[name]}"
        )
    clash = set(images.schema(options)) & (set(spec) - {name})
    if clash:
        raise ConfigError(
            f"--image-field {options.image_field}: the image fields {sorted(clash)} clash with "
            "features of the same name"
        )
    return name


def schema(options):
    spec = _feature_schema(options.input, options.pattern, options.schema)
    name = _image_column(options, spec)
    if name is None:
        return spec
    image_fields = images.schema(options)
    if spec[name].get("nullable"):
        image_fields = {k: {**v, "nullable": True} for k, v in image_fields.items()}
    return {**{k: v for k, v in spec.items() if k != name}, **image_fields}


def dict_data(task_id, options):
    path = features.input_files(options.input, options.pattern)[task_id]
    spec = _feature_schema(options.input, options.pattern, options.schema)
    image = _image_column(options, spec)
    yield kit.Source(path)  # a row that does not fit the schema is named by its record
    try:
        for index, offset, data in records(path):
            where = f"{path}: record {index} at byte {offset}"
            try:
                parsed = parse_ofrecord(data)
            except ProtobufError as e:
                yield bad_input(
                    options, f"{path}:{index}", f"{where}: not an OFRecord message: {e}"
                )
                continue
            row = features.to_row(parsed, spec, where, options)
            if image is not None:
                row = _with_image(row, image, f"{path}:{index}", options)
            yield row
    except OFRecordError as e:
        # A length past the end of the file: nothing after it can be found.
        yield bad_input(options, path, str(e))


def _with_image(row, name, source, options):
    """``row`` with the image fields of its ``name`` bytes in place of them (a Reject for a bad
    image with ``--on-bad-input skip``)."""
    data = row.pop(name)
    if data is None:  # the feature is absent from this record (a nullable column)
        return {**row, **dict.fromkeys(images.schema(options))}
    try:
        return {**row, **images.encode_bytes(data, source, options)}
    except images.BadImage as e:
        if options.get("on_bad_input", "fail") == "skip":
            return Reject(e.path, e.reason)
        raise
