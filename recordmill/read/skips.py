"""Rows that fail in reading (``on_error="skip"``): a row whose ``decode=`` function (or, in a
PyTorch loader, ``transform``) raises becomes a *read reject* (:class:`ReadReject`), listed, and
the reading goes on. How a loader keeps its batches full around them is
:mod:`recordmill.read.torch.chunks`."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ON_ERROR", "ReadReject", "one_line", "skips"]

ON_ERROR = ("raise", "skip")


def skips(on_error: str) -> bool:
    """Whether ``on_error`` asks to skip the rows that fail (checked: one of ``ON_ERROR``)."""
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {', '.join(ON_ERROR)}, got {on_error!r}")
    return on_error == "skip"


@dataclass(frozen=True)
class ReadReject:
    """A row left out of training: its number (in the dataset, or across a mixture's sources),
    the column whose ``decode`` raised (or ``"transform"``), the exception in one line, and
    where: the dataset version (a mixture: the source's name), rank and DataLoader worker."""

    row: int
    column: str
    error: str
    version: int | None = None
    source: str | None = None
    rank: int = 0
    worker: int | None = None

    def __str__(self) -> str:
        where = f"{self.source} " if self.source else ""
        return f"{where}row {self.row} ({self.column}): {self.error}"


def one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300]}" if text else type(error).__name__
