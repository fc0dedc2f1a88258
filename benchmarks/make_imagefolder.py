"""Make a seeded synthetic ImageNet-style folder of real JPEG files (Pillow).

    python benchmarks/make_imagefolder.py benchmarks/data/images --classes 100 --per-class 200

Images are 160-500 px on each side (--min-size, --max-size), a colour gradient with noise, about 30 KB each at quality 85.
"""

from __future__ import annotations

import argparse
import io
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image


def make_class(args: tuple[Path, int, int, int, int, int]) -> int:
    root, class_index, count, seed, smallest, largest = args
    rng = np.random.default_rng([seed, class_index])
    folder = root / f"n{class_index:08d}"
    folder.mkdir(parents=True, exist_ok=True)
    total = 0
    for i in range(count):
        w, h = (int(v) for v in rng.integers(smallest, largest + 1, size=2))
        yy, xx = np.mgrid[0:h, 0:w]
        base = np.stack(
            [xx * 255 // w, yy * 255 // h, (xx + yy + class_index) * 255 // (w + h + 100)], axis=-1
        )
        pixels = np.clip(base + rng.integers(-20, 21, size=(h, w, 3)), 0, 255).astype(np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, "JPEG", quality=85)
        (folder / f"n{class_index:08d}_{i:05d}.JPEG").write_bytes(buffer.getvalue())
        total += buffer.tell()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--per-class", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--min-size", type=int, default=160, help="smallest side (default: 160)")
    parser.add_argument("--max-size", type=int, default=500, help="largest side (default: 500)")
    args = parser.parse_args()
    jobs = [
        (args.root, c, args.per_class, args.seed, args.min_size, args.max_size)
        for c in range(args.classes)
    ]
    with ProcessPoolExecutor(args.jobs) as pool:
        total = sum(pool.map(make_class, jobs))
    print(f"{args.classes * args.per_class} images, {total / 1e6:.0f} MB in {args.root}")


if __name__ == "__main__":
    main()
