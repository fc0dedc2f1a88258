"""Built-in plugin ``litdata``: a LitData optimized dataset (``litdata.optimize``'s ``index.json``
and ``chunk-*.bin`` files, zstd-compressed or not, ``TokensLoader`` token chunks included), read
without litdata or torch.

    python writer.py --script litdata --input /data/optimized --output out/train --workers 8

``--input`` is the folder of ``index.json``. One task per chunk; each item is one row, each of its
leaves a column (named by its path: ``meta_tag``); a token dataset's items are rows of one
``tokens`` array each, as they were written. How each format is stored is in
``recordmill/inputs/litdata.py``. Pickled leaves run code when loaded and are refused unless
``--pickles bytes`` (each pickle's bytes) or ``--pickles load`` (loaded, as JSON text) says what
to do. A damaged chunk or item is bad input: with ``--on-bad-input skip``, one reject.
"""

import functools

from recordmill import kit
from recordmill.kit import InputError, bad_input, litdata, packed


def add_options(parser):
    parser.add_argument(
        "--input", required=True, type=kit.Path, help="the folder of a LitData index.json"
    )
    parser.add_argument(
        "--pickles",
        choices=packed.PICKLES,
        default="refuse",
        help="pickle leaves: refuse them (default), keep each pickle's bytes, or load them (runs "
        "code stored in the chunks: only for files you trust) as JSON text",
    )


@functools.lru_cache(maxsize=4)
def layout(folder):
    return litdata.read_index(folder)


def task_number(options):
    return len(layout(options.input).chunks)


@functools.lru_cache(maxsize=4)
def described(folder, pickles):
    """(leaf, recordmill column, field, decoder) of each leaf, in the items' order."""
    found = layout(folder)
    where = found.chunks[0][0]
    pickled = [n for n, f in zip(found.names, found.formats, strict=True) if f == "pickle"]
    packed.check_pickles(pickles, pickled, where)
    item = None
    if any(f.partition(":")[0] in ("numpy", "tensor") for f in found.formats):
        try:
            item = litdata.leaves(found, litdata.items(found, 0)[0])
        except (packed.Damaged, ValueError, IndexError) as e:
            raise InputError(f"{where}: its first item gives no array types ({e})") from None
    return packed.described(found.names, found.formats, item, litdata, pickles, where)


def schema(options):
    return {column: spec for _, column, spec, _ in described(options.input, options.pickles)}


def dict_data(task_id, options):
    found = layout(options.input)
    path = found.chunks[task_id][0]
    columns = described(options.input, options.pickles)
    yield kit.Source(path)
    try:
        items = litdata.items(found, task_id)
    except (packed.Damaged, OSError) as e:
        yield bad_input(options, path, f"{e}; expected a whole LitData chunk")
        return
    for i, item in enumerate(items):
        try:
            yield packed.row(columns, litdata.leaves(found, item))
        except ValueError as e:
            where = f"{path}, item {i}"
            yield bad_input(options, where, f"{where}, {e}")
