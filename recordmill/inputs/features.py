"""Columns from records of named feature lists, shared by the plugins that read them (``tfrecord``:
``tf.train.Example``; ``ofrecord``: OneFlow's ``OFRecord``).

A record is parsed to ``{feature name: (kind, values)}``; each plugin maps its kinds to column
types (``bytes`` -> bytes, ``float`` -> float32, ``int64`` -> int64, ...). The schema is inferred
from the first :data:`INFER_RECORDS` records: a feature holding one value in every record is a
scalar column, else a variable-length array, and a feature that some records lack is nullable.
Column names follow recordmill's rule for field names (``image/encoded`` -> ``image_encoded``).
"""

from __future__ import annotations

import fnmatch
import functools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from recordmill.dataset.schema import safe_name
from recordmill.errors import ConfigError, InputError

INFER_RECORDS = 1000  # records read, across the files in order, to infer the schema from

Features = Mapping[str, tuple[str, Sequence[Any]]]  # feature name -> (kind, values)


@functools.lru_cache(maxsize=4)
def input_files(path: str, pattern: str) -> tuple[str, ...]:
    """``path`` itself if it is a file, else the files in the folder that match ``pattern``,
    sorted by name."""
    if os.path.isfile(path):
        return (path,)
    if not os.path.isdir(path):
        raise InputError(f"--input {path} is neither a file nor a folder")
    names = sorted(n for n in os.listdir(path) if fnmatch.fnmatch(n, pattern))
    if not names:
        raise InputError(f"--input {path} holds no file matching --pattern {pattern!r}")
    return tuple(os.path.join(path, n) for n in names)


def check_pattern(path: str, pattern: str, default: str) -> None:
    """``--pattern`` given with a file as ``--input``, where it picks nothing: an error."""
    if pattern != default and os.path.isfile(path):
        raise ConfigError(
            f"--pattern {pattern} has no effect: --input {path} is a file (--pattern picks the "
            "files of a folder)"
        )


@functools.lru_cache(maxsize=1024)
def column(feature: str) -> str:
    """The column a feature becomes."""
    return safe_name(feature)


def infer_schema(
    files: Iterable[str],
    read: Callable[[str], Iterable[Features | None]],
    types: Mapping[str, str],
    damage: type[Exception] | tuple[type[Exception], ...],
    input_path: str,
) -> dict[str, dict[str, Any]]:
    """The schema of the first :data:`INFER_RECORDS` records that ``read(path)`` yields from
    ``files`` in order (None for a damaged record, which is not evidence). ``damage`` is what
    ``read`` raises for a file damaged beyond that record: the records before it still count,
    and ``dict_data`` reports it; it is raised only if no record could be read at all."""
    spec: dict[str, dict[str, Any]] = {}
    seen, first_damage = 0, None
    for path in files:
        try:
            for features in read(path):
                if features is None:
                    continue
                learn(spec, features, types, path, seen)
                seen += 1
                if seen >= INFER_RECORDS:
                    return without_names(spec)
        except damage as e:
            first_damage = first_damage or e
    if not spec and first_damage is not None:
        raise InputError(str(first_damage))
    if not spec:
        raise InputError(
            f"--input {input_path} holds no records to take the schema from; pass --schema"
        )
    return without_names(spec)


def learn(
    spec: dict[str, dict[str, Any]],
    features: Features,
    types: Mapping[str, str],
    path: str,
    seen: int,
) -> None:
    """Widen ``spec`` (column -> type, shape, nullable) to hold one more record's features;
    ``seen`` is how many records it holds already."""
    for name, (kind, values) in features.items():
        name_of_column = column(name)
        if seen and name_of_column not in spec:  # absent from the records before
            spec[name_of_column] = {"type": types[kind], "feature": name, "nullable": True}
        known = spec.setdefault(name_of_column, {"type": types[kind], "feature": name})
        if known["feature"] != name:
            raise InputError(
                f"features {known['feature']!r} and {name!r} both become column "
                f"{name_of_column!r}; pass --schema naming one of them"
            )
        if known["type"] != types[kind]:
            raise InputError(
                f"{path}: feature {name!r} is a {kind}_list here and a {known['type']} list in "
                "an earlier record; pass --schema"
            )
        if len(values) != 1:
            known["shape"] = [-1]
    for known in spec.values():
        if known["feature"] not in features:
            known["nullable"] = True


def without_names(spec: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``spec`` as a schema: without the feature names :func:`learn` keeps."""
    return {c: {k: v for k, v in known.items() if k != "feature"} for c, known in spec.items()}


def to_row(
    features: Features, spec: Mapping[str, Mapping[str, Any]], where: str, options: Any
) -> dict[str, Any]:
    """One record's features as a row of ``spec``: a scalar column takes the one value, an
    array column the list, and a column the record lacks None. ``where`` names the record."""
    row: dict[str, Any] = {}
    for feature, (_, values) in features.items():
        name = column(feature)
        if name not in spec:
            raise InputError(
                f"{where} has feature {feature!r}, which the schema lacks ({whence(options)}"
                f"); pass --schema with it ({name}: {{type: ...}}, nullable: true)"
            )
        if not spec[name].get("shape"):
            if len(values) != 1:
                raise InputError(
                    f"{where} holds {len(values)} values for feature {feature!r}, which "
                    f"the schema has as one value ({whence(options)}); pass --schema "
                    f"with {name}: {{type: {spec[name]['type']}, shape: [-1]}}"
                )
            row[name] = values[0]
        else:
            row[name] = values
    for name in spec:
        row.setdefault(name, None)
    return row


def whence(options: Any) -> str:
    """Where the schema came from, for messages."""
    if options.schema:
        return f"--schema {options.schema}"
    return f"inferred from the first {INFER_RECORDS} records"
