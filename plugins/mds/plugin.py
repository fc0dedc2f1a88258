"""Built-in plugin ``mds``: a MosaicML MDS dataset (``streaming.MDSWriter``'s ``index.json`` and
``shard.*.mds`` files, compressed or not), read without mosaicml-streaming.

    python writer.py --script mds --input /data/mds/train --output out/train --workers 8

``--input`` is the folder of ``index.json``. One task per shard; each sample is one row, its
columns those of the index, named as recordmill names columns (``safe_name``). How each
encoding is stored (images as their bytes, arrays of their dtype, ``json`` as text) is in
``recordmill/inputs/mds.py``. Pickled columns (``pkl``) run code when loaded and are refused
unless ``--pickles bytes`` (each pickle's bytes, never loaded) or ``--pickles load`` (loaded, as
JSON text) says what to do. A damaged shard (cut short, another sample count than its index
says, bad offsets) or sample is bad input: with ``--on-bad-input skip`` it is one reject.
"""

import functools

from recordmill import kit
from recordmill.kit import InputError, bad_input, mds, packed


def add_options(parser):
    parser.add_argument(
        "--input", required=True, type=kit.Path, help="the folder of an MDS dataset's index.json"
    )
    parser.add_argument(
        "--pickles",
        choices=packed.PICKLES,
        default="refuse",
        help="pkl columns: refuse them (default), keep each pickle's bytes, or load them (runs "
        "code stored in the shards: only for files you trust) as JSON text",
    )


@functools.lru_cache(maxsize=4)
def shards(folder):
    return mds.read_index(folder)


def task_number(options):
    return len(shards(options.input))


@functools.lru_cache(maxsize=4)
def described(folder, pickles):
    """(MDS column, recordmill column, field, decoder) of each column, in the index's order."""
    first = shards(folder)[0]
    pickled = [n for n, e in zip(first.names, first.encodings, strict=True) if e.startswith("pkl")]
    packed.check_pickles(pickles, pickled, first.path)
    sample = None
    if any(e.split(":")[0] == "ndarray" for e in first.encodings):
        try:
            sample = mds.columns(first, mds.samples(first)[0])
        except (packed.Damaged, ValueError, IndexError) as e:
            raise InputError(f"{first.path}: its first sample gives no array types ({e})") from None
    return packed.described(first.names, first.encodings, sample, mds, pickles, first.path)


def schema(options):
    return {column: spec for _, column, spec, _ in described(options.input, options.pickles)}


def dict_data(task_id, options):
    shard = shards(options.input)[task_id]
    columns = described(options.input, options.pickles)
    yield kit.Source(shard.path)
    try:
        samples = mds.samples(shard)
    except (packed.Damaged, OSError) as e:
        yield bad_input(options, shard.path, f"{e}; expected a whole MDS shard")
        return
    for i, sample in enumerate(samples):
        try:
            yield packed.row(columns, mds.columns(shard, sample))
        except ValueError as e:
            where = f"{shard.path}, sample {i}"
            yield bad_input(options, where, f"{where}, {e}")
