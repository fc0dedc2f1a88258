"""The progress bar on stderr (tqdm): tasks done of N, rows, MB written, rows/s."""

from __future__ import annotations

import os
import sys
import time
from typing import Any


class Progress:
    """A bar that redraws itself on a terminal; where standard error is not one (a log file, a
    pipe), one line at the end, not a frame every tenth of a second."""

    def __init__(self, total: int, desc: str, unit: str, enabled: bool = True):
        self.rows = 0
        self.bytes = 0
        self._start = self._shown = time.perf_counter()
        self._final_only = enabled and not _is_terminal(sys.stderr)
        self._stalled: set[str] = set()  # the jobs said to stall, in a log
        if not enabled:  # (--quiet) not even tqdm's import, 10 ms of a write's start
            self._bar: Any = _NoBar(desc)
            return
        # tqdm imported here: a worker's fork server imports this module (through the pool's
        # package) and needs no bar, nor what tqdm imports (importlib.metadata: 10 ms)
        from tqdm import tqdm

        self._bar = tqdm(
            total=total,
            desc=desc,
            unit=unit,
            disable=not enabled,
            file=open(os.devnull, "w") if self._final_only else sys.stderr,  # noqa: SIM115
            dynamic_ncols=not self._final_only,
            ncols=100 if self._final_only else None,
            ascii=True if self._final_only else None,
            leave=True,
        )

    def add(self, rows: int, nbytes: int) -> None:
        self.rows += rows
        self.bytes += nbytes
        now = time.perf_counter()
        if now - self._shown >= 0.2:
            self._shown = now
            self._show(now)

    def _show(self, now: float) -> None:
        rate = self.rows / max(now - self._start, 1e-9)
        self._bar.set_postfix_str(f"{self._done()}, {rate:,.0f} rows/s")

    def _done(self) -> str:
        return f"{self.rows:,} rows, {self.bytes / 1e6:,.1f} MB"

    def stalled(self, jobs: list[tuple[str, float]]) -> None:
        """Name the jobs that have reported no progress for a while (a hung task shows)."""
        if not jobs:
            return
        names = ", ".join(f"{name} ({seconds:.0f} s)" for name, seconds in jobs[:3])
        more = f" and {len(jobs) - 3} more" if len(jobs) > 3 else ""
        self._bar.set_postfix_str(f"{self._done()}; no progress from {names}{more}")
        if self._final_only and {name for name, _ in jobs} != self._stalled:
            # In a log, a line when other jobs stall, not a frame a second.
            self._stalled = {name for name, _ in jobs}
            print(f"{self._bar.desc}: no progress from {names}{more}", file=sys.stderr, flush=True)

    def step(self, count: int = 1) -> None:
        self._bar.update(count)

    def close(self) -> None:
        if self.rows:  # the last figures, not those of up to 0.2 s before the end
            self._show(time.perf_counter())
        self._bar.close()
        if self._final_only:
            print(str(self._bar), file=sys.stderr, flush=True)
            self._bar.fp.close()


class _NoBar:
    """A bar that is not shown (``enabled=False``): what ``Progress`` asks of tqdm's, doing
    nothing."""

    def __init__(self, desc: str):
        self.desc = desc

    def set_postfix_str(self, text: str) -> None:
        pass

    def update(self, count: int) -> None:
        pass

    def close(self) -> None:
        pass


def _is_terminal(stream: Any) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False
