"""The output folder's life: refuse what must not be replaced, stage, then appear atomically.

Everything is written into a hidden sibling folder (``.NAME.recordmill-partial``) that is renamed
to ``NAME`` only when the run succeeded, so a failed or killed run never leaves an output that
looks complete. An interrupted run's staging folder is kept for ``--resume``. A lock file beside
it (``.NAME.recordmill-lock``) makes a second run on the same output fail at once instead of
mixing its files with the first run's.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import Any

from recordmill.errors import OutputError
from recordmill.manifest import MANIFEST


class OutputDir:
    def __init__(self, path: str | os.PathLike[str], overwrite: bool = False, resume: bool = False):
        self.final = Path(path).expanduser().absolute()
        self.overwrite = overwrite
        self.resume = resume
        self.staging = self.final.parent / f".{self.final.name}.recordmill-partial"
        self._old = self.final.parent / f".{self.final.name}.recordmill-old"
        self._lock_path = self.final.parent / f".{self.final.name}.recordmill-lock"
        self._lock: Any = None
        self.resumed = False

    def _check_final(self) -> None:
        if not self.final.exists():
            return
        if not self.final.is_dir():
            raise OutputError(f"output {self.final} exists and is not a folder")
        if not any(self.final.iterdir()):
            return  # an empty folder, made ahead of the run, is simply replaced
        if not self.overwrite:
            raise OutputError(f"output {self.final} already exists; pass --overwrite to replace it")
        if not (self.final / MANIFEST).is_file() and any(self.final.iterdir()):
            raise OutputError(
                f"output {self.final} is not empty and is not a recordmill dataset (no {MANIFEST}); "
                "refusing to replace it, even with --overwrite"
            )

    def lock(self) -> None:
        """Hold the output's lock for this process's life: a second run on it is refused."""
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self._lock = open(self._lock_path, "a")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            self._lock = None
            raise OutputError(
                f"another recordmill run is writing {self.final} (it holds {self._lock_path}); "
                "wait for it to finish"
            ) from None

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def prepare(self) -> Path:
        """Check the destination and give the staging folder: an empty one, or with ``resume``
        the one an interrupted run left."""
        self._check_final()
        if self.staging.exists():
            if self.resume:
                self.resumed = True
                return self.staging
            if not self.overwrite:
                raise OutputError(
                    f"an interrupted run left {self.staging}; pass --resume to finish it "
                    "(only its unfinished tasks run again) or --overwrite to start over"
                )
            shutil.rmtree(self.staging)
        self.staging.mkdir(parents=True)
        return self.staging

    def commit(self) -> None:
        """Make the staged folder the output, replacing an older dataset when allowed."""
        self._check_final()
        if self.final.exists() and any(self.final.iterdir()):
            shutil.rmtree(self._old, ignore_errors=True)  # left by a run killed right here
            os.replace(self.final, self._old)
        os.replace(self.staging, self.final)  # rename(2) replaces an empty folder atomically
        shutil.rmtree(self._old, ignore_errors=True)

    def abort(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
