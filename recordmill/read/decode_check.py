"""``recordmill verify --decode COLUMN[=DECODER]``: every value of a column decoded, in worker
processes, and the rows that do not decode listed: what ``on_error="skip"`` would leave out of
training, found before it starts."""

from __future__ import annotations

import importlib
import multiprocessing
import os
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from tqdm import tqdm

from recordmill.errors import ConfigError
from recordmill.read import decode
from recordmill.read.dataset import open as open_dataset
from recordmill.read.skips import ReadReject, one_line

__all__ = ["DECODERS", "decoder", "undecodable"]

DECODERS: dict[str, Callable[[Any], Any]] = {"image": decode.image, "pil": decode.pil}
# Rows one worker decodes at a time: small enough for the progress bar to move.
PIECE_ROWS = 2048


def decoder(name: str) -> Callable[[Any], Any]:
    """A decoder by name (``image``, ``pil``) or as ``module:function``."""
    if name in DECODERS:
        return DECODERS[name]
    module, _, function = name.partition(":")
    if not function:
        raise ConfigError(
            f"--decode names no decoder {name!r}: give one of {', '.join(DECODERS)} or "
            "module:function"
        )
    try:
        return getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"--decode {name}: cannot import it ({e})") from e


def undecodable(
    path: str, column: str, name: str = "image", workers: int | None = None, progress: bool = True
) -> list[ReadReject]:
    """The rows of ``column`` whose value ``name``'s decoder raises on, in row order."""
    decoder(name)  # a bad name fails here, once, not in every worker
    ds = open_dataset(path).select([column])  # an unknown column: one line, here
    rows, version = len(ds), ds.version
    pieces = [(lo, min(lo + PIECE_ROWS, rows)) for lo in range(0, rows, PIECE_ROWS)]
    workers = max(1, min(workers or os.cpu_count() or 1, len(pieces)))
    found: list[ReadReject] = []
    context = multiprocessing.get_context("forkserver")
    bar = tqdm(total=rows, unit="row", desc=f"decoding {column}", disable=not progress)
    with bar, ProcessPoolExecutor(workers, mp_context=context) as pool:
        jobs = [pool.submit(_piece, path, version, column, name, lo, hi) for lo, hi in pieces]
        for job in as_completed(jobs):
            got, done = job.result()
            found += got
            bar.update(done)
    return sorted(found, key=lambda reject: reject.row)


def _piece(
    path: str, version: int, column: str, name: str, lo: int, hi: int
) -> tuple[list[ReadReject], int]:
    """In a worker: rows ``lo`` to ``hi`` decoded, those that raise as rejects."""
    warnings.simplefilter("ignore")  # Pillow's about what it reads past: not a failure
    fn = decoder(name)
    values = open_dataset(path, version=version).select([column])[lo:hi].column(0).to_pylist()
    found = []
    for offset, value in enumerate(values):
        try:
            fn(value)
        except Exception as e:
            found.append(ReadReject(lo + offset, column, one_line(e), version=version))
    return found, len(values)
