"""``--append``: a write that adds its rows after a dataset's, as its next version (see
dataset/versions.py for what the manifest keeps).

What differs from a first write:

- Under the output's lock, before any task runs (:func:`prepare`), the dataset's manifest becomes
  the run's ``base``: the format, compression and row group size are the dataset's (a
  ``--format``, ``--compression`` or ``--row-group-size`` given that differs is refused), and so
  is the schema: a declared one that differs is refused here, an inferred one after the tasks
  (:func:`check_schema`), before anything is published. A folder that is not a dataset gets
  version 1, as from a first write.
- The new partitions' names carry their version (``part-v0002-...``): they never clash with the
  dataset's, and sort after them wherever files are ordered by name.
- The commit. On a local disk the staging folder also gets hard links of the dataset's files
  (:func:`link_base`): with the new partitions and manifest it is the whole new version, which
  replaces the output by the exchange ``--overwrite`` uses (``commit.publish_local``): one atomic
  rename, the output never missing, no file of an older or unfinished version ever in it; a reader
  holding the older version's files keeps reading them. On object storage, where there is neither
  rename nor link, the new files are copied in beside the dataset's (step ``moved``: new names, so
  nothing a reader of the older version reads changes), then the new manifest is written last
  (``published``): :func:`publish_object_store`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from recordmill.dataset import layout, versions
from recordmill.dataset import manifest as manifest_file
from recordmill.dataset.schema import expected_text, first_difference, type_shape_layout
from recordmill.dataset.storage import Store
from recordmill.engine.commit import step
from recordmill.errors import ConfigError, OutputError, SchemaError

if TYPE_CHECKING:
    from recordmill.engine.plan import Run


def existing(final: Store) -> dict[str, Any] | None:
    """The manifest of the dataset at the output; None where there is none."""
    if manifest_file.find(final) is None:
        if final.is_file(layout.OLD_MANIFEST):
            raise OutputError(
                f"cannot --append to {final}: it is in format version 1, written by an earlier "
                f"recordmill; write it again with --overwrite (recordmill info {final} says how)"
            )
        return None
    return manifest_file.load(final)


def replaced_version(run: Run, final: Store) -> int | None:
    """With ``--overwrite``, the version of the dataset it replaces (None: there is none)."""
    if not run.settings.overwrite or manifest_file.find(final) is None:
        return None
    try:
        return versions.current(manifest_file.load(final))
    except OutputError:
        return None  # another format, or damaged: replaced all the same


def prepare(run: Run, final: Store) -> Run:
    """The run as it appends to the dataset at ``final`` (a first write where there is none):
    the dataset's format, compression and row group size; a declared schema checked. (Called
    under the output's lock, so that the dataset cannot change before the run is published.)"""
    settings = run.settings
    if not settings.append:
        return run
    base = existing(final)
    if base is None:
        return dataclasses.replace(
            run,
            settings=dataclasses.replace(
                settings,
                format=settings.format or "parquet",
                compression=settings.compression or "auto",
            ),
        )
    dataset = base.get("settings") or {}
    fmt, compression = base["format"], dataset.get("compression", "auto")
    given = {
        "--format": (settings.format, fmt),
        "--compression": (settings.compression, compression),
        "--row-group-size": (settings.row_group_size, dataset.get("row_group_size")),
    }
    for flag, (mine, theirs) in given.items():
        if mine is not None and mine != theirs:
            raise ConfigError(
                f"cannot --append {flag} {mine} to {final}: the dataset's is {theirs} (an "
                f"append takes the dataset's; leave {flag} out)"
            )
    if versions.current(base) >= layout.MAX_VERSION:
        raise OutputError(
            f"cannot --append to {final}: it has {layout.MAX_VERSION} versions, the most a "
            "dataset holds; write it again with --overwrite"
        )
    if len(base["partitions"]) + settings.partitions > manifest_file.MAX_PARTITIONS:
        raise OutputError(
            f"cannot --append {settings.partitions:,} partitions to {final}: it has "
            f"{len(base['partitions']):,}, and a dataset holds at most "
            f"{manifest_file.MAX_PARTITIONS:,}; give fewer --partitions"
        )
    if run.declared is not None:
        check_schema(run.declared, base, "declared", schema_flag="schema" in run.options)
    resolved = dataclasses.replace(settings, format=fmt, compression=compression)
    return dataclasses.replace(run, settings=resolved, base=base)


