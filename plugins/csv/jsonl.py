"""The csv plugin's JSON Lines files: plain, gzipped (``.jsonl.gz``) or zstd-compressed
(``.jsonl.zst``), their nested values as JSON text."""

import json

import pyarrow as pa

SUFFIXES = (".jsonl", ".ndjson")
COMPRESSED = (".gz", ".zst")
ALL_SUFFIXES = SUFFIXES + tuple(s + c for s in SUFFIXES for c in COMPRESSED)
CHUNK = 1 << 20


def is_jsonl(path):
    return path.lower().endswith(ALL_SUFFIXES)


def is_compressed(path):
    """A compressed file cannot be cut into tasks at byte offsets: it is one task."""
    return path.lower().endswith(COMPRESSED)


def lines(path, start=0, line_number=1):
    """(line number, byte offset after the line, text) from ``start``: a plain file read in
    binary so that offsets are exact; a compressed one decompressed as it is read (its offsets
    are those of the decompressed bytes, and it is read from its start)."""
    if not is_compressed(path):
        with open(path, "rb") as f:
            f.seek(start)
            yield from numbered(f, start, line_number)
        return
    with pa.input_stream(path, compression="detect") as stream:
        yield from numbered(_chunked_lines(stream), 0, line_number)


def numbered(raw_lines, offset, line_number):
    for raw in raw_lines:
        offset += len(raw)
        if offset == len(raw) and raw.startswith(b"\xef\xbb\xbf"):  # a file's byte-order mark
            raw = raw[3:]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:  # the line's own reject, not the task's end
            text = NotUtf8(raw.decode("utf-8", "surrogateescape"))
            text.reason = f"not UTF-8 text: byte {e.start + 1} of the line is {raw[e.start]:#04x}"
        yield line_number, offset, text
        line_number += 1


class NotUtf8(str):
    """A line that does not decode as UTF-8 (its bytes kept as surrogates), with ``reason``."""

    reason = ""


def _chunked_lines(stream):
    """The lines of a stream without ``readline`` (pyarrow's decompressing streams)."""
    rest = b""
    while chunk := stream.read(CHUNK):
        parts = (rest + chunk).split(b"\n")
        rest = parts.pop()
        yield from (part + b"\n" for part in parts)
    if rest:
        yield rest


def flattened(row):
    """A JSON object's values as columns take them: a nested object (or a list holding one) as
    its JSON text, the rest as parsed."""
    return {key: _flat(value) for key, value in row.items()}


def _flat(value):
    if isinstance(value, dict) or (
        isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)
    ):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return value
