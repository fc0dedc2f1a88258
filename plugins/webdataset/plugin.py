"""Built-in plugin ``webdataset``: WebDataset ``.tar`` shards (img2dataset / LAION-style image-text
pairs included), read without webdataset.

    python writer.py --script webdataset --input 'shards/shard-{000000..000099}.tar' \
        --output out/pairs --partitions 8 --workers 8

``--input`` is a shard, a folder of them (``--pattern``, default ``*.tar``), a brace pattern as
webdataset takes it (``shard-{000000..000099}.tar``, ``{a,b}``), or a URI that pyarrow opens
(``s3://bucket/shards/shard-{0000..0099}.tar``). One task per shard; gzipped shards
(``.tar.gz``, ``.tgz``) are read too.

A sample is the consecutive files of one key (``dir/000042.jpg``, ``dir/000042.txt``: key
``dir/000042``, the extension being what follows the first dot of the file's name), one row:
``key`` and ``shard`` (the shard's file name) trace it, and each extension is a column, null in
a sample without that file. The columns come from the first ``INFER_SAMPLES`` samples of the
first shard, or from ``--extensions`` (only those are taken; the others are left out on purpose):
``txt`` becomes a string, ``cls`` an int64 (the class as text digits), ``json`` the JSON text
(a string), any other extension the file's bytes. Images (``jpg``, ``png``, ``webp``, ...) are
bytes as stored; the one named by ``--image-ext`` (default: the first found) goes through the
image pipeline, so ``--encode tensor --size 224`` decodes and resizes it (see
``recordmill/inputs/images.py``). A damaged shard (cut short, not a tar) is bad input: with
``--on-bad-input skip`` its rows up to the damage are kept and the rest is one reject.
"""

import functools
import itertools
import os
import re
import tarfile

import pyarrow as pa
import pyarrow.fs as pafs

from recordmill import kit
from recordmill.kit import ConfigError, InputError, bad_input, features, images, safe_name

INFER_SAMPLES = 1000
READ_BYTES = 1 << 20  # a shard is read in pieces this large
PATTERN = "*.tar"
TEXT, INT, JSON = ("txt", "text", "caption"), ("cls", "cls2", "index", "label"), ("json",)
_BRACES = re.compile(r"\{([^{}]*)\}")


def add_options(parser):
    parser.add_argument(
        "--input",
        required=True,
        type=_shards_path,
        help="a shard, a folder of shards, a brace pattern (shard-{000..099}.tar) or a URI",
    )
    parser.add_argument(
        "--pattern", default=PATTERN, help="shards to take from a folder (default: %(default)s)"
    )
    parser.add_argument(
        "--extensions",
        help="the extensions to take, comma-separated (default: those of the first "
        f"{INFER_SAMPLES} samples, all of them)",
    )
    parser.add_argument(
        "--image-ext",
        help="the image extension that goes through the image options (default: the first "
        "image extension found)",
    )
    images.add_options(parser)


def _shards_path(text):
    """``--input``: a URI as given, a local path (or pattern) made absolute, as kit.Path does."""
    return text if "://" in text else kit.Path(text)


def expand(pattern):
    """A brace pattern's names, in order: ``{000..010}`` (zero-padded ranges), ``{a,b}``."""
    match = _BRACES.search(pattern)
    if match is None:
        return [pattern]
    inner = match.group(1)
    ends = re.fullmatch(r"(\d+)\.\.(\d+)", inner)
    if ends:
        lo, hi = ends.groups()
        width = len(lo) if lo.startswith("0") else 0
        step = 1 if int(hi) >= int(lo) else -1  # {10..1} counts down, as bash's does
        choices = [str(n).zfill(width) for n in range(int(lo), int(hi) + step, step)]
    else:
        choices = inner.split(",")
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [name for choice in choices for name in expand(head + choice + tail)]


@functools.lru_cache(maxsize=4)
def shards(given, pattern):
    """The shards ``--input`` names, as (filesystem, path) pairs, in order."""
    if "://" in given:  # (a URI's query, such as an endpoint, may follow the braces)
        names = expand(given)
        fs = pafs.FileSystem.from_uri(names[0])[0]
        return tuple((fs, pafs.FileSystem.from_uri(name)[1]) for name in names)
    local = pafs.LocalFileSystem()
    if os.path.isdir(given):
        return tuple((local, path) for path in features.input_files(given, pattern))
    names = expand(given)
    missing = [n for n in names if not os.path.isfile(n)]
    if missing:
        raise InputError(
            f"--input {given}: no shard {missing[0]} (expected a .tar file, a folder of them or "
            f"a brace pattern of them; {len(missing)} of {len(names)} missing)"
        )
    return tuple((local, n) for n in names)


def task_number(options):
    images.check_options(options)
    if options.pattern != PATTERN and not os.path.isdir(options.input):
        raise ConfigError(f"--pattern {options.pattern} picks the shards of a folder only")
    return len(shards(options.input, options.pattern))


