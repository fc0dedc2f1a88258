"""The text plugin's inputs: the files named by ``--input``, cut into pieces of about
``--task-bytes``, and the documents of a piece, each with the place it was read from.

A plain JSONL or text file is cut at byte offsets: a piece holds the lines that *start* in its
byte range, so a line is read by exactly one piece whatever the cut. A compressed file is one
piece (a gzip or zstd stream cannot be entered in the middle); a Parquet file is cut at its row
groups.
"""

from __future__ import annotations

import fnmatch
import glob
import io
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from recordmill.kit import ConfigError, InputError

JSONL = (".jsonl", ".ndjson")
PARQUET = (".parquet",)
TEXT = (".txt", ".text", ".md")
CODECS = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd"}
# What a folder given as --input is searched for (every level), unless --pattern says otherwise.
KNOWN = tuple(s + c for s in JSONL + TEXT for c in ("", *CODECS)) + PARQUET
READ_BYTES = 1 << 20


@dataclass(frozen=True)
class Piece:
    """A part of one input file: bytes ``start`` to ``stop`` (lines starting there), or Parquet
    row groups ``start`` to ``stop``; ``stop`` -1 is the end."""

    path: str
    kind: str  # "jsonl", "parquet" or "text"
    codec: str | None
    start: int
    stop: int
    size: int  # bytes of input, to pack pieces into tasks
    name: str = ""  # the file's name in the ``file`` column (InputFile.name)


@dataclass(frozen=True)
class Document:
    """A document read, or (``text`` None) one that could not be: ``reason`` says why."""

    where: str  # file:line, or the file for a whole-file document
    text: str | None
    fields: dict
    reason: str = ""


def kind_of(path: str, input_format: str) -> tuple[str, str | None]:
    """A file's kind and compression, from its name (``--input-format`` may say the kind)."""
    name = path.lower()
    codec = next((c for s, c in CODECS.items() if name.endswith(s)), None)
    if codec is not None:
        name = name[: name.rfind(".")]
    if input_format != "auto":
        kind = input_format
    elif name.endswith(PARQUET):
        kind = "parquet"
    elif name.endswith(JSONL):
        kind = "jsonl"
    else:
        kind = "text"
    if kind == "parquet" and codec is not None:
        raise InputError(f"{path}: a compressed Parquet file; expected a .parquet file as it is")
    return kind, codec


def input_files(inputs: list[str], patterns: tuple[str, ...] = ()) -> tuple[InputFile, ...]:
    """The files of ``--input``: files as named, folders searched at every level (hidden ones
    left out) for the ``--pattern`` globs (else the known suffixes), globs expanded; sorted
    within each, none twice. Each with its name as a row records it (``InputFile.name``)."""
    found: dict[str, InputFile] = {}
    for given in inputs:
        if os.path.isfile(given):
            files = [InputFile(given, os.path.basename(given))]
        elif os.path.isdir(given):
            files = _folder(given, patterns)
        elif glob.has_magic(given):
            above = os.path.dirname(_glob_root(given)) or os.curdir
            matched = sorted(p for p in glob.glob(given, recursive=True) if os.path.isfile(p))
            if not matched:
                raise InputError(f"--input {given} matches no file")
            files = [InputFile(p, os.path.relpath(p, above)) for p in matched]
        else:
            raise InputError(f"--input {given} is neither a file, a folder nor a glob")
        for f in files:
            found.setdefault(f.path, f)
    return tuple(found.values())


@dataclass(frozen=True)
class InputFile:
    """A file of the corpus, and its name as the ``file`` column records it: its path from the
    folder given (``corpus/a/b.jsonl``; a glob's: from its last folder without a wildcard), or
    the name of a file given as it is."""

    path: str
    name: str


def _glob_root(given: str) -> str:
    """The folder above a glob's first part with a wildcard (what its matches are named from)."""
    parts = given.split(os.sep)
    fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    return os.sep.join(parts[:fixed]) or os.curdir


