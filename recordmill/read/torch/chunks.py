"""The loader's half of ``on_error="skip"``: a row whose ``decode=`` function or ``transform``
raises becomes a read reject (:class:`~recordmill.read.skips.ReadReject`), listed, and the batch
is still full.

Batches stay the same whatever the number of DataLoader workers: a worker hands the loader a
:class:`Chunk` (the samples of one batch's rows that did not fail, and the rejects), and the loader
cuts the chunks, in the order's order, into batches of the good rows (:class:`Rebatcher`): batch
k holds the good rows k*B to (k+1)*B of the epoch's order, the next good row taking the place of
a failed one. How far into the order each batch reaches is what a resumed job starts from.
:class:`Ledger` lists, logs and bounds the rejects.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from recordmill.errors import RecordmillError, RecordmillWarning
from recordmill.read.skips import ReadReject, one_line

__all__ = [
    "MAX_READ_REJECTS",
    "WARN_READ_REJECTS",
    "Chunk",
    "Guard",
    "Ledger",
    "Rebatcher",
    "RejectsWarning",
    "TooManyRejects",
]


class TooManyRejects(RecordmillError):
    """More read rejects than ``max_read_rejects``, or every row: a broken decoder, not bad rows."""


class RejectsWarning(RecordmillWarning):
    """More of an epoch's rows left out than ``WARN_READ_REJECTS``."""


# An epoch's rejects that are an error by default (``max_read_rejects``: a fraction of its rows),
# and that a warning tells of.
MAX_READ_REJECTS = 0.1
WARN_READ_REJECTS = 0.01


@dataclass
class Chunk:
    """What a worker hands the loader for one batch's rows of the order: the samples of those
    that did not fail, each with its offset among the ``rows`` rows, and the rejects. The
    samples may be collated in the worker (``shape``, :mod:`~recordmill.read.torch.collated`)."""

    samples: Any = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    rejects: list[ReadReject] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)  # each reject's offset
    rows: int = 0
    shape: Any = None  # the layout of collated samples; None: a list of them


class Pieces(Protocol):
    """How the loader cuts and joins chunks' samples (lists, or batches collated in workers)."""

    def cut(self, samples: Any, shape: Any, lo: int, hi: int) -> Any: ...

    def join(self, parts: list[Any], shape: Any) -> Any: ...


class Guard:
    """Decodes and transforms rows one by one; with ``skip``, a row that raises is a reject."""

    def __init__(self, transform: Callable[[dict[str, Any]], Any] | None, skip: bool):
        self.transform, self.skip = transform, skip

    def apply(
        self,
        rows: list[dict[str, Any]],
        numbers: list[int],
        decoders: list[Mapping[str, Any]],
        sources: list[str | None],
        where: Mapping[str, Any],
    ) -> Chunk:
        """``rows`` (undecoded), their row numbers, each one's decoders and source name, as one
        chunk; ``where`` names the version, rank and worker for the rejects."""
        chunk = Chunk(rows=len(rows))
        failed: dict[int, ReadReject] = {}
        # Every row decoded, then every row transformed, as a reader without skips does.
        for offset, row in enumerate(rows):
            column = ""
            try:
                for column, fn in decoders[offset].items():
                    row[column] = fn(row[column])
            except Exception as e:
                failed[offset] = self._reject(e, numbers[offset], column, sources[offset], where)
        for offset, row in enumerate(rows):
            if offset not in failed:
                try:
                    sample = self.transform(row) if self.transform else row
                except Exception as e:
                    failed[offset] = self._reject(
                        e, numbers[offset], "transform", sources[offset], where
                    )
                    continue
                chunk.samples.append(sample)
                chunk.offsets.append(offset)
        chunk.failed = sorted(failed)
        chunk.rejects = [failed[offset] for offset in chunk.failed]
        return chunk

    def _reject(
        self, error: Exception, row: int, column: str, source: str | None, where: Mapping[str, Any]
    ) -> ReadReject:
        if not self.skip:
            raise error
        return replace(ReadReject(int(row), column, one_line(error), **where), source=source)


