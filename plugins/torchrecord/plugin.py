"""Built-in plugin ``torchrecord``: TorchRecord's LMDB databases of ``TensorProtos``, without caffe2.

    python writer.py --script torchrecord --input torchrecord/ --encode png --output out/tr

``--input`` is one database (a folder holding ``data.mdb``) or a folder of them, the "sub-records"
``db0``, ``db1``, ... that TorchRecord's ``Writer(db_num=N)`` makes; a task per 32 MB of each
database's ``data.mdb``, or ``--tasks N`` key ranges of each. Records are read in the Writer's order (keys ``0``, ``1``, ...,
``10`` as numbers). Needs the ``lmdb`` package: ``pip install "recordmill[torchrecord]"``.

Each record holds TorchRecord's two tensors: the image (BYTE, dims width x height, RGB pixels) and
the label (its text, ``b"3"``, or a numeric tensor). Fields: ``database`` (its folder, relative to
``--input``), ``key``, ``label`` (int64 for TorchRecord's text labels; typed from the first
record), and the image fields of ``--encode`` (see ``recordmill/inputs/images.py``):
``passthrough`` (default) keeps the pixels untouched as ``image``, a uint8 [H, W, 3] tensor of the
first record's size (every image must have it); ``tensor --size S`` resizes to S x S; ``png`` or
``jpeg`` re-encode them into ``data``. A record that does not parse, or whose data length
disagrees with its dims, fails the run naming database, key and record number, or with
``--on-bad-input skip`` becomes a reject.
"""

import functools
import os

import numpy as np
from recordmill.kit.protobuf import ProtobufError
from recordmill.kit.torchrecord import (
    Database,
    TorchRecordError,
    databases,
    label_value,
    lmdb_module,
    parse_tensor_protos,
    rgb_image,
)

from recordmill import kit
from recordmill.kit import InputError, SchemaError, bad_input, images, tasks_for


def add_options(parser):
    parser.add_argument(
        "--input",
        required=True,
        type=kit.Path,
        help="a TorchRecord database (a folder holding data.mdb) or a folder of them (db0/, db1/...)",
    )
    parser.add_argument(
        "--tasks",
        type=int,
        default=0,
        help="split each database into this many key ranges, one task each (default: 0, a "
        "task per 32 MB of its data.mdb)",
    )
    images.add_options(
        parser, passthrough="the pixels untouched, uint8 HWC arrays of the first record's size"
    )