def check_schema(
    schema: pa.Schema, base: dict[str, Any], how: str, *, schema_flag: bool = False
) -> None:
    """Refuse rows whose schema (``how``: declared or inferred) is not the dataset's, naming the
    first field that differs; ``schema_flag``: the plugin takes a ``--schema`` option, which
    the refusal names as the way to give the field the dataset's type."""
    dataset = manifest_file.arrow_schema(base)
    if schema.equals(dataset, check_metadata=True):
        return
    mine = f"this plugin's {how} schema"
    differs = first_difference(dataset, schema)
    if differs is not None:
        field, found = differs
        if found is None:
            raise SchemaError(
                f"cannot --append: field {field.name!r} is in the dataset, not in {mine}"
            )
        hint = ""
        if schema_flag:
            hint = f" (--schema gives it the dataset's type: '{field.name}: {_yaml(field)}')"
        elif how == "inferred":
            hint = (
                f" (inferred from the rows: declare it {_text(field)} in the plugin's schema, "
                f"as the csv plugin's --schema '{field.name}: {_text(field)}' does)"
            )
        raise SchemaError(
            f"cannot --append: field {field.name!r} is {_text(field)} in the dataset, "
            f"{_text(found)} in {mine}{hint}"
        )
    extra = [name for name in schema.names if name not in dataset.names]
    if extra:
        raise SchemaError(f"cannot --append: field {extra[0]!r} of {mine} is not in the dataset")
    raise SchemaError(
        f"cannot --append: {mine} has the dataset's fields in another order "
        f"({', '.join(schema.names)}; the dataset: {', '.join(dataset.names)})"
    )


def _yaml(field: pa.Field) -> str:
    """The field as a line of a ``--schema`` YAML file says it."""
    type_name, shape, _ = type_shape_layout(field)
    if shape is None and not field.nullable:
        return type_name
    keys = [f"type: {type_name}"] + ([f"shape: {list(shape)}"] if shape is not None else [])
    return "{" + ", ".join(keys + (["nullable: true"] if field.nullable else [])) + "}"


def _text(field: pa.Field) -> str:
    return expected_text(field) + (" (nullable)" if field.nullable else "")


def link_base(staging: Store, final: Store, base: dict[str, Any]) -> None:
    """Local disks: the dataset's partitions and rejects, hard-linked into the staging folder,
    which then holds the whole new version (copied where the filesystem has no hard links)."""
    for name in [p["file"] for p in base["partitions"]] + versions.rejects_files(base):
        source, target = final.path(name), staging.path(name)
        if os.path.lexists(target):
            if os.path.samefile(source, target):
                continue  # linked by the run that was interrupted
            os.unlink(target)
        try:
            os.link(source, target)
        except OSError:
            shutil.copyfile(source, target)
    step("linked")


def is_append(manifest: bytes, name: str) -> bool:
    """Whether a staged manifest is a version after the first."""
    return versions.current(manifest_file.parse(manifest, name)) > 1


def check_base(staging: Store, final: Store, staged: bytes, name: str) -> None:
    """Refuse to publish an append whose dataset is no longer the one it was appended to."""
    new = manifest_file.parse(staged, name)
    now = existing(final)
    have = 0 if now is None else versions.current(now)
    files = [] if now is None else [(p["file"], p["checksum"]) for p in now["partitions"]]
    mine = [(p["file"], p["checksum"]) for p in new["partitions"][: len(files)]]
    base = versions.current(new) - 1
    if have != base or files != mine:
        now_is = f"version {have} now" if have != base else f"another version {have} now"
        raise OutputError(
            f"cannot publish the append to {final}: it was made on version {base} of the "
            f"dataset, which holds {now_is} (it was replaced since); delete {staging} and "
            "append again"
        )


def publish_object_store(staging: Store, final: Store, name: str, manifest: bytes) -> None:
    """Object storage: the new version's files copied in beside the dataset's, the manifest
    ``name`` written last; until then the older version is the dataset, whole."""
    for n in sorted(staging.listdir()):
        if n != name:
            final.fs.copy_file(staging.path(n), final.path(n))
            step("moved")
    final.write_bytes(name, manifest)
    step("published")
    staging.delete_tree()
