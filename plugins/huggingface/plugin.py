"""Built-in plugin ``huggingface``: a Hugging Face dataset already on this machine, read without
``datasets`` and without the network.

    python writer.py --script huggingface --input ~/data/mnist --split train --output out/mnist

``--input`` is a folder ``save_to_disk`` wrote: a ``Dataset`` (``dataset_info.json``,
``state.json`` and its ``data-*.arrow`` files) or a ``DatasetDict`` (``dataset_dict.json`` and a
folder a split; ``--split`` picks one, by default ``train`` or the only one). Or the Parquet or
Arrow files of a Hub dataset in the local cache (``~/.cache/huggingface/hub/datasets--ORG--NAME/
snapshots/HASH/...``, a file or a folder; ``--pattern``), typed by the features Hugging Face keeps
in each Parquet file's metadata. One task per file.

The features become columns: a ``Value`` its type; a ``ClassLabel`` its int64 label and a string
column ``NAME_name`` with the class's name; an ``Image`` or ``Audio`` the file's bytes as stored
(read from its path where only a path is kept); a ``Sequence``/``List`` of numbers or strings an
array (``Array2D``/``Array3D`` of their fixed shape); anything else nested (dicts, lists of
dicts) its JSON text. Every column is nullable, as Hugging Face's values may be None.
"""

import fnmatch
import functools
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from recordmill import kit
from recordmill.kit import ConfigError, InputError, bad_input, safe_name

PATTERN = "*.parquet"
NUMBERS = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
}  # fmt: skip
TEXT = {"string": "string", "large_string": "string", "binary": "bytes", "large_binary": "bytes"}
FILES = ("Image", "Audio", "Video", "Pdf")
LISTS = ("Sequence", "List", "LargeList")


def add_options(parser):
    parser.add_argument(
        "--input",
        required=True,
        type=kit.Path,
        help="a save_to_disk folder, or Parquet/Arrow files of a Hub dataset (a file or a folder)",
    )
    parser.add_argument("--split", help="a DatasetDict's split (default: train, or the only one)")
    parser.add_argument(
        "--pattern", default=PATTERN, help="files to take from a folder (default: %(default)s)"
    )


@functools.lru_cache(maxsize=4)
def source(given, split, pattern):
    """(the data files, the features as Hugging Face writes them) of ``--input``."""
    if os.path.isfile(os.path.join(given, "dataset_dict.json")):
        with open(os.path.join(given, "dataset_dict.json")) as f:
            splits = json.load(f)["splits"]
        chosen = split or ("train" if "train" in splits or len(splits) != 1 else splits[0])
        if split is None and chosen not in splits:
            raise ConfigError(f"give --split: the dataset's splits are {', '.join(splits)}")
        if chosen not in splits:
            raise ConfigError(f"--split {chosen}: the dataset's splits are {', '.join(splits)}")
        return source(os.path.join(given, chosen), None, pattern)
    if split:
        raise ConfigError(f"--split {split}: {given} is not a DatasetDict (no dataset_dict.json)")
    if os.path.isfile(os.path.join(given, "state.json")):
        with open(os.path.join(given, "state.json")) as f:
            files = [os.path.join(given, d["filename"]) for d in json.load(f)["_data_files"]]
        with open(os.path.join(given, "dataset_info.json")) as f:
            return tuple(files), json.dumps(json.load(f)["features"])
    files = _files(given, pattern)
    return files, json.dumps(_parquet_features(files[0]))


def _files(given, pattern):
    if os.path.isfile(given):
        return (given,)
    if not os.path.isdir(given):
        raise InputError(f"--input {given} is neither a file nor a folder")
    found = sorted(
        os.path.join(root, n)
        for root, _, names in os.walk(given)
        for n in names
        if fnmatch.fnmatch(n, pattern)
    )
    if not found:
        raise InputError(
            f"--input {given} holds no save_to_disk dataset (state.json) and no file matching "
            f"--pattern {pattern!r}"
        )
    return tuple(found)


def _parquet_features(path):
    if path.endswith(".parquet"):
        metadata = pq.read_schema(path).metadata or {}
    else:  # an Arrow file of the Hub's cache: a stream (or a file) with the same metadata
        with pa.memory_map(path) as f:
            try:
                metadata = pa.ipc.open_stream(f).schema.metadata or {}
            except pa.ArrowInvalid:
                metadata = pa.ipc.open_file(f).schema.metadata or {}
    info = json.loads(metadata.get(b"huggingface", b"{}")).get("info", {})
    if "features" not in info:
        raise InputError(f"{path}: no Hugging Face features in its metadata (not a Hub file?)")
    return info["features"]


def task_number(options):
    return len(source(options.input, options.split, options.pattern)[0])