def _folder(folder: str, patterns: tuple[str, ...]) -> list[InputFile]:
    matchers = [pattern_regex(p) for p in patterns]
    top = os.path.basename(os.path.normpath(folder))
    names = []
    for root, dirs, files in os.walk(folder):
        # Hidden folders and files (.git, a run's own .NAME.recordmill-partial) are not corpus.
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(f for f in files if not f.startswith(".")):
            path = os.path.join(root, name)
            below = os.path.relpath(path, folder).replace(os.sep, "/")
            if matchers:
                wanted = any(m.fullmatch(below) for m in matchers)
            else:
                wanted = name.lower().endswith(KNOWN)
            if wanted:
                names.append(InputFile(path, f"{top}/{below}"))
    if not names:
        said = (
            "--pattern " + " ".join(repr(p) for p in patterns)
            if patterns
            else "a known suffix (" + ", ".join(KNOWN) + ")"
        )
        raise InputError(f"--input {folder} holds no file matching {said}")
    return names


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """A ``--pattern`` as glob users write it, matched against a file's path below the folder:
    ``*`` and ``?`` within one folder's name, ``**/`` any number of folders (none too); a
    pattern without a ``/`` matches a name in any folder (``*.py``, as find -name does)."""
    if "/" not in pattern:
        pattern = "**/" + pattern
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            out.append(fnmatch.translate(pattern[i : end + 1])[4:-3])  # (?s:[...])\Z -> [...]
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def pieces(
    files: tuple[InputFile, ...], input_format: str, documents: str, task_bytes: int
) -> list[Piece]:
    """Every file cut into pieces of about ``task_bytes``."""
    out: list[Piece] = []
    for f in files:
        path = f.path
        kind, codec = kind_of(path, input_format)
        size = os.path.getsize(path)
        if kind == "parquet":
            out += _parquet_pieces(f, task_bytes)
        elif codec is not None or (kind == "text" and documents == "file"):
            out.append(Piece(path, kind, codec, 0, -1, size, f.name))
        else:
            step = max(1, task_bytes)
            cuts = list(range(0, size, step)) or [0]
            out += [
                Piece(path, kind, None, lo, lo + step, min(step, size - lo), f.name) for lo in cuts
            ]
    return out


def _parquet_pieces(f: InputFile, task_bytes: int) -> list[Piece]:
    meta = pq.ParquetFile(f.path).metadata
    out, start, size = [], 0, 0
    for g in range(meta.num_row_groups):
        size += meta.row_group(g).total_byte_size
        if size >= task_bytes or g == meta.num_row_groups - 1:
            out.append(Piece(f.path, "parquet", None, start, g + 1, size, f.name))
            start, size = g + 1, 0
    return out or [Piece(f.path, "parquet", None, 0, 0, 0, f.name)]


def tasks(all_pieces: list[Piece], task_bytes: int) -> list[tuple[Piece, ...]]:
    """Consecutive pieces packed into tasks of about ``task_bytes`` (small files together)."""
    out: list[tuple[Piece, ...]] = []
    run: list[Piece] = []
    size = 0
    for piece in all_pieces:
        run.append(piece)
        size += piece.size
        if size >= task_bytes:
            out.append(tuple(run))
            run, size = [], 0
    if run or not out:
        out.append(tuple(run))
    return out


def documents(piece: Piece, options, keep: tuple[str, ...]) -> Iterator[Document]:
    """The documents of a piece, in order."""
    if piece.kind == "parquet":
        yield from _parquet_documents(piece, options.text_field, keep)
    elif piece.kind == "text" and options.documents == "file":
        yield _whole_file(piece, options.errors)
    else:
        for line, raw in _lines(piece):
            yield _line_document(piece, line, raw, options, keep)


def _open(piece: Piece) -> io.BufferedIOBase:
    if piece.codec is None:
        return open(piece.path, "rb")
    return io.BufferedReader(pa.input_stream(piece.path, compression=piece.codec), READ_BYTES)


def _lines(piece: Piece) -> Iterator[tuple[int | None, bytes]]:
    """(line number, or None where only its offset is known, and the line's bytes) for each line
    that starts in the piece's byte range."""
    with _open(piece) as f:
        offset = piece.start
        if piece.start:
            # Back one byte: if a line starts exactly at ``start``, the line read here is the
            # previous one's end (its newline), and the line at ``start`` is kept.
            f.seek(piece.start - 1)
            offset += len(f.readline()) - 1
        number = 1 if piece.start == 0 else None
        while piece.stop < 0 or offset < piece.stop:
            raw = f.readline()
            if not raw:
                return
            yield (number if number is not None else -offset), raw
            offset += len(raw)
            number = None if number is None else number + 1


