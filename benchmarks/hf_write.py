"""The peer users would pick to write the same datasets: Hugging Face datasets.

    python benchmarks/hf_write.py images DIR OUT
    python benchmarks/hf_write.py tensors DIR OUT      # decode + resize to 128 x 128 (plain PIL)
    python benchmarks/hf_write.py smallrows OUT

``Dataset.from_generator(..., num_proc=2)`` over the same rows as ``baseline.py`` (sharded by class
folder or task through ``gen_kwargs``), then ``save_to_disk(OUT, num_shards=4)``: what the
Hugging Face documentation shows for building a dataset from files and saving it. Its Arrow cache
goes to ``OUT.cache`` beside the output, so each run starts from nothing.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import numpy as np
from baseline import plugin_module
from PIL import Image

WORKERS = 2
SHARDS = 4


def _folders(root: Path) -> list[tuple[int, str]]:
    return list(enumerate(str(d) for d in sorted(root.iterdir()) if d.is_dir()))


def image_rows(folders: list[tuple[int, str]]):
    for label, folder in folders:
        for path in sorted(Path(folder).iterdir()):
            yield {
                "label": label,
                "data": path.read_bytes(),
                "file_name": f"{Path(folder).name}/{path.name}",
            }


def tensor_rows(folders: list[tuple[int, str]], size: int = 128):
    for row in image_rows(folders):
        image = Image.open(io.BytesIO(row["data"])).convert("RGB")
        pixels = np.asarray(image.resize((size, size), Image.Resampling.BILINEAR))
        yield {"label": row["label"], "image": pixels}


def small_rows(tasks: list[int]):
    module = plugin_module()
    options = argparse.Namespace(rows=2_000_000, tasks=32)
    for task_id in tasks:
        yield from module.rows(task_id, options)


def main() -> None:
    import datasets

    datasets.disable_progress_bars()
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=["images", "tensors", "smallrows"])
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args()
    f = datasets.Features
    if args.workload == "smallrows":
        out = args.paths[0]
        generator, shards = small_rows, {"tasks": list(range(32))}
        features = f(
            {
                "id": datasets.Value("int64"),
                "label": datasets.Value("int32"),
                "feature": datasets.Sequence(datasets.Value("float32"), length=16),
                "name": datasets.Value("string"),
            }
        )
    else:
        out = args.paths[1]
        shards = {"folders": _folders(args.paths[0])}
        if args.workload == "images":
            generator = image_rows
            features = f(
                {
                    "label": datasets.Value("int64"),
                    "data": datasets.Value("binary"),
                    "file_name": datasets.Value("string"),
                }
            )
        else:
            generator = tensor_rows
            features = f(
                {
                    "label": datasets.Value("int64"),
                    "image": datasets.Array3D(shape=(128, 128, 3), dtype="uint8"),
                }
            )
    dataset = datasets.Dataset.from_generator(
        generator,
        features=features,
        gen_kwargs=shards,
        num_proc=WORKERS,
        cache_dir=str(out) + ".cache",
    )
    dataset.save_to_disk(str(out), num_shards=SHARDS)
    print(len(dataset), "rows")


if __name__ == "__main__":
    main()
