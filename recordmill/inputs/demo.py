"""Small demo inputs for every built-in plugin: ``recordmill demo-data DIR``.

The run scripts in ``run_scripts/`` make them on first use, so each plugin can be tried at once.
Everything is generated (seeded) here; nothing is downloaded.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import tarfile
import wave
from pathlib import Path

import numpy as np
import pyarrow as pa
from PIL import Image

from recordmill.inputs import litdata, mds, mindrecord_writer, ofrecord, recordio, torchrecord
from recordmill.inputs.filelists import make_list
from recordmill.inputs.idx import write_idx
from recordmill.inputs.tfrecord import encode_example, write_records

CLASSES = [("n01440764", "tench"), ("n01443537", "goldfish"), ("n01484850", "great white shark")]


def make_demo_data(root: str | Path, images_per_class: int = 8) -> Path:
    root = Path(root)
    rng = np.random.default_rng(0)
    _images(root / "images", rng, images_per_class)
    make_list(root / "images", root / "images", train_ratio=0.75, seed=0)
    _mnist(root / "mnist", rng)
    _tables(root, rng)
    _tfrecords(root / "tfrecord", rng)
    _text(root / "text", np.random.default_rng(5))
    # The packed formats of the other tools, each from its own seed (the inputs above unchanged).
    mindrecord_writer.make_demo(root / "mindrecord", np.random.default_rng(1))
    recordio.make_demo(root / "recordio", np.random.default_rng(2))
    ofrecord.make_demo(root / "ofrecord", np.random.default_rng(3))
    if importlib.util.find_spec("lmdb") is not None:  # recordmill[torchrecord]
        torchrecord.make_demo(root / "torchrecord", np.random.default_rng(4))
    _webdataset(root / "webdataset", root / "images")
    _huggingface(root / "huggingface", root / "images")
    pairs = _pairs(root / "images")
    mds.make_demo(root / "mds", pairs)
    litdata.make_demo(root / "litdata", pairs)
    _audio(root / "audio", np.random.default_rng(7))
    (root / "derive").mkdir(parents=True, exist_ok=True)
    (root / "derive" / "keep_even.py").write_text(KEEP_EVEN)
    return root


def _audio(folder: Path, rng: np.random.Generator) -> None:
    """12 short WAV clips (16-bit, 8 kHz, mono), 4 a class folder: tones of each class's pitch."""
    for label, (synset, _) in enumerate(CLASSES):
        (folder / synset).mkdir(parents=True, exist_ok=True)
        for i in range(4):
            frames = int(rng.integers(2000, 8000))
            pitch = np.sin(np.arange(frames) * (label + 1) / 10) * 8000
            noise = rng.normal(0, 500, frames)
            with wave.open(str(folder / synset / f"clip_{i}.wav"), "wb") as w:
                w.setnchannels(1)
                w.setsampwidth(2)
                w.setframerate(8000)
                w.writeframes((pitch + noise).astype("<i2").tobytes())


# The derive plugin's demo function: a filter and a map of the template's rows.
KEEP_EVEN = '''"""The derive plugin's demo: the template's rows of even id, their file names in
upper case and their features scaled."""


def map(row):
    if row["id"] % 2:
        return None  # left out
    return {**row, "file_name": row["file_name"].upper(), "feature": row["feature"] * 2}
'''


def _huggingface(folder: Path, images: Path) -> None:
    """The demo's images as a folder Hugging Face's ``save_to_disk`` writes (made here without
    datasets): an Arrow stream of rows {image: {bytes, path}, label, caption}, its features in
    dataset_info.json, its files in state.json."""
    folder.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in images.rglob("*") if p.is_file())
    synsets = [synset for synset, _ in CLASSES]
    labels = [synsets.index(p.parent.name) for p in files]
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table(
        {
            "image": pa.array([{"bytes": p.read_bytes(), "path": None} for p in files], image),
            "label": pa.array(labels, pa.int64()),
            "caption": [f"a photo of a {CLASSES[k][1]}" for k in labels],
        }
    )
    name = "data-00000-of-00001.arrow"
    with pa.OSFile(str(folder / name), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    features = {
        "image": {"_type": "Image"},
        "label": {"names": [n for _, n in CLASSES], "_type": "ClassLabel"},
        "caption": {"dtype": "string", "_type": "Value"},
    }
    (folder / "dataset_info.json").write_text(json.dumps({"features": features}))
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": name}]}))


def _webdataset(folder: Path, images: Path) -> None:
    """Two WebDataset shards of the demo's images as image-text pairs, as img2dataset makes
    them: KEY.jpg (every image as a JPEG), its caption KEY.txt and class KEY.cls."""
    folder.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in images.rglob("*") if p.is_file())
    for shard in range(2):
        with tarfile.open(folder / f"shard-{shard:06d}.tar", "w") as tar:
            for n, path in enumerate(files[shard::2]):
                label = [synset for synset, _ in CLASSES].index(path.parent.name)
                key = f"{shard:02d}{n:05d}"
                jpeg = io.BytesIO()
                Image.open(path).convert("RGB").save(jpeg, "JPEG", quality=90)
                caption = f"a photo of a {CLASSES[label][1]}".encode()
                for name, data in (("jpg", jpeg.getvalue()), ("txt", caption),
                                   ("cls", str(label).encode())):  # fmt: skip
                    info = tarfile.TarInfo(f"{key}.{name}")
                    info.size, info.mtime = len(data), 0
                    tar.addfile(info, io.BytesIO(data))


