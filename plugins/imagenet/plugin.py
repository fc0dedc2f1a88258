"""Built-in plugin ``imagenet``: an ImageNet-style folder, one sub-folder per class.

    python writer.py --script imagenet --image-dir /data/imagenet/train \
        --label-file labels.txt --output out/imagenet --partitions 8

One task per class folder (synset names like n01440764). Labels come from ``--label-file``, lines
of ``n02119789 0`` as in MindRecord's ImageNet example, optionally followed by a human-readable class
name that becomes the ``text`` field; without a label file, a folder's label is its position in
sorted order. ``--num-images K`` takes a seeded random subset of K images, as DLBS does.

Fields: label (int32), synset (string), file_name (string, "synset/file"), text (with a label
file), and the image: ``data`` (bytes) or, with ``--encode tensor``, ``image`` (uint8 H x W x 3),
plus height, width and channels when the image is decoded. See ``recordmill/inputs/images.py`` for the
image options.
"""

import functools
import os
import random

from recordmill import kit
from recordmill.kit import ConfigError, InputError, counted, images


def add_options(parser):
    parser.add_argument(
        "--image-dir", required=True, type=kit.Path, help="folder with one sub-folder per class"
    )
    parser.add_argument(
        "--label-file",
        type=kit.Path,
        help="lines of 'synset label [class name]'; default: labels from the sorted folder names",
    )
    parser.add_argument(
        "--num-images",
        type=int,
        default=-1,
        help="a seeded random subset of this many images (default: -1, all)",
    )
    parser.add_argument(
        "--subset-seed", type=int, default=0, help="seed for --num-images (default: 0)"
    )
    parser.add_argument(
        "--extensions",
        default=",".join(images.EXTENSIONS),
        help="image file extensions to include, in any case (default: %(default)s)",
    )
    images.add_options(parser)


@functools.lru_cache(maxsize=4)
def _class_dirs(image_dir):
    # Cached: a worker runs many tasks over the same folder.
    if not os.path.isdir(image_dir):
        raise InputError(f"--image-dir {image_dir} is not a folder")
    return sorted(e.name for e in os.scandir(image_dir) if e.is_dir())


@functools.lru_cache(maxsize=4)
def _label_map(label_file, image_dir):
    """{synset: (label, class name)} from the label file, or from the sorted folder names."""
    if label_file is None:
        return {name: (i, "") for i, name in enumerate(_class_dirs(image_dir))}
    labels = {}
    try:
        with open(label_file) as f:
            lines = f.readlines()
    except OSError as e:
        raise InputError(f"--label-file {label_file}: cannot read it: {e.strerror}") from None
    for number, line in enumerate(lines, 1):
        parts = line.split(maxsplit=2)
        if not parts:
            continue
        if len(parts) < 2 or not parts[1].lstrip("-").isdigit():
            raise InputError(f"{label_file}:{number}: expected 'synset label [name]', got {line!r}")
        labels[parts[0]] = (int(parts[1]), parts[2].strip() if len(parts) > 2 else "")
    return labels


def _files(folder, extensions):
    suffixes = tuple("." + e.strip().lower().lstrip(".") for e in extensions.split(","))
    # os.scandir and plain string sorting: pathlib costs more than reading a small JPEG.
    return sorted(
        e.name for e in os.scandir(folder) if e.is_file() and e.name.lower().endswith(suffixes)
    )


@functools.lru_cache(maxsize=4)
def _subset(image_dir, extensions, num_images, seed):
    """The chosen files per class when --num-images is set: shuffle all, keep the first K."""
    every = [
        (d, f)
        for d in _class_dirs(image_dir)
        for f in _files(os.path.join(image_dir, d), extensions)
    ]
    random.Random(seed).shuffle(every)
    chosen = {}
    for synset, name in every[:num_images]:
        chosen.setdefault(synset, []).append(name)
    return {synset: sorted(names) for synset, names in chosen.items()}


def task_number(options):
    images.check_options(options)
    if options.subset_seed != 0 and options.num_images < 0:
        raise ConfigError("--subset-seed has no effect without --num-images K (it picks those K)")
    _check_layout(options.image_dir, options.extensions)
    classes = _class_dirs(options.image_dir)
    labels = _label_map(options.label_file, options.image_dir)  # read here: a mistake is found
    missing = [synset for synset in classes if synset not in labels]  # before any task runs
    if missing:
        more = f" (and {counted(len(missing) - 1, 'other')})" if len(missing) > 1 else ""
        raise InputError(
            f"class folder {missing[0]!r}{more} is not in --label-file {options.label_file}"
        )
    return len(classes)


def _check_layout(image_dir, extensions):
    """Images outside the class folders would be left out: an error that says what layout is
    expected and how to convert a folder of images without classes."""
    classes = _class_dirs(image_dir)
    loose = _files(image_dir, extensions)
    expected = f"expected one sub-folder per class ({os.path.join(image_dir, 'CLASS', 'IMAGE')})"
    if loose:
        where = f"beside its {len(classes)} class folders" if classes else "and no class folder"
        name = os.path.basename(os.path.normpath(image_dir)) or "images"
        raise InputError(
            f"--image-dir {image_dir} holds {counted(len(loose), 'image')} at its top level "
            f"({loose[0]}...) "
            f"{where}; {expected}. For images without classes, list them (label 0) and use the "
            f"filelist plugin: recordmill make-list {image_dir} {name} --no-recursive, then "
            f"--script filelist --list {name}.lst --root {image_dir}"
        )
    if not classes:
        raise InputError(f"--image-dir {image_dir} holds no class folder; {expected}")


def task_rows(task_id, options):
    # Known from the listing alone, so recordmill writes each partition straight from the rows.
    synset = _class_dirs(options.image_dir)[task_id]
    if options.num_images >= 0:
        subset = _subset(
            options.image_dir, options.extensions, options.num_images, options.subset_seed
        )
        return len(subset.get(synset, []))
    return len(_files(os.path.join(options.image_dir, synset), options.extensions))


def schema(options):
    fields = {
        "label": {"type": "int32"},
        "synset": {"type": "string"},
        "file_name": {"type": "string"},
    }
    if options.label_file:
        fields["text"] = {"type": "string"}
    return {**fields, **images.schema(options)}


def dict_data(task_id, options):
    synset = _class_dirs(options.image_dir)[task_id]
    labels = _label_map(options.label_file, options.image_dir)
    if synset not in labels:
        raise InputError(f"class folder {synset!r} is not in --label-file {options.label_file}")
    label, text = labels[synset]
    folder = os.path.join(options.image_dir, synset)
    if options.num_images >= 0:
        subset = _subset(
            options.image_dir, options.extensions, options.num_images, options.subset_seed
        )
        names = subset.get(synset, [])
    else:
        names = _files(folder, options.extensions)
    extra = {"text": text} if options.label_file else {}
    yield kit.Source(folder)  # rows named by their file's place in the class folder's list
    for name in names:
        yield images.row(
            os.path.join(folder, name),
            options,
            label=label,
            synset=synset,
            file_name=f"{synset}/{name}",
            **extra,
        )
