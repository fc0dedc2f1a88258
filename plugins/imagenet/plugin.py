"""Built-in plugin ``imagenet``: an ImageNet-style folder, one sub-folder per class.

    python writer.py --script imagenet --image-dir /data/imagenet/train \
        --label-file labels.txt --output out/imagenet --partitions 8

One task per class folder. Labels come from ``--label-file`` (lines like ``n02119789 0``, as in
MindRecord's ImageNet example) or, without one, from the position of the folder name in sorted
order. Images are stored as their original file bytes, untouched.

Fields: label (int32), data (bytes), file_name (string, relative to --image-dir), synset (string).
"""

import functools
import os
from pathlib import Path

DEFAULT_EXTENSIONS = "jpg,jpeg,png,bmp,gif,webp,tif,tiff"


def add_options(parser):
    parser.add_argument(
        "--image-dir", type=Path, required=True, help="folder with one sub-folder per class"
    )
    parser.add_argument(
        "--label-file",
        type=Path,
        default=None,
        help="lines of 'synset label'; default: labels from the sorted folder names",
    )
    parser.add_argument(
        "--extensions",
        default=DEFAULT_EXTENSIONS,
        help=f"image file extensions to include, any case (default: {DEFAULT_EXTENSIONS})",
    )


def _class_dirs(options):
    return _list_class_dirs(str(options.image_dir))


@functools.lru_cache(maxsize=4)
def _list_class_dirs(image_dir):
    # Cached: a worker runs many tasks over the same folder.
    if not os.path.isdir(image_dir):
        raise FileNotFoundError(f"--image-dir {image_dir} is not a folder")
    return sorted(Path(e.path) for e in os.scandir(image_dir) if e.is_dir())


def _labels(options, class_dirs):
    if options.label_file is None:
        return {d.name: i for i, d in enumerate(class_dirs)}
    labels = {}
    for number, line in enumerate(options.label_file.read_text().splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 2 or not parts[1].lstrip("-").isdigit():
            raise ValueError(
                f"{options.label_file}:{number}: expected 'synset label', got {line!r}"
            )
        labels[parts[0]] = int(parts[1])
    return labels


def task_number(options):
    return len(_class_dirs(options))


def schema():
    return {
        "label": {"type": "int32"},
        "data": {"type": "bytes"},
        "file_name": {"type": "string"},
        "synset": {"type": "string"},
    }


def dict_data(task_id, options):
    class_dirs = _class_dirs(options)
    folder = class_dirs[task_id]
    labels = _labels(options, class_dirs)
    if folder.name not in labels:
        raise KeyError(f"class folder {folder.name!r} is not in --label-file {options.label_file}")
    extensions = tuple("." + e.strip().lower().lstrip(".") for e in options.extensions.split(","))
    # os.scandir and plain string sorting: pathlib costs more than reading a small JPEG.
    names = sorted(
        e.name for e in os.scandir(folder) if e.is_file() and e.name.lower().endswith(extensions)
    )
    label = labels[folder.name]
    for name in names:
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        yield {
            "label": label,
            "data": data,
            "file_name": f"{folder.name}/{name}",
            "synset": folder.name,
        }
