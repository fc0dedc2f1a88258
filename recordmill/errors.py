"""Exceptions of recordmill. Every message that names a task, row or field is built here."""

from __future__ import annotations

import contextlib
import difflib
import errno
from collections.abc import Iterable, Iterator

# The advice that ends a bad-input error; what locates the input (a row number) goes before it.
SKIP_HINT = "(--on-bad-input skip records it and goes on)"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 row``, ``2 rows``, ``1,000 inputs``: a count with its noun in the right number."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`` (did you mean --partitions?)`` when one of ``candidates`` is close to ``word``, or
    the only one it abbreviates (``--part``: abbreviations are never taken as the flag)."""
    candidates = list(candidates)
    longer = [c for c in candidates if c.startswith(word) and c != word]
    close = longer if len(longer) == 1 else []
    close = close or difflib.get_close_matches(word, candidates, n=1, cutoff=0.7)
    return f" (did you mean {close[0]}?)" if close else ""


class RecordmillWarning(UserWarning):
    """What recordmill warns about (a cache that cannot be filled, a shuffle that fetches parts
    again and again...): filter or capture it with the ``warnings`` module."""


class RecordmillError(Exception):
    """Base class: a problem recordmill can explain; the CLI prints it without a traceback."""

    def __reduce__(self):
        # Keep subclasses picklable across worker processes whatever their __init__ takes.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls, args, state):
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class ColumnError(RecordmillError, KeyError):
    """A column name that the dataset does not have (a ``KeyError`` too, as a mapping's)."""

    def __str__(self) -> str:  # KeyError's own would quote the whole message
        return str(self.args[0]) if self.args else ""


class PluginError(RecordmillError):
    """A plugin cannot be found, loaded, or does not implement the hooks it must."""


class ConfigError(RecordmillError):
    """Bad command-line flags or configuration file."""


class UnknownSetting(ConfigError, TypeError):
    """A keyword of :func:`recordmill.write` that is no setting (a ``TypeError`` too, as an
    unexpected keyword argument is in Python)."""


class OutputError(RecordmillError):
    """The output location cannot be used (exists, is not a dataset, ...)."""


class LeaseLost(OutputError):
    """Another run holds the output's lease now (object storage): this run must not write."""


class InputError(RecordmillError):
    """An input is damaged or not what it should be (a built-in plugin names file, record and
    byte offset; ``--on-bad-input skip`` lists it among the rejects instead)."""


class SchemaError(RecordmillError):
    """A schema declaration is invalid, or tasks produced incompatible schemas."""


class TaskError(RecordmillError):
    """A plugin hook raised while producing the rows of one task."""

    def __init__(self, task_id: int, cause: str, traceback_text: str = ""):
        super().__init__(f"task {task_id} failed: {cause}")
        self.task_id = task_id
        self.cause = cause
        self.traceback_text = traceback_text


class RowError(RecordmillError):
    """A row does not fit the schema."""

    def __init__(
        self,
        reason: str,
        *,
        task_id: int | None = None,
        row: int | None = None,
        field: str | None = None,
        expected: str | None = None,
        got: str | None = None,
        source: tuple[str, int] | None = None,
    ):
        self.reason = reason
        self.task_id = task_id
        self.row = row
        self.field = field
        self.expected = expected
        self.got = got
        # The input the plugin said the rows come from, and the task's row of the input's row 0.
        self.source = source
        super().__init__(self._message())

    def _message(self) -> str:
        where = []
        if self.source is not None and self.row is not None:  # the input first, then the task
            name, first = self.source
            where.append(f"{name}, row {self.row - first} (task {self.task_id}, row {self.row})")
        else:
            if self.task_id is not None:
                where.append(f"task {self.task_id}")
            if self.row is not None:
                where.append(f"row {self.row}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        text = ", ".join(where) + ": " + self.reason if where else self.reason
        if self.expected is not None:
            text += f"; expected {self.expected}"
        if self.got is not None:
            text += f", got {self.got}"
        return text

    def located(
        self, task_id: int, row: int | None = None, source: tuple[str, int] | None = None
    ) -> RowError:
        """The same error, with the task (and row, and the input they come from) filled in."""
        return RowError(
            self.reason,
            task_id=task_id,
            row=self.row if row is None else row,
            field=self.field,
            expected=self.expected,
            got=self.got,
            source=source or self.source,
        )


# What to do about an OS error, by its errno: said only where it is what happened.
_ADVICE = {
    errno.ENOSPC: "is the disk full?",
    errno.EDQUOT: "is the disk quota used up?",
    errno.EFBIG: "a file-size limit (ulimit -f) was hit",
    errno.EROFS: "the filesystem is read-only: choose another --output",
    errno.EACCES: "check its permissions, or choose another --output",
    errno.EPERM: "check its permissions, or choose another --output",
    errno.ENOTDIR: "a part of that path is a file, not a folder: choose another --output",
    errno.EEXIST: "a part of that path is a file, not a folder: choose another --output",
}


def os_error_text(path: object, e: OSError) -> str:
    """``cannot write PATH: No space left on device (is the disk full?)``."""
    advice = _ADVICE.get(e.errno) if e.errno is not None else None
    return f"cannot write {path}: {e.strerror or e}" + (f" ({advice})" if advice else "")


@contextlib.contextmanager
def writing(path: object) -> Iterator[None]:
    """Turn an OS error while writing ``path`` (a full disk, a file-size limit) into a clear one."""
    try:
        yield
    except OSError as e:
        raise OutputError(os_error_text(path, e)) from e
