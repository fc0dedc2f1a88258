"""Built-in plugin ``audio``: a folder of audio files (WAV, FLAC), one sub-folder per class.

    python writer.py --script audio --input speech_commands/ --output out/speech --workers 8
    python writer.py --script audio --input clips/ --decode --rate 16000 --output out/clips

One task per class folder (a class's label is its place among the sorted folder names; files at
the top of ``--input`` are class ``""``, label -1). Each file is a row: ``label``, ``class``,
``file_name`` (relative to ``--input``), its ``sample_rate``, ``channels`` and ``duration``
(seconds, read from the file's header), and ``audio``, the file's bytes as stored; or, with
``--decode``, ``samples``: float32 in [-1, 1], mixed down to one channel and resampled to
``--rate`` (linear interpolation; the rate is then ``sample_rate``). WAV is read with Python's
``wave`` module; FLAC's header is read here, and decoding FLAC needs ``soundfile``. A file that is
not what its name says is bad input (``--on-bad-input skip``: a listed reject).
"""

import functools
import io
import os
import struct
import wave

import numpy as np

from recordmill import kit
from recordmill.kit import ConfigError, InputError, bad_input

EXTENSIONS = (".wav", ".flac")


def add_options(parser):
    parser.add_argument(
        "--input", required=True, type=kit.Path, help="a folder, one sub-folder per class"
    )
    parser.add_argument(
        "--decode", action="store_true", help="decoded samples (float32, mono) instead of bytes"
    )
    parser.add_argument(
        "--rate", type=int, help="with --decode: resample to this many samples a second"
    )


@functools.lru_cache(maxsize=4)
def classes(folder):
    if not os.path.isdir(folder):
        raise InputError(f"--input {folder} is not a folder")
    # (hidden folders, such as .ipynb_checkpoints, are no class)
    return tuple(sorted(e.name for e in os.scandir(folder) if e.is_dir() and e.name[0] != "."))


def _files(folder):
    return sorted(
        e.name for e in os.scandir(folder) if e.is_file() and e.name.lower().endswith(EXTENSIONS)
    )


def task_number(options):
    if options.rate is not None and not options.decode:
        raise ConfigError("--rate resamples decoded samples: give --decode too")
    if options.rate is not None and options.rate < 1:
        raise ConfigError(f"--rate must be 1 or more samples a second, got {options.rate}")
    found = classes(options.input)
    if not found and not _files(options.input):
        raise InputError(f"--input {options.input} holds no .wav or .flac file and no folder")
    return len(found) + 1  # the last task: the files at the top, if any


def schema(options):
    fields = {
        "label": {"type": "int32"},
        "class": {"type": "string"},
        "file_name": {"type": "string"},
        "sample_rate": {"type": "int32"},
        "channels": {"type": "int32"},
        "duration": {"type": "float32"},
    }
    if options.decode:
        return {**fields, "samples": {"type": "float32", "shape": [-1]}}
    return {**fields, "audio": {"type": "bytes"}}


def header(path, data):
    """(sample rate, channels, frames) from a WAV or FLAC file's header; ValueError if it is
    not one."""
    if path.lower().endswith(".flac"):
        if data[:4] != b"fLaC" or len(data) < 42 or data[4] & 0x7F != 0:
            raise ValueError(f"not a FLAC file (starts with {data[:8]!r})")
        info = int.from_bytes(data[18:26], "big")  # after min/max block and frame sizes
        return info >> 44, ((info >> 41) & 0x7) + 1, info & ((1 << 36) - 1)
    try:
        with wave.open(io.BytesIO(data)) as w:
            return w.getframerate(), w.getnchannels(), w.getnframes()
    except (wave.Error, EOFError, struct.error) as e:
        raise ValueError(f"not a WAV file this reads ({e})") from None


def decode(path, data, rate):
    """Mono float32 samples in [-1, 1] at ``rate`` (None: the file's own), and that rate."""
    if path.lower().endswith(".flac"):
        try:
            import soundfile
        except ImportError:
            raise ConfigError("decoding FLAC needs soundfile: pip install soundfile") from None
        try:
            samples, own = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
        except Exception as e:  # soundfile's own errors (LibsndfileError...): bad input
            raise ValueError(f"not a FLAC file soundfile decodes ({e})") from None
    else:
        with wave.open(io.BytesIO(data)) as w:
            own, width, channels = w.getframerate(), w.getsampwidth(), w.getnchannels()
            raw = w.readframes(w.getnframes())
        samples = _pcm(raw, width).reshape(-1, channels)
    mono = samples.mean(axis=1).astype(np.float32)
    if rate is None or rate == own or not len(mono):
        return mono, own
    at = np.arange(round(len(mono) * rate / own)) * (own / rate)
    return np.interp(at, np.arange(len(mono)), mono).astype(np.float32), rate


def _pcm(raw, width):
    if width == 1:  # unsigned 8-bit
        return (np.frombuffer(raw, np.uint8).astype(np.float32) - 128) / 128
    if width == 3:  # 24-bit: widen to 32
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3)
        wide = (
            b[:, 0].astype(np.int32) << 8
            | b[:, 1].astype(np.int32) << 16
            | b[:, 2].astype(np.int32) << 24
        )
        return wide.astype(np.float32) / 2**31
    kind = np.int16 if width == 2 else np.int32  # (wave reads 1 to 4 bytes a sample)
    return np.frombuffer(raw, kind).astype(np.float32) / float(np.iinfo(kind).max + 1)


def dict_data(task_id, options):
    found = classes(options.input)
    name = found[task_id] if task_id < len(found) else ""
    folder = os.path.join(options.input, name) if name else options.input
    yield kit.Source(folder)
    for file_name in _files(folder):
        path = os.path.join(folder, file_name)
        with open(path, "rb") as f:
            data = f.read()
        try:
            rate, channels, frames = header(path, data)
            row = {
                "label": found.index(name) if name else -1,
                "class": name,
                "file_name": f"{name}/{file_name}" if name else file_name,
                "sample_rate": rate,
                "channels": channels,
                "duration": frames / rate if rate else 0.0,
            }
            if options.decode:
                row["samples"], row["sample_rate"] = decode(path, data, options.rate)
            else:
                row["audio"] = data
        except ValueError as e:
            yield bad_input(options, path, f"{path}: {e}")
            continue
        yield row
