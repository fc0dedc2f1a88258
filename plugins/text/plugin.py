"""Built-in plugin ``text``: a text corpus, as token ids for language models (or as text).

    python writer.py --script text --input corpus/ --tokenizer tokenizer.json --eos '<|endoftext|>' \\
        --output out/corpus

Inputs (``--input``, one or more files, folders or globs): JSON Lines (``.jsonl``, ``.ndjson``,
plain, ``.gz`` or ``.zst``; the text in ``--text-field``), Parquet (the text in ``--text-field``),
and plain text (``.txt``, ``.md`` or any file named: one document a file, or a line with
``--documents line``). Folders are searched at every level (``--pattern`` picks other names).
Files are cut into tasks of about ``--task-bytes`` of input, so one huge file is many tasks; the
output does not depend on ``--workers``.

Fields: ``tokens`` (the document's token ids, ``uint16`` when the vocabulary has at most 65,536
tokens, else ``uint32``; the ``--eos`` token appended), ``length`` (int32: its tokens, or without
a tokenizer its characters), ``text`` (without a tokenizer, or with ``--keep-text``),
``text_hash`` (int64, a hash of the text, with ``--hash``: ``--hash --dedup-key text_hash``
keeps the first of each text) and the
``--keep`` fields. A file or line that is not UTF-8 (or not JSON, or without the text field) is
bad input: the run stops naming it, or with ``--on-bad-input skip`` it is listed among the
rejects; ``--errors replace`` reads undecodable bytes as U+FFFD instead.
"""

import functools
import hashlib
import itertools
import os
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from recordmill import kit
from recordmill.kit import ConfigError, infer_schema

from . import inputs, tokenize

# Documents encoded at once: the tokenizer's batch, and a record batch of the output.
BATCH_DOCUMENTS = 1024
INFER_RECORDS = 1000


def _tokenizer_option(text: str) -> str:
    """``--tokenizer``: a file as an absolute path (``tok.py:fn`` too), a module:function as is."""
    module, sep, name = text.rpartition(":")
    if sep and module.endswith(".py"):
        return f"{kit.Path(module)}:{name}"
    return kit.Path(text) if os.path.exists(text) or text.endswith(".json") else text


def worker_imports():
    # Batches are built from Python strings (pyarrow imports pandas for that, where it is
    # installed) and token ids come from the tokenizers package: both loaded once, in the fork
    # server (a module that is not installed is passed over).
    return ["pandas", "tokenizers"]


def add_options(parser):
    add = parser.add_argument
    add("--input", required=True, nargs="+", help="files, folders or globs (more than one)")
    add("--pattern", nargs="+", default=[],
        help="globs of the files a folder is searched for, below it: '*.py', '**/train/*.jsonl' "
        "(default: the known suffixes)")  # fmt: skip
    add("--input-format", choices=("auto", "jsonl", "parquet", "text"), default="auto",
        help="the inputs' kind (default: auto, from each file's suffix)")  # fmt: skip
    add("--documents", choices=("file", "line"), default="file",
        help="plain text: one document a file (default) or one a line")  # fmt: skip
    add("--text-field", default="text", help="JSONL/Parquet: the text's field (default: text)")
    add("--keep", nargs="+", default=[], help="JSONL/Parquet fields kept as columns")
    add("--tokenizer", type=_tokenizer_option,
        help="a Hugging Face tokenizer.json, or module:function (default: the text)")  # fmt: skip
    add("--eos", help="appended to every document: a token of the tokenizer, or an id")
    add("--vocab-size", type=int, help="with a function tokenizer: its vocabulary's size")
    add("--keep-text", action="store_true", help="keep the text beside the tokens")
    add("--hash", action="store_true", help="add text_hash (int64), e.g. for --dedup-key")
    add("--errors", choices=("strict", "replace"), default="strict",
        help="bytes that are not UTF-8: bad input (default), or read as U+FFFD")  # fmt: skip
    add("--task-bytes", type=int,
        help="bytes of input a task (default: the input in about 64 tasks, of 256 KiB to "
        "32 MiB)")  # fmt: skip


def _inputs(options) -> list[str]:
    # Made absolute here, where the command runs, not on a worker started in another folder.
    return [kit.Path(p) for p in options.input]


@functools.lru_cache(maxsize=4)
def _plan(given: tuple[str, ...], patterns, input_format, documents, task_bytes) -> list:
    files = inputs.input_files(list(given), patterns)
    size = task_bytes or kit.task_size(sum(os.path.getsize(f.path) for f in files))
    return inputs.tasks(inputs.pieces(files, input_format, documents, size), size)


def _tasks(options) -> list:
    if options.task_bytes is not None and options.task_bytes < 1:
        raise ConfigError(f"--task-bytes must be 1 or more, got {options.task_bytes}")
    key = (options.input_format, options.documents, options.task_bytes)
    return _plan(tuple(_inputs(options)), tuple(options.pattern or ()), *key)