def _spec(feature):
    """A feature as recordmill fields: {suffix: spec} ("" for the column itself)."""
    kind = feature.get("_type")
    if kind == "Value":
        dtype = feature["dtype"]
        if dtype in NUMBERS:
            return {"": {"type": dtype, "nullable": True}}
        return {"": {"type": TEXT.get(dtype, "string"), "nullable": True}}
    if kind == "ClassLabel":
        return {
            "": {"type": "int64", "nullable": True},
            "_name": {"type": "string", "nullable": True},
        }
    if kind in FILES:
        return {"": {"type": "bytes", "nullable": True}}
    if kind in ("Array2D", "Array3D", "Array4D", "Array5D"):
        return {"": {"type": feature["dtype"], "shape": list(feature["shape"]), "nullable": True}}
    dtype = _plain_list(feature)
    if dtype is not None:
        value = dtype if dtype in NUMBERS else TEXT[dtype]
        return {"": {"type": value, "shape": [-1], "nullable": True}}
    return {"": {"type": "string", "nullable": True}}  # nested: its JSON text


def _plain_list(feature):
    """The value type of a list of numbers or strings (an array column); None otherwise."""
    inner = feature.get("feature")
    if feature.get("_type") in LISTS and isinstance(inner, dict) and inner.get("_type") == "Value":
        dtype = inner["dtype"]
        return dtype if dtype in NUMBERS or dtype in TEXT else None
    return None


@functools.lru_cache(maxsize=4)
def columns(given, split, pattern):
    """(column name, feature, {field: spec}) for every feature, in order."""
    features = json.loads(source(given, split, pattern)[1])
    out = []
    for name, feature in features.items():
        if isinstance(feature, list) and feature:  # [feature]: a list of it
            feature = {"_type": "List", "feature": feature[0]}
        if not isinstance(feature, dict) or "_type" not in feature:
            feature = {"_type": "nested"}
        fields = {safe_name(name) + suffix: spec for suffix, spec in _spec(feature).items()}
        out.append((name, feature, fields))
    return tuple(out)


def schema(options):
    return {
        field: spec
        for _, _, fields in columns(options.input, options.split, options.pattern)
        for field, spec in fields.items()
    }


def _batches(path):
    if path.endswith(".parquet"):
        yield from pq.ParquetFile(path).iter_batches(batch_size=1024)
        return
    with pa.memory_map(path) as source_file:
        try:
            reader = pa.ipc.open_stream(source_file)
        except pa.ArrowInvalid:  # an Arrow IPC file (random access) rather than a stream
            reader = pa.ipc.open_file(source_file)
            yield from (reader.get_batch(i) for i in range(reader.num_record_batches))
            return
        yield from reader


def _value(feature, value, folder):
    """A feature's value as its column holds it (see the module); ValueError for a file that
    cannot be read."""
    kind = feature.get("_type")
    if value is None:
        return None
    if kind in FILES:
        return _file_bytes(value, folder) if isinstance(value, dict) else value
    if kind.startswith("Array"):
        return np.asarray(value, dtype=feature["dtype"])
    if kind == "Value" and feature["dtype"] not in NUMBERS and feature["dtype"] not in TEXT:
        return str(value)  # a timestamp, a date, a decimal: as text
    if kind in ("Value", "ClassLabel") or _plain_list(feature) is not None:
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _file_bytes(value, folder):
    """An Image's (Audio's...) bytes, or the file its path names inside the dataset's folder."""
    if value.get("bytes") is not None:
        return value["bytes"]
    path = value.get("path")
    if not path:
        return None
    full = os.path.realpath(os.path.join(folder, path))
    if os.path.commonpath([full, os.path.realpath(folder)]) != os.path.realpath(folder):
        raise ValueError(f"its file {path!r} is outside the dataset's folder {folder}")
    try:
        with open(full, "rb") as f:
            return f.read()
    except OSError as e:
        raise ValueError(f"its file {path!r} cannot be read ({e.strerror or e})") from None


def dict_data(task_id, options):
    files = source(options.input, options.split, options.pattern)[0]
    path = files[task_id]
    described = columns(options.input, options.split, options.pattern)
    yield kit.Source(path)
    folder = os.path.dirname(path)
    before = 0  # the file's rows in the batches before this one
    for batch in _batches(path):
        values, before = batch.to_pydict(), before + batch.num_rows
        for i in range(batch.num_rows):
            row = {}
            try:
                for name, feature, _ in described:
                    value = values[name][i]
                    column = safe_name(name)
                    row[column] = _value(feature, value, folder)
                    if feature.get("_type") == "ClassLabel":
                        row[column + "_name"] = _class_name(feature, value)
            except ValueError as e:
                at = before - batch.num_rows + i
                yield bad_input(options, f"{path} row {at}", f"{path}, row {at}, {name!r}: {e}")
                continue
            yield row


def _class_name(feature, label):
    names = feature.get("names") or []
    return names[label] if label is not None and 0 <= label < len(names) else None
