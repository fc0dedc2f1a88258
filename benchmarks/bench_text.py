"""Text for language models: tokenizing a corpus with the ``text`` plugin against a plain loop,
and reading packed blocks with ``TokenBlocks`` against LitData's ``TokensLoader`` and the floor.

    python benchmarks/bench_text.py --litdata-python /tmp/venv-litdata/bin/python
    python benchmarks/bench_text.py --corpus-mb 4 --runs 1     # recordmill alone, a quick check

**Corpus**: the standard library's ``.py`` files (``--corpus-mb`` of them, sorted by path), one
document a file; a byte-level BPE tokenizer (8,000 tokens) trained on the first 4 MB of them
here. Every tool and loop gets ``RAYON_NUM_THREADS=1``, so that the tokenizer uses one core
per process and "per core" means what it says.

**Conversion** (tokens a second, wall time from the call to its return): the plain loop reads
each file, encodes them 256 at a time with ``encode_batch_fast`` (the tokenizer's fastest:
no character offsets), appends the end-of-document id and
writes the ids as one ``.npy`` file: nothing else. recordmill: ``recordmill.write("text", ...)``
with ``--eos``, 1 and 2 workers (tasks of 2 MB), checked, committed. **Bytes**: the dataset's
files against 2 bytes a token.

**Reading** (blocks a second, one epoch timed from the loader's creation to its last batch,
batches of 8 blocks of 2,048 tokens + 1, shuffled, ``--workers`` DataLoader workers): the floor is
a memory-mapped ``.npy`` of all the ids, a map-style dataset whose item ``j`` is the slice
``[2048 j, 2048 j + 2049)``, in a plain DataLoader; recordmill ``TokenBlocks`` in its
``DataLoader``; LitData ``optimize(..., item_loader=TokensLoader())`` of the same documents' ids,
read with ``StreamingDataset(item_loader=TokensLoader(block_size=2049), shuffle=True)`` in a
``StreamingDataLoader`` (in its own environment). The median of ``--runs`` rounds, interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its thread pool
BLOCK = 2048
BATCH = 8
EOS = "<|endoftext|>"


def corpus(megabytes: float) -> list[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files, size = [], 0
    for f in sorted(stdlib.rglob("*.py")):
        if "site-packages" in f.parts:
            continue
        files.append(f)
        size += f.stat().st_size
        if size >= megabytes * 1e6:
            break
    return files


def train_tokenizer(files: list[Path], path: Path) -> None:
    import tokenizers as tk

    head, size = [], 0
    for f in files:
        head.append(str(f))
        size += f.stat().st_size
        if size > 4e6:
            break
    tokenizer = tk.Tokenizer(tk.models.BPE())
    tokenizer.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    alphabet = tk.pre_tokenizers.ByteLevel.alphabet()
    trainer = tk.trainers.BpeTrainer(
        vocab_size=8000, special_tokens=[EOS], initial_alphabet=alphabet
    )
    tokenizer.train(head, trainer)
    tokenizer.save(str(path))


def plain_loop(files: list[Path], tokenizer_path: Path, out: Path) -> tuple[float, int]:
    """The loop a user would write: read, batch-encode, append EOS, save the ids."""
    from tokenizers import Tokenizer

    start = time.perf_counter()
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    eos = tokenizer.token_to_id(EOS)
    encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)  # no offsets: faster
    pieces, lengths = [], []
    for lo in range(0, len(files), 256):
        texts = [f.read_text(errors="replace") for f in files[lo : lo + 256]]
        for encoding in encode(texts):
            ids = np.array([*encoding.ids, eos], dtype=np.uint16)
            pieces.append(ids)
            lengths.append(len(ids))
    np.save(out / "tokens.npy", np.concatenate(pieces))
    np.save(out / "lengths.npy", np.array(lengths, dtype=np.int64))
    return time.perf_counter() - start, sum(lengths)


def recordmill_write(files, tokenizer_path: Path, out: Path, workers: int) -> float:
    import recordmill

    shutil.rmtree(out, ignore_errors=True)
    options = {"input": [str(f) for f in files], "tokenizer": str(tokenizer_path), "eos": EOS,
               "task_bytes": 2 << 20, "errors": "replace"}  # fmt: skip
    start = time.perf_counter()
    recordmill.write("text", out, options=options, workers=workers, progress=False)
    return time.perf_counter() - start


def read_floor(root: Path, workers: int) -> tuple[float, int]:
    import torch

    class Blocks(torch.utils.data.Dataset):
        def __init__(self, path):
            self.path, self.tokens = path, None

        def __len__(self):
            return (len(np.load(self.path, mmap_mode="r")) - BLOCK - 1) // BLOCK + 1

        def __getitem__(self, j):
            if self.tokens is None:
                self.tokens = np.load(self.path, mmap_mode="r")
            return torch.from_numpy(np.array(self.tokens[j * BLOCK : j * BLOCK + BLOCK + 1]))

    start = time.perf_counter()
    loader = torch.utils.data.DataLoader(Blocks(root / "plain" / "tokens.npy"), batch_size=BATCH,
                                         shuffle=True, num_workers=workers)  # fmt: skip
    blocks = sum(len(b) for b in loader)
    return time.perf_counter() - start, blocks


def read_recordmill(root: Path, workers: int) -> tuple[float, int]:
    from recordmill.torch import DataLoader, TokenBlocks

    start = time.perf_counter()
    loader = DataLoader(TokenBlocks(root / "rm1", BLOCK), batch_size=BATCH, num_workers=workers)
    blocks = sum(len(b) for b in loader)
    return time.perf_counter() - start, blocks


# --- LitData (run under --litdata-python) ------------------------------------------------------


def litdata_docs(item):
    tokens = np.load(item["tokens"], mmap_mode="r")
    offsets = np.concatenate([[0], np.cumsum(np.load(item["lengths"]))])
    for i in range(item["lo"], item["hi"]):
        yield np.array(tokens[offsets[i] : offsets[i + 1]])


def peer_litdata(args: dict) -> dict:
    import torch
    from litdata import StreamingDataLoader, StreamingDataset, TokensLoader, optimize

    plain, out = Path(args["plain"]), Path(args["out"])
    if not out.exists():
        docs = len(np.load(plain / "lengths.npy"))
        inputs = [{"tokens": str(plain / "tokens.npy"), "lengths": str(plain / "lengths.npy"),
                   "lo": lo, "hi": min(lo + 256, docs)} for lo in range(0, docs, 256)]  # fmt: skip
        optimize(fn=litdata_docs, inputs=inputs, output_dir=str(out), chunk_size=(BLOCK + 1) * 1024,
                 item_loader=TokensLoader(), num_workers=1)  # fmt: skip
    torch.set_num_threads(1)
    start = time.perf_counter()
    ds = StreamingDataset(str(out), item_loader=TokensLoader(block_size=BLOCK + 1), shuffle=True)
    loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=args["workers"])
    blocks = sum(len(b) for b in loader)
    return {"seconds": time.perf_counter() - start, "blocks": blocks}


def run_in(python: str, task: str, args: dict) -> dict:
    done = subprocess.run([python, __file__, "--peer-task", task, json.dumps(args)],
                          capture_output=True, text=True, timeout=1800)  # fmt: skip
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-mb", type=float, default=32)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--litdata-python")
    parser.add_argument("--peer-task")
    parser.add_argument("args", nargs="?")
    a = parser.parse_args()
    if a.peer_task:
        print(json.dumps(peer_litdata(json.loads(a.args))))
        return
    root = Path(tempfile.mkdtemp(prefix="bench-text-"))
    try:
        report(a, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(a: argparse.Namespace, root: Path) -> None:
    files = corpus(a.corpus_mb)
    megabytes = sum(f.stat().st_size for f in files) / 1e6
    train_tokenizer(files, root / "tokenizer.json")
    (root / "plain").mkdir()
    times: dict[str, list[float]] = {}
    tokens = 0
    for _ in range(a.runs):
        seconds, tokens = plain_loop(files, root / "tokenizer.json", root / "plain")
        times.setdefault("plain loop (1 process)", []).append(seconds)
        for workers in (1, 2):
            seconds = recordmill_write(
                files, root / "tokenizer.json", root / f"rm{workers}", workers
            )
            times.setdefault(f"recordmill write, {workers} worker(s)", []).append(seconds)
    print(f"corpus: {len(files):,} files, {megabytes:.1f} MB, {tokens:,} tokens")
    print("| conversion | seconds | M tokens/s | vs the plain loop |")
    print("| --- | --- | --- | --- |")
    floor = statistics.median(times["plain loop (1 process)"])
    for name, values in times.items():
        t = statistics.median(values)
        print(f"| {name} | {t:.2f} | {tokens / t / 1e6:.2f} | {floor / t:.2f}x the speed |")
    written = sum(f.stat().st_size for f in (root / "rm1").glob("*.parquet"))
    print(
        f"\nbytes: {written:,} for {tokens:,} tokens: {written / (2 * tokens):.3f}x 2 bytes a token"
    )
    reads: dict[str, list[tuple[float, int]]] = {}
    for _ in range(a.runs):
        reads.setdefault("floor: memory-mapped .npy, sliced", []).append(
            read_floor(root, a.workers)
        )
        reads.setdefault("recordmill TokenBlocks", []).append(read_recordmill(root, a.workers))
        if a.litdata_python:
            args = {"plain": str(root / "plain"), "out": str(root / "litdata"),
                    "workers": a.workers}  # fmt: skip
            got = run_in(a.litdata_python, "litdata", args)
            if "error" in got:
                print("litdata:", got["error"])
            else:
                reads.setdefault("LitData TokensLoader", []).append((got["seconds"], got["blocks"]))
    print(f"\n| reading, {a.workers} workers, batches of {BATCH} x {BLOCK + 1} | seconds | blocks "
          "| blocks/s |")  # fmt: skip
    print("| --- | --- | --- | --- |")
    for name, values in reads.items():
        t = statistics.median(v[0] for v in values)
        print(f"| {name} | {t:.2f} | {values[0][1]:,} | {values[0][1] / t:,.0f} |")


if __name__ == "__main__":
    main()
