"""The audio plugin on WAV files written by Python's wave module (and a FLAC header made here),
read back as wave reads them."""

from __future__ import annotations

import wave

import numpy as np

import recordmill
from tests.conftest import read_dataset, write_here


def write_wav(path, samples: np.ndarray, rate: int) -> None:
    """int16 samples, (frames, channels)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(samples.shape[1])
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.astype("<i2").tobytes())


def tone(frames: int, channels: int, k: int) -> np.ndarray:
    t = np.arange(frames)
    wave_ = (np.sin(t * (k + 1) / 20) * 12000).astype(np.int16)
    return np.stack([wave_] * channels, axis=1)


def flac_header(rate: int, channels: int, frames: int) -> bytes:
    """A FLAC file's first bytes: its STREAMINFO block (all the plugin reads without --decode)."""
    info = rate << 44 | (channels - 1) << 41 | 15 << 36 | frames
    streaminfo = b"\x10\x00\x10\x00" + b"\x00" * 6 + info.to_bytes(8, "big") + b"\x00" * 16
    return b"fLaC" + bytes([0x80]) + len(streaminfo).to_bytes(3, "big") + streaminfo


def test_class_folders_of_wav_and_flac(tmp_path):
    root = tmp_path / "clips"
    write_wav(root / "dog" / "a.wav", tone(8000, 1, 0), 8000)
    write_wav(root / "dog" / "b.wav", tone(4000, 2, 1), 16000)
    write_wav(root / "cat" / "c.wav", tone(2000, 1, 2), 8000)
    (root / "cat" / "d.flac").write_bytes(flac_header(44100, 2, 88200))
    out = tmp_path / "out"
    result = write_here("--script", "audio", "--input", root, "--output", out, "--quiet")
    assert result.returncode == 0, result.stderr
    rows = read_dataset(out).to_pylist()
    assert [(r["class"], r["file_name"], r["label"]) for r in rows] == [
        ("cat", "cat/c.wav", 0), ("cat", "cat/d.flac", 0), ("dog", "dog/a.wav", 1),
        ("dog", "dog/b.wav", 1),
    ]  # fmt: skip
    for row in rows:
        path = root / row["file_name"]
        assert row["audio"] == path.read_bytes()
        if path.suffix == ".wav":
            with wave.open(str(path)) as w:
                rate, channels, frames = w.getframerate(), w.getnchannels(), w.getnframes()
        else:
            rate, channels, frames = 44100, 2, 88200
        assert (row["sample_rate"], row["channels"]) == (rate, channels)
        assert row["duration"] == np.float32(frames / rate)


def test_decoded_samples_mixed_down_and_resampled(tmp_path):
    root = tmp_path / "clips"
    stereo = tone(4000, 2, 1)
    write_wav(root / "x" / "b.wav", stereo, 16000)
    out = tmp_path / "out"
    result = write_here(
        "--script", "audio", "--input", root, "--decode", "--rate", "8000", "--output", out,
        "--quiet",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (row,) = list(recordmill.open(str(out)))
    assert row["sample_rate"] == 8000 and len(row["samples"]) == 2000
    expected = stereo[::2, 0].astype(np.float32) / 32768  # every other frame at half the rate
    assert np.allclose(row["samples"], expected, atol=1e-6)


def test_what_is_not_audio_is_bad_input(tmp_path):
    root = tmp_path / "clips"
    write_wav(root / "x" / "ok.wav", tone(100, 1, 0), 8000)
    (root / "x" / "bad.wav").write_bytes(b"RIFF not really")
    (root / "x" / "bad.flac").write_bytes(b"OggS not a flac")
    common = ["--script", "audio", "--input", root, "--quiet"]
    failed = write_here(*common, "--output", tmp_path / "f")
    assert failed.returncode == 1
    assert "bad.flac: not a FLAC file (starts with b'OggS not" in failed.stderr
    skipped = write_here(*common, "--output", tmp_path / "s", "--on-bad-input", "skip")
    assert skipped.returncode == 0, skipped.stderr
    assert read_dataset(tmp_path / "s")["file_name"].to_pylist() == ["x/ok.wav"]
    reasons = sorted(r["reason"] for r in recordmill.read_rejects(tmp_path / "s"))
    assert "not a WAV file this reads" in reasons[1] and "not a FLAC file" in reasons[0]
    lone = write_here(*common[:-1], "--rate", "8000", "--output", tmp_path / "r", "--quiet")
    assert lone.returncode != 0 and "--rate resamples decoded samples: give --decode too" in (
        lone.stderr
    )
    (tmp_path / "none").mkdir()
    empty = write_here("--script", "audio", "--input", tmp_path / "none", "--output",
                       tmp_path / "e", "--quiet")  # fmt: skip
    assert empty.returncode != 0 and "holds no .wav or .flac file and no folder" in empty.stderr
    given_file = write_here("--script", "audio", "--input", root / "x" / "ok.wav", "--output",
                            tmp_path / "g", "--quiet")  # fmt: skip
    assert given_file.returncode != 0 and "ok.wav is not a folder" in given_file.stderr


def test_8_and_24_bit_wav_and_flac_decoding_without_soundfile(tmp_path):
    import importlib.util

    root = tmp_path / "clips" / "x"
    root.mkdir(parents=True)
    for width, name in ((1, "u8.wav"), (3, "s24.wav")):
        with wave.open(str(root / name), "wb") as w:
            w.setnchannels(1), w.setsampwidth(width), w.setframerate(8000)
            w.writeframes(bytes([0x80] * width * 4) if width == 1 else b"\x00\x00\x40" * 4)
    out = tmp_path / "out"
    result = write_here("--script", "audio", "--input", tmp_path / "clips", "--decode",
                        "--output", out, "--quiet")  # fmt: skip
    assert result.returncode == 0, result.stderr
    samples = {r["file_name"]: list(r["samples"]) for r in recordmill.open(str(out))}
    assert samples == {"x/s24.wav": [0.5] * 4, "x/u8.wav": [0.0] * 4}
    if importlib.util.find_spec("soundfile") is None:
        (root / "d.flac").write_bytes(flac_header(8000, 1, 4))
        flac = write_here("--script", "audio", "--input", tmp_path / "clips", "--decode",
                          "--output", tmp_path / "f", "--quiet")  # fmt: skip
        assert "decoding FLAC needs soundfile: pip install soundfile" in flac.stderr


def test_hidden_folders_are_no_class_and_a_rate_must_be_positive(tmp_path):
    root = tmp_path / "clips"
    write_wav(root / ".ipynb_checkpoints" / "a.wav", tone(100, 1, 0), 8000)
    write_wav(root / "dog" / "a.wav", tone(100, 1, 0), 8000)
    out = tmp_path / "out"
    assert (
        write_here("--script", "audio", "--input", root, "--output", out, "--quiet").returncode == 0
    )
    assert read_dataset(out)["class"].to_pylist() == ["dog"]
    zero = write_here("--script", "audio", "--input", root, "--decode", "--rate", "0",
                      "--output", tmp_path / "z", "--quiet")  # fmt: skip
    assert (
        zero.returncode != 0 and "--rate must be 1 or more samples a second, got 0" in zero.stderr
    )