def samples(fs, path):
    """(key, {extension: bytes}) of a shard, in order; a damaged shard raises ``tarfile``'s
    ``ReadError`` (or ``EOFError``) after the samples before the damage."""
    # The file as stored (tarfile tells gzip by its first bytes; pyarrow's own decompression,
    # by the name, would hide it), read in large pieces (tarfile reads 10 KB at a time: a
    # request each on object storage).
    raw = pa.BufferedInputStream(fs.open_input_file(path), buffer_size=READ_BYTES)
    with raw as stream, tarfile.open(fileobj=stream, mode="r|*") as tar:
        key, files = None, {}
        for member in tar:
            folder, name = os.path.split(member.name)
            if not member.isfile() or name.startswith((".", "__")) or "." not in name:
                continue  # not a sample's file (webdataset skips these too)
            stem, extension = name.split(".", 1)
            this = f"{folder}/{stem}" if folder else stem
            if this != key and files:
                yield key, files
                files = {}
            key = this
            files[extension.lower()] = tar.extractfile(member).read()  # cut short: ReadError
        _check_end(tar)
        if files:
            yield key, files


def _check_end(tar):
    """A shard ends with its end-of-archive blocks: one cut short between two files (its tar, or
    the tar inside a whole gzip stream) reads as whole otherwise, tarfile taking its end for the
    archive's. ``fileobj.pos`` counts the (decompressed) bytes tarfile read: past the last
    file's end only where it read an end block."""
    if tar.fileobj.pos < tar.offset + tarfile.BLOCKSIZE:
        raise tarfile.ReadError(
            f"cut short: it ends after {tar.offset:,} bytes of tar, no end-of-archive blocks"
        )


@functools.lru_cache(maxsize=4)
def found_extensions(given, pattern, listed):
    """The extensions taken: ``--extensions``, else those of the first shard's first samples."""
    if listed:
        return tuple(e.strip().lower().lstrip(".") for e in listed.split(",") if e.strip())
    fs, path = shards(given, pattern)[0]
    seen = {}
    try:
        for _, files in itertools.islice(samples(fs, path), INFER_SAMPLES):
            seen.update(dict.fromkeys(files))
    except (tarfile.TarError, EOFError, OSError) as e:
        raise InputError(f"{path}: not a readable tar shard ({e}); give --extensions") from None
    if not seen:
        raise InputError(f"{path}: no sample in it (files named KEY.EXTENSION)")
    return tuple(seen)


def _image_ext(options, extensions):
    given = (options.image_ext or "").strip().lower().lstrip(".")
    chosen = given or next((e for e in extensions if e in images.EXTENSIONS), None)
    if given and given not in extensions:
        raise ConfigError(f"--image-ext {options.image_ext}: the samples have {extensions}")
    return chosen


def _kind(extension):
    if extension in TEXT:
        return "string"
    if extension in INT:
        return "int64"
    return "string" if extension in JSON else "bytes"


def schema(options):
    extensions = found_extensions(options.input, options.pattern, options.extensions)
    image = _image_ext(options, extensions)
    fields = {"key": {"type": "string"}, "shard": {"type": "string"}}
    for extension in extensions:
        if extension != image:
            fields[safe_name(extension)] = {"type": _kind(extension), "nullable": True}
    if image is not None:
        fields.update({k: {**v, "nullable": True} for k, v in images.schema(options).items()})
    return fields


def _row(key, files, shard, extensions, image, options):
    unknown = [e for e in files if e not in extensions]
    if unknown and not options.extensions:  # found after the samples the columns came from
        raise ValueError(
            f"a .{unknown[0]} file, which the first {INFER_SAMPLES} samples of the first shard "
            f"do not have (columns: {', '.join(extensions)}); give --extensions with it, or "
            "without it to leave it out"
        )
    row = {"key": key, "shard": shard}
    for extension in extensions:
        value = files.get(extension)
        if extension == image:
            decoded = {} if value is None else images.encode_bytes(value, f"{shard}:{key}", options)
            row.update(decoded or dict.fromkeys(images.schema(options)))
        elif value is None or _kind(extension) == "bytes":
            row[safe_name(extension)] = value
        elif _kind(extension) == "int64":
            row[safe_name(extension)] = int(value.decode().strip())
        else:
            row[safe_name(extension)] = value.decode("utf-8")
    return row


def dict_data(task_id, options):
    fs, path = shards(options.input, options.pattern)[task_id]
    extensions = found_extensions(options.input, options.pattern, options.extensions)
    image = _image_ext(options, extensions)
    shard = os.path.basename(path)
    yield kit.Source(path)
    count = 0
    try:
        for key, files in samples(fs, path):
            count += 1
            try:
                yield _row(key, files, shard, extensions, image, options)
            except (ValueError, UnicodeDecodeError, images.BadImage) as e:
                yield bad_input(options, f"{path}:{key}", f"sample {key}: {e}")
    except (tarfile.TarError, EOFError) as e:
        yield bad_input(
            options,
            path,
            f"{path}: damaged after {count} samples ({e or type(e).__name__}); expected a "
            "whole tar shard",
            skipped=": the rest of the shard is left out",
        )