def _encoder(options):
    if options.tokenizer is None:
        if options.eos is not None or options.vocab_size is not None:
            raise ConfigError("--eos and --vocab-size need a --tokenizer; none was given")
        return None
    return tokenize.load(options.tokenizer, options.eos, options.vocab_size)


def task_number(options):
    if options.tokenizer is not None and options.eos is None:
        warnings.warn(
            "--eos is not given: documents will follow one another in token blocks with "
            "nothing between them (give the tokenizer's end-of-text token, e.g. --eos "
            "'<|endoftext|>')",
            kit.RecordmillWarning,
            stacklevel=2,
        )
    return len(_tasks(options))


def schema(options):
    encoder = _encoder(options)
    fields = {}
    if encoder is not None:
        fields["tokens"] = {"type": encoder.dtype.name, "shape": [-1]}
    fields["length"] = {"type": "int32"}
    if encoder is None or options.keep_text:
        fields["text"] = {"type": "string"}
    if options.hash:
        fields["text_hash"] = {"type": "int64"}
    fields["file"] = {"type": "string"}
    arrow = kit.to_arrow_schema(fields)
    for field in _kept_fields(options):
        arrow = arrow.append(field)
    return arrow


def _kept_fields(options) -> list[pa.Field]:
    """The ``--keep`` fields' types: a Parquet input's own, else inferred from JSONL records
    (once a process: ``schema()`` is asked for again in every task)."""
    if not options.keep:
        return []
    taken = set(("tokens", "length", "text", "text_hash", "file")) & set(options.keep)
    if taken:
        raise ConfigError(f"--keep {sorted(taken)[0]}: a column the text plugin writes itself")
    key = (tuple(_inputs(options)), tuple(options.pattern or ()), options.input_format, options.documents,
           options.task_bytes, options.text_field, options.errors, tuple(options.keep))  # fmt: skip
    if key not in _KEPT:
        _KEPT[key] = _infer_kept(options)
    return _KEPT[key]


_KEPT: dict[tuple, list[pa.Field]] = {}


def _infer_kept(options) -> list[pa.Field]:
    pieces = [p for task in _tasks(options) for p in task]
    parquet = next((p for p in pieces if p.kind == "parquet"), None)
    if parquet is not None:
        own = pq.ParquetFile(parquet.path).schema_arrow
        return [own.field(k) if k in own.names else pa.field(k, pa.null()) for k in options.keep]
    keep = tuple(options.keep)
    docs = (d for p in pieces for d in inputs.documents(p, options, keep) if d.text is not None)
    records = [d.fields for d in itertools.islice(docs, INFER_RECORDS)]
    if not records:
        raise ConfigError("--keep: no record to tell its fields' types from")
    inferred = infer_schema(records[0], records[1:])
    return [f.with_nullable(True) for f in inferred]


def dict_data(task_id, options):
    encoder = _encoder(options)
    out = pa.schema(schema(options))
    keep = tuple(options.keep)
    batch = []
    # One batch across the task's files (small files are many documents of one task): each
    # bad document names its own file and line, and the batches are built to the schema.
    for piece in _tasks(options)[task_id]:
        for doc in inputs.documents(piece, options, keep):
            if doc.text is None:
                if doc.reason:
                    yield kit.bad_input(options, doc.where, doc.reason)
                continue
            batch.append((doc, piece.name))
            if len(batch) == BATCH_DOCUMENTS:
                yield _batch(batch, encoder, out, options)
                batch = []
    if batch:
        yield _batch(batch, encoder, out, options)


def _batch(named, encoder, out: pa.Schema, options) -> pa.RecordBatch:
    docs = [d for d, _ in named]
    texts = [d.text for d in docs]
    columns = {}
    if encoder is not None:
        flat, lengths = encoder.encode(texts)
        offsets = np.zeros(len(texts) + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        columns["tokens"] = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))
        columns["length"] = pa.array(lengths.astype(np.int32))
    else:
        columns["length"] = pa.array([len(t) for t in texts], pa.int32())
    if "text" in out.names:
        columns["text"] = pa.array(texts, pa.string())
    if "text_hash" in out.names:
        columns["text_hash"] = pa.array([_hash(t) for t in texts], pa.int64())
    columns["file"] = pa.array([name for _, name in named], pa.string())
    for name in options.keep:
        columns[name] = pa.array([d.fields.get(name) for d in docs], out.field(name).type)
    return pa.RecordBatch.from_arrays([columns[n] for n in out.names], schema=out)


def _hash(text: str) -> int:
    """A stable 64-bit hash of the text (as int64, which every SQL tool has)."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)
