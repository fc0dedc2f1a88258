"""Built-in plugin ``mnist``: the original MNIST idx files (and look-alikes such as Fashion-MNIST).

    python writer.py --script mnist --data-dir /data/mnist --split train --output out/mnist

Finds ``{split}-images-idx3-ubyte`` and ``{split}-labels-idx1-ubyte`` in ``--data-dir``, gzipped
(``.gz``) or not. The rows are split into ``--tasks`` consecutive ranges.

Fields: label (int32) and the image: ``image`` (uint8, 28 x 28) with ``--image-format tensor``
(default), or ``data`` (PNG bytes) with ``--image-format png``.
"""

import functools
import io
import os

from PIL import Image
from recordmill.kit.idx import read_idx

from recordmill import kit
from recordmill.kit import InputError


def add_options(parser):
    parser.add_argument(
        "--data-dir", required=True, type=kit.Path, help="folder holding the idx files"
    )
    parser.add_argument(
        "--split", default="train", help="file name prefix: train or t10k (default: train)"
    )
    parser.add_argument(
        "--image-format",
        choices=("tensor", "png"),
        default="tensor",
        help="uint8 arrays (default) or PNG bytes",
    )
    parser.add_argument("--tasks", type=int, default=4, help="number of tasks (default: 4)")


def _find(options, kind):
    names = [f"{options.split}-{kind}", f"{options.split}-{kind}.gz"]
    for name in names:
        path = os.path.join(options.data_dir, name)
        if os.path.isfile(path):
            return path
    raise InputError(f"found neither {' nor '.join(names)} in --data-dir {options.data_dir}")


@functools.lru_cache(maxsize=2)
def _load(images_path, labels_path):
    pixels, labels = read_idx(images_path), read_idx(labels_path)
    if pixels.ndim != 3 or labels.ndim != 1 or len(pixels) != len(labels):
        raise InputError(
            f"{images_path} holds {pixels.shape} and {labels_path} holds {labels.shape}: "
            "expected N images and N labels"
        )
    return pixels, labels


def _data(options):
    return _load(_find(options, "images-idx3-ubyte"), _find(options, "labels-idx1-ubyte"))


def _bounds(options, total):
    n = max(1, min(options.tasks, total))
    return [total * t // n for t in range(n + 1)]


def task_number(options):
    pixels, _ = _data(options)
    return len(_bounds(options, len(pixels))) - 1


def task_rows(task_id, options):
    pixels, _ = _data(options)
    bounds = _bounds(options, len(pixels))
    return bounds[task_id + 1] - bounds[task_id]


def schema(options):
    pixels, _ = _data(options)
    if options.image_format == "png":
        return {"label": {"type": "int32"}, "data": {"type": "bytes"}}
    return {"label": {"type": "int32"}, "image": {"type": "uint8", "shape": list(pixels.shape[1:])}}


def dict_data(task_id, options):
    pixels, labels = _data(options)
    bounds = _bounds(options, len(pixels))
    # Rows named by their image's number in the idx file.
    yield kit.Source(_find(options, "images-idx3-ubyte"), first=bounds[task_id])
    for i in range(bounds[task_id], bounds[task_id + 1]):
        if options.image_format == "png":
            buffer = io.BytesIO()
            Image.fromarray(pixels[i]).save(buffer, "PNG")
            yield {"label": int(labels[i]), "data": buffer.getvalue()}
        else:
            yield {"label": int(labels[i]), "image": pixels[i]}