def where(piece: Piece, line: int | None) -> str:
    """``file:line``; a line known by its byte offset (negative) is counted now (only for
    a message: counting every piece's lines from the file's start would read it twice)."""
    if line is None:
        return piece.path
    if line > 0:
        return f"{piece.path}:{line}"
    with open(piece.path, "rb") as f:
        counted = f.read(-line).count(b"\n") + 1
    return f"{piece.path}:{counted}"


def _line_document(piece: Piece, line: int, raw: bytes, options, keep) -> Document:
    raw = raw.rstrip(b"\r\n") if raw.endswith(b"\n") else raw
    if piece.kind == "text" and b"\0" in raw:
        return _binary(where(piece, line), raw)
    try:
        text = raw.decode("utf-8", errors=options.errors)
    except UnicodeDecodeError as e:
        return _not_utf8(where(piece, line), e)
    if piece.kind == "text":
        return Document("", text, {})
    if not text.strip():
        return Document("", None, {}, "")  # a blank line of JSONL is no record: nothing to say
    try:
        record = json.loads(text)
    except json.JSONDecodeError as e:
        return _bad(piece, line, f"not JSON ({e.msg} at column {e.colno}); expected one object")
    if not isinstance(record, dict):
        return _bad(piece, line, f"a JSON {type(record).__name__}; expected one object a line")
    value = record.get(options.text_field)
    if not isinstance(value, str):
        said = (
            f"has no field {options.text_field!r} (its fields: {', '.join(map(str, record))})"
            if options.text_field not in record
            else f"field {options.text_field!r} is {_kind(value)}"
        )
        return _bad(piece, line, f"{said}; expected a string (--text-field)")
    return Document("", value, {k: record.get(k) for k in keep})


def _bad(piece: Piece, line: int, reason: str) -> Document:
    at = where(piece, line)
    return Document(at, None, {}, f"{at}: {reason}")


def _kind(value) -> str:
    return "null" if value is None else f"a JSON {type(value).__name__} ({json.dumps(value)[:40]})"


def _not_utf8(at: str, e: UnicodeDecodeError) -> Document:
    byte = e.object[e.start : e.start + 1].hex()
    reason = (
        f"{at}: not UTF-8 (byte 0x{byte} at offset {e.start}); expected UTF-8 text "
        "(--errors replace reads it with U+FFFD in place of such bytes)"
    )
    return Document(at, None, {}, reason)


def _whole_file(piece: Piece, errors: str) -> Document:
    with _open(piece) as f:
        data = f.read()
    if b"\0" in data:
        return _binary(piece.path, data)
    try:
        return Document(piece.path, data.decode("utf-8", errors=errors), {})
    except UnicodeDecodeError as e:
        return _not_utf8(piece.path, e)


def _binary(at: str, data: bytes) -> Document:
    """Text holds no NUL byte: a file with one is binary (an image, a model, zeros), which
    UTF-8 would read as text all the same."""
    reason = f"{at}: a NUL byte at offset {data.index(0):,}; expected text (this is a binary file)"
    return Document(at, None, {}, reason)


def _parquet_documents(piece: Piece, text_field: str, keep: tuple[str, ...]) -> Iterator[Document]:
    f = pq.ParquetFile(piece.path)
    names = f.schema_arrow.names
    for name in (text_field, *keep):
        if name not in names:
            raise InputError(
                f"{piece.path}: has no column {name!r}; expected the --text-field and --keep "
                f"columns among its columns ({', '.join(names)})"
            )
    kind = f.schema_arrow.field(text_field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise ConfigError(
            f"{piece.path}: column {text_field!r} is {kind}; expected a string column "
            "(--text-field)"
        )
    row = sum(f.metadata.row_group(g).num_rows for g in range(piece.start))
    for g in range(piece.start, piece.stop):
        table = f.read_row_group(g, columns=[text_field, *keep])
        texts = table.column(text_field).to_pylist()
        kept = {k: table.column(k).to_pylist() for k in keep}
        for i, text in enumerate(texts):
            at = f"{piece.path}, row {row + i}"
            if text is None:
                yield Document(at, None, {}, f"{at}: {text_field!r} is null; expected a string")
            else:
                yield Document("", text, {k: v[i] for k, v in kept.items()})
        row += len(texts)