@functools.lru_cache(maxsize=4)
def _plan(path, tasks):
    """(database, first, end) of each task: positions in the database's key order; (database,
    None, None) for a database that cannot be opened (its task reports why)."""
    lmdb_module()  # without lmdb, say so first, whatever else is wrong
    plan = []
    found = databases(path)
    total = sum(os.path.getsize(os.path.join(db, "data.mdb")) for db in found)
    for db in found:
        try:
            with Database(db) as opened:
                entries = opened.entries()  # kept in LMDB's header: no record is read
        except TorchRecordError:
            plan.append((db, None, None))
            continue
        parts = max(
            1,
            min(tasks_for(os.path.getsize(os.path.join(db, "data.mdb")), tasks, total), entries),
        )
        bounds = [entries * part // parts for part in range(parts + 1)]
        plan.extend((db, bounds[i], bounds[i + 1]) for i in range(parts))
    return tuple(plan)


def task_number(options):
    images.check_options(options, pixels=True)
    return len(_plan(options.input, options.tasks))


def task_rows(task_id, options):
    _, first, end = _plan(options.input, options.tasks)[task_id]
    return None if first is None else end - first


_KEYS = {}  # (database, its size and time) -> its keys in order, listed once per process


def _keys(db):
    stat = os.stat(os.path.join(db.path, "data.mdb"))
    version = (db.path, stat.st_size, stat.st_mtime_ns)
    if version not in _KEYS:
        _KEYS[version] = db.keys()
    return _KEYS[version]


def _parse(value):
    """(pixels [H, W, 3], label) of one record; ValueError (or ProtobufError) says what is wrong."""
    tensors = parse_tensor_protos(value)
    if len(tensors) != 2:
        raise ValueError(
            f"it holds {len(tensors)} tensors, not TorchRecord's two (the image, the label)"
        )
    return rgb_image(tensors[0]), label_value(tensors[1])


@functools.lru_cache(maxsize=4)
def _first_record(path):
    """(where, pixels, label) of the first record of the first database that has one."""
    damage = None
    for db in databases(path):
        try:
            with Database(db) as opened:
                keys = _keys(opened)
                if not keys:
                    continue
                (key, value), *_ = opened.values(keys[:1])
        except TorchRecordError as e:
            damage = damage or e
            continue
        where = f"{db}: key {key.decode(errors='replace')!r} (record 0)"
        try:
            return (where, *_parse(value))
        except (ProtobufError, ValueError) as e:
            raise InputError(f"{where}: {e}; the schema is taken from it") from None
    if damage is not None:
        raise InputError(str(damage))
    raise InputError(f"--input {path} holds no records to take the schema from")


def _label_type(label):
    if isinstance(label, np.ndarray):
        return {"type": "int64" if label.dtype.kind in "iu" else label.dtype.name, "shape": [-1]}
    if isinstance(label, str):
        return {"type": "string"}
    if isinstance(label, (bool, np.bool_)):
        return {"type": "bool"}
    if isinstance(label, np.floating):
        return {"type": label.dtype.name}
    return {"type": "int64"}


def schema(options):
    _, pixels, label = _first_record(options.input)
    if options.encode == "passthrough":
        fields = {
            "image": {"type": "uint8", "shape": list(pixels.shape)},
            "height": {"type": "int32"},
            "width": {"type": "int32"},
            "channels": {"type": "int32"},
        }
    else:
        fields = images.schema(options)
    return {
        "database": {"type": "string"},
        "key": {"type": "string"},
        "label": _label_type(label),
        **fields,
    }


def _image_fields(pixels, options, where, first):
    """The image fields of ``--encode`` for one record's pixels; ``first`` is the first record's
    (where, pixels, label), whose size passthrough keeps."""
    if options.encode == "passthrough" and pixels.shape != first[1].shape:
        height, width = first[1].shape[:2]
        raise SchemaError(
            f"{where}: the image is {pixels.shape[1]} x {pixels.shape[0]} pixels, the "
            f"first record's {width} x {height} ({first[0]}); --encode passthrough keeps "
            "one size: pass --encode tensor --size S (or --size H W), or --encode png"
        )
    return images.encode_pixels(pixels, options)


def _label(label, first_label):
    """``label`` of the schema's kind, which the first record's label set: a one-value tensor
    after a first label of several values is a list of one, not a scalar."""
    if isinstance(first_label, np.ndarray) and not isinstance(label, np.ndarray):
        return np.atleast_1d(label)
    return label


def _name(db, options):
    name = os.path.relpath(db, options.input)
    return os.path.basename(os.path.abspath(db)) if name == "." else name


def dict_data(task_id, options):
    path, first, end = _plan(options.input, options.tasks)[task_id]
    name = _name(path, options)
    # Before this task's database is opened: LMDB opens a database once per process.
    first_record = _first_record(options.input)
    try:
        with Database(path) as db:
            keys = _keys(db)[first:end]
            yield kit.Source(path, first=first)  # rows named by their record in the database
            for number, (key, value) in enumerate(db.values(keys), start=first):
                text = key.decode(errors="replace")
                where = f"{path}: key {text!r} (record {number})"
                if value is None:
                    yield bad_input(options, f"{path}:{text}", f"{where}: the key has gone")
                    continue
                try:
                    pixels, label = _parse(value)
                except (ProtobufError, ValueError) as e:
                    yield bad_input(options, f"{path}:{text}", f"{where}: {e} (damaged record)")
                    continue
                fields = _image_fields(pixels, options, where, first_record)
                label = _label(label, first_record[2])
                yield {"database": name, "key": text, "label": label, **fields}
    except TorchRecordError as e:
        # A database that cannot be opened, or LMDB failing inside it: nothing after is trusted.
        yield bad_input(options, path, str(e))