def _pairs(images: Path) -> list[tuple[bytes, str, int]]:
    """The demo's images as (JPEG, caption, label): the rows of the MDS and LitData demos."""
    out = []
    for path in sorted(p for p in images.rglob("*") if p.is_file()):
        label = [synset for synset, _ in CLASSES].index(path.parent.name)
        jpeg = io.BytesIO()
        Image.open(path).convert("RGB").save(jpeg, "JPEG", quality=90)
        out.append((jpeg.getvalue(), f"a photo of a {CLASSES[label][1]}", label))
    return out


def _images(folder: Path, rng: np.random.Generator, per_class: int) -> None:
    lines = []
    for label, (synset, name) in enumerate(CLASSES):
        (folder / synset).mkdir(parents=True, exist_ok=True)
        lines.append(f"{synset} {label} {name}")
        for i in range(per_class):
            w, h = (int(v) for v in rng.integers(200, 640, size=2))
            yy, xx = np.mgrid[0:h, 0:w]
            pixels = np.stack([xx * 255 // w, yy * 255 // h, np.full_like(xx, 80 * label)], axis=-1)
            image = Image.fromarray(pixels.astype(np.uint8))
            if i % 4 == 3:
                image.convert("L").save(folder / synset / f"{synset}_{i}.png")
            else:
                image.save(folder / synset / f"{synset}_{i}.JPEG", quality=90)
    (folder.parent / "labels.txt").write_text("\n".join(lines) + "\n")


def _mnist(folder: Path, rng: np.random.Generator) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", 300), ("t10k", 50)):
        labels = rng.integers(0, 10, size=count, dtype=np.uint8)
        pixels = np.zeros((count, 28, 28), dtype=np.uint8)
        for i, label in enumerate(labels):  # a bar whose position is the label: learnable
            pixels[i, 4:24, 2 + 2 * label : 5 + 2 * label] = 255
        write_idx(folder / f"{split}-images-idx3-ubyte.gz", pixels)
        write_idx(folder / f"{split}-labels-idx1-ubyte.gz", labels)


def _tables(root: Path, rng: np.random.Generator) -> None:
    rows = [
        {
            "id": i,
            "text": f"sample {i}, with a comma",
            "score": round(float(rng.random()), 4),
            "label": i % 3,
        }
        for i in range(200)
    ]
    with open(root / "table.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (root / "table.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "table.schema.yaml").write_text(
        "id: int64\ntext: string\nscore: float32\nlabel: int32\n"
    )


WORDS = [
    "the",
    "a",
    "data",
    "record",
    "reads",
    "writes",
    "fast",
    "column",
    "file",
    "row",
    "model",
    "token",
    "train",
    "each",
    "one",
]


def _text(folder: Path, rng: np.random.Generator) -> None:
    """A corpus of 60 short documents, one a JSON line (the text plugin's demo)."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = [
        {"id": i, "text": " ".join(rng.choice(WORDS, int(rng.integers(5, 60)))) + "."}
        for i in range(60)
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))


def _tfrecords(folder: Path, rng: np.random.Generator) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for shard in range(2):
        payloads = []
        for i in range(50):
            pixels = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
            payloads.append(
                encode_example(
                    {
                        "image/encoded": pixels.tobytes(),
                        "image/class/label": int(i % 5),
                        "image/bbox": [0.1, 0.2, 0.8, 0.9],
                    }
                )
            )
        write_records(folder / f"train-{shard:05d}-of-00002.tfrecord", payloads)