class Rebatcher:
    """In the loader's process: chunks in the order's order in, full batches out.

    ``feed()`` gives each batch that is complete, collated, with the rows of the order it
    reaches (counted from the first chunk's first row) and the rejects among those rows not
    given before; ``rest()`` the last, short batch (or None) and the rejects left. A chunk that
    is a whole batch, when nothing waits, is handed on as the worker collated it."""

    def __init__(self, batch_size: int, pieces: Pieces, drop_last: bool):
        self.batch_size, self.pieces, self.drop_last = batch_size, pieces, drop_last
        self.waiting: list[tuple[Any, int, Any]] = []  # (samples, how many, shape)
        self.count = 0  # samples waiting
        self.ends: list[int] = []  # each waiting sample's end in the order (its offset + 1)
        self.failed: list[tuple[int, ReadReject]] = []  # rejects not given yet, by place
        self.seen = 0  # rows of the order in the chunks fed so far

    def feed(self, chunk: Chunk) -> Iterator[tuple[Any, int, list[ReadReject]]]:
        self.add(chunk)
        while self.count >= self.batch_size:
            yield self.take(self.batch_size)

    def add(self, chunk: Chunk) -> None:
        """The chunk's samples to wait for the next cut."""
        if chunk.offsets:
            self.waiting.append((chunk.samples, len(chunk.offsets), chunk.shape))
            self.count += len(chunk.offsets)
        self.ends += [self.seen + offset + 1 for offset in chunk.offsets]
        self.failed += [
            (self.seen + o, r) for o, r in zip(chunk.failed, chunk.rejects, strict=True)
        ]
        self.seen += chunk.rows

    def passed(self) -> list[ReadReject]:
        """The rejects of the chunks fed so far not given yet (given now)."""
        passed, self.failed = [r for _, r in self.failed], []
        return passed

    def rest(self) -> Iterator[tuple[Any, int, list[ReadReject]]]:
        """The epoch's end: the short last batch (None if there is none, or ``drop_last``)."""
        batch, passed = None, []
        if self.count and not self.drop_last:
            batch, _, passed = self.take(self.count)
        yield batch, self.seen, passed + [r for _, r in self.failed]
        self.failed = []

    def take(self, n: int) -> tuple[Any, int, list[ReadReject]]:
        """The next ``n`` samples waiting (``count`` at least) as a batch, as ``feed()`` gives it."""
        parts, need, shape = [], n, None
        while need:
            samples, count, shape = self.waiting[0]
            if count <= need:
                parts.append(samples)
                self.waiting.pop(0)
            else:
                parts.append(self.pieces.cut(samples, shape, 0, need))
                self.waiting[0] = (
                    self.pieces.cut(samples, shape, need, count),
                    count - need,
                    shape,
                )
            need -= min(count, need)
        self.count -= n
        reached, self.ends = self.ends[n - 1], self.ends[n:]
        passed = [r for at, r in self.failed if at < reached]
        self.failed = [(at, r) for at, r in self.failed if at >= reached]
        return self.pieces.join(parts, shape), reached, passed


class Ledger:
    """The read rejects of a loader: listed, counted, appended to ``rejects_log`` (one JSON line
    each, one ``write`` call with ``O_APPEND``: lines of many processes never interleave), and
    bounded by ``max_read_rejects`` (a count, or a fraction of the epoch's rows; None: no bound):
    past ``WARN_READ_REJECTS`` of an epoch's rows a warning says so, once an epoch."""

    def __init__(self, limit: int | float | None, log: str | os.PathLike[str] | None):
        if limit is not None and (isinstance(limit, bool) or not limit >= 0):
            raise ValueError(
                f"max_read_rejects must be a count or a fraction from 0, got {limit!r}"
            )
        self.limit, self.log = limit, None if log is None else os.fspath(log)
        self.rejects: list[ReadReject] = []
        self.epoch_count = 0
        self.warned = False

    def start_epoch(self, count: int = 0) -> None:
        """An epoch's count of rejects starts (at ``count``: a resumed one's so far)."""
        self.epoch_count, self.warned = count, False

    def add(self, rejects: list[ReadReject], epoch_rows: int) -> None:
        if not rejects:
            return
        self.rejects += rejects
        self.epoch_count += len(rejects)
        if self.log is not None:
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                for reject in rejects:
                    os.write(fd, (json.dumps(asdict(reject)) + "\n").encode())
            finally:
                os.close(fd)
        if self.limit is not None:
            bound = self.limit if isinstance(self.limit, int) else int(self.limit * epoch_rows)
            if self.epoch_count > bound:
                raise TooManyRejects(
                    f"{self.epoch_count} rows failed to decode or transform this epoch, more than "
                    f"max_read_rejects={self.limit!r} allows: that many means a broken decoder or "
                    f"transform, not bad rows; the first: {self._first()}"
                )
        if not self.warned and self.epoch_count > WARN_READ_REJECTS * epoch_rows:
            self.warned = True
            warnings.warn(
                f"{self.epoch_count} of this epoch's {epoch_rows:,} rows failed to decode or "
                f"transform and were left out (more than {WARN_READ_REJECTS:.0%}); the first: "
                f"{self._first()}",
                RejectsWarning,
                stacklevel=2,
            )

    def nothing_handed_out(self, rows: int) -> TooManyRejects:
        """The error of an epoch that gave no batch, every row having failed."""
        return TooManyRejects(
            f"every row of this epoch's {rows:,} failed to decode or transform "
            f"({self.epoch_count} rejects): no batch to hand out; the first: {self._first()}"
        )

    def _first(self) -> str:
        """This epoch's first three rejects met here ("none": none; ``[-0:]`` would be all)."""
        this = self.rejects[max(0, len(self.rejects) - self.epoch_count) :]
        return "; ".join(str(r) for r in this[:3]) or "none"
