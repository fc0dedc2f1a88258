"""Image list files: reading im2rec's ``.lst`` and TorchRecord's ``path label`` lines, and making
``.lst`` files from a folder the way ``im2rec.py --list`` does (``recordmill make-list``)."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

from recordmill.inputs.images import EXTENSIONS


@dataclass(frozen=True)
class Entry:
    index: int
    labels: tuple[float, ...]
    path: str


def parse_line(line: str, number: int, label_width: int, where: str) -> Entry | None:
    """One list line: ``index \\t label_1 ... label_K \\t path`` (im2rec) when it has tabs,
    else ``path label ...`` (TorchRecord). None for a blank line; ValueError naming the line."""
    text = line.rstrip("\r\n")
    if not text.strip():
        return None
    try:
        if "\t" in text:
            parts = text.split("\t")
            if len(parts) != label_width + 2:
                raise ValueError(
                    f"expected index, {label_width} label(s) and a path separated by tabs, "
                    f"got {len(parts)} column(s)"
                )
            return Entry(int(parts[0]), tuple(float(v) for v in parts[1:-1]), parts[-1])
        parts = text.rsplit(maxsplit=label_width)
        if len(parts) != label_width + 1:
            raise ValueError(f"expected a path and {label_width} label(s), got {text!r}")
        return Entry(number, tuple(float(v) for v in parts[1:]), parts[0])
    except ValueError as e:
        raise ValueError(f"{where}:{number + 1}: {e}") from None


def make_list(
    root: str | os.PathLike[str],
    prefix: str | os.PathLike[str],
    *,
    train_ratio: float = 1.0,
    test_ratio: float = 0.0,
    recursive: bool = True,
    shuffle: bool = True,
    seed: int = 0,
    extensions: tuple[str, ...] = EXTENSIONS,
) -> list[Path]:
    """Write ``PREFIX.lst`` (or ``PREFIX_train.lst``, ``_val``, ``_test``) listing the images under
    ``root``: with ``recursive``, one label per sub-folder (sorted names, 0, 1, ...), paths relative
    to ``root``. A seeded shuffle, then the train / test / val split. Returns the files written."""
    root = Path(root)
    suffixes = tuple("." + e.lower() for e in extensions)
    entries: list[tuple[str, int]] = []
    if recursive:
        folders = sorted(d for d in os.listdir(root) if (root / d).is_dir())
        for label, folder in enumerate(folders):
            for dirpath, dirnames, filenames in os.walk(root / folder):
                dirnames.sort()
                rel = Path(dirpath).relative_to(root)
                entries += [
                    (str(rel / f), label) for f in sorted(filenames) if f.lower().endswith(suffixes)
                ]
    else:
        entries = [(f, 0) for f in sorted(os.listdir(root)) if f.lower().endswith(suffixes)]
    if shuffle:
        random.Random(seed).shuffle(entries)
    numbered = list(enumerate(entries))
    n_test = int(len(numbered) * test_ratio)
    n_train = int(len(numbered) * train_ratio)
    if train_ratio == 1.0 and test_ratio == 0.0:
        splits = {"": numbered}
    else:
        splits = {
            "_test": numbered[:n_test],
            "_train": numbered[n_test : n_test + n_train],
            "_val": numbered[n_test + n_train :],
        }
    written = []
    for suffix, items in splits.items():
        if suffix and not items:
            continue
        path = Path(f"{prefix}{suffix}.lst")
        with open(path, "w") as f:
            for index, (name, label) in items:
                f.write(f"{index}\t{float(label):f}\t{name}\n")
        written.append(path)
    return written
