"""Built-in plugin ``filelist``: images named by a list file (im2rec .lst, TorchRecord lists).

    python writer.py --script filelist --list train.lst --root /data/images --output out/train

Reads im2rec's list files, ``index \\t label_1 ... label_K \\t path`` (``--label-width K`` for
multi-label rows), and TorchRecord's ``path label`` lines (told apart by the tabs). Relative paths
are taken from ``--root`` (default: the list file's folder). The lines are split into ``--tasks``
consecutive ranges. ``recordmill make-list ROOT PREFIX`` writes such a list from a folder.

Fields: index (int64: im2rec's index, or the line number), label (``--label-type``, one value, or an
array of K with ``--label-width K``), file_name (the path as listed), and the image fields of
``--encode`` (see ``recordmill/inputs/images.py``).
"""

import functools
import os

from recordmill.kit.filelists import parse_line

from recordmill import kit
from recordmill.kit import ConfigError, InputError, images


def add_options(parser):
    parser.add_argument(
        "--list", required=True, type=kit.Path, help="the list file (.lst or 'path label' lines)"
    )
    parser.add_argument(
        "--root", type=kit.Path, help="folder for relative paths (default: the list file's)"
    )
    parser.add_argument("--label-width", type=int, default=1, help="labels per line (default: 1)")
    parser.add_argument(
        "--label-type",
        choices=("int32", "int64", "float32"),
        default="int32",
        help="int labels must be whole numbers ('464.000000' is fine) (default: int32)",
    )
    parser.add_argument(
        "--tasks", type=int, default=16, help="split the lines into this many tasks (default: 16)"
    )
    images.add_options(parser)


@functools.lru_cache(maxsize=4)
def _lines(path):
    try:
        with open(path) as f:
            return f.readlines()
    except OSError as e:
        raise InputError(f"--list {path}: cannot read it: {e.strerror or e}") from None


def _ranges(options):
    lines = _lines(options.list)
    if not any(line.strip() for line in lines):
        raise InputError(f"--list {options.list} lists no image: it is empty")
    n = max(1, min(options.tasks, len(lines)))
    step, extra = divmod(len(lines), n)
    bounds = [0]
    for t in range(n):
        bounds.append(bounds[-1] + step + (t < extra))
    return bounds


def task_number(options):
    if options.label_width < 1:
        raise ConfigError(f"--label-width must be at least 1, got {options.label_width}")
    images.check_options(options)
    return len(_ranges(options)) - 1


def task_rows(task_id, options):
    # Every line but a blank one is a row (a bad line fails the run when its task makes rows).
    bounds = _ranges(options)
    lines = _lines(options.list)[bounds[task_id] : bounds[task_id + 1]]
    return sum(1 for line in lines if line.strip())


def schema(options):
    label = {"type": options.label_type}
    if options.label_width > 1:
        label["shape"] = [options.label_width]
    return {
        "index": {"type": "int64"},
        "label": label,
        "file_name": {"type": "string"},
        **images.schema(options),
    }


def dict_data(task_id, options):
    bounds = _ranges(options)
    lines = _lines(options.list)
    root = options.root or os.path.dirname(os.path.abspath(options.list))
    for number in range(bounds[task_id], bounds[task_id + 1]):
        entry = parse_line(lines[number], number, options.label_width, options.list)
        if entry is None:
            continue
        labels = entry.labels
        if options.label_type != "float32" and any(v != int(v) for v in labels):
            raise InputError(
                f"{options.list}:{number + 1}: label {labels} is not a whole number; "
                "use --label-type float32"
            )
        label = labels[0] if options.label_width == 1 else list(labels)
        yield images.row(
            os.path.join(root, entry.path),
            options,
            index=entry.index,
            label=label,
            file_name=entry.path,
        )
