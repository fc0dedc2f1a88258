"""The text plugin's tokenizer: a Hugging Face ``tokenizer.json`` (the ``tokenizers`` package) or
a function of the user's, ``module:function`` or ``path/to/file.py:function``, that takes a list
of texts and returns a list of token id sequences (its ``vocab_size`` attribute, or
``--vocab-size``, says how wide the ids are)."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from collections.abc import Callable, Sequence

import numpy as np

from recordmill.kit import ConfigError, InputError

UINT16_IDS = 1 << 16


class Encoder:
    """Texts to token ids: one flat array of the ids of every text (each followed by the
    end-of-document id when there is one) and each text's count of them."""

    def __init__(self, encode: Callable[[list[str]], Sequence], vocab: int | None, eos: int | None):
        self._encode = encode
        self.vocab = vocab
        self.eos = eos
        self.dtype = np.dtype(np.uint16 if vocab is not None and vocab <= UINT16_IDS else np.uint32)

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        encoded = [np.asarray(ids, dtype=np.int64) for ids in self._encode(texts)]
        if len(encoded) != len(texts):
            raise InputError(
                f"the tokenizer returned {len(encoded)} sequences for {len(texts)} texts; "
                "expected one a text"
            )
        if self.eos is not None:
            eos = np.array([self.eos], dtype=np.int64)
            encoded = [piece for ids in encoded for piece in (ids, eos)]
            lengths = np.array([len(ids) + 1 for ids in encoded[::2]], dtype=np.int64)
        else:
            lengths = np.array([len(ids) for ids in encoded], dtype=np.int64)
        flat = np.concatenate(encoded) if encoded else np.empty(0, np.int64)
        self._check(flat)
        return flat.astype(self.dtype), lengths

    def _check(self, flat: np.ndarray) -> None:
        if not flat.size:
            return
        low, high = int(flat.min()), int(flat.max())
        limit = self.vocab if self.vocab is not None else np.iinfo(self.dtype).max + 1
        if low < 0 or high >= limit:
            bad = low if low < 0 else high
            raise InputError(
                f"the tokenizer gave the id {bad}; expected ids from 0 to {limit - 1} "
                f"(a vocabulary of {limit:,}: --vocab-size, or the function's vocab_size)"
            )


@functools.lru_cache(maxsize=2)
def load(spec: str, eos: str | None, vocab_size: int | None) -> Encoder:
    """The encoder of ``--tokenizer`` (made once a process)."""
    if spec.endswith(".json") or os.path.isfile(spec):
        return _hugging_face(spec, eos)
    function = _function(spec)
    vocab = vocab_size or getattr(function, "vocab_size", None)
    return Encoder(function, vocab, _id(eos, None, spec) if eos is not None else None)


def _hugging_face(path: str, eos: str | None) -> Encoder:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ConfigError(
            f"--tokenizer {path} needs the tokenizers package: pip install 'recordmill[text]'"
        ) from None
    try:
        tokenizer = Tokenizer.from_file(path)
    except Exception as e:  # the Rust side raises plain Exceptions
        raise ConfigError(
            f"--tokenizer {path}: not a Hugging Face tokenizer.json ({e}); expected the file "
            "a tokenizer's save() writes"
        ) from None
    batch = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)

    def encode(texts: list[str]) -> list[list[int]]:
        return [e.ids for e in batch(texts)]

    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    return Encoder(encode, vocab, None if eos is None else _id(eos, tokenizer, path))


def _id(eos: str, tokenizer, spec: str) -> int:
    """The id of ``--eos``: a token of the tokenizer, else a number."""
    found = tokenizer.token_to_id(eos) if tokenizer is not None else None
    if found is not None:
        return found
    if eos.isdigit():
        return int(eos)
    expected = "a token of the tokenizer, or an id" if tokenizer is not None else "a token id"
    raise ConfigError(f"--eos {eos!r} is not a token of --tokenizer {spec}; expected {expected}")


def _function(spec: str) -> Callable[[list[str]], Sequence]:
    module_name, _, name = spec.rpartition(":")
    if not module_name or not name:
        raise ConfigError(
            f"--tokenizer {spec!r} is neither a file nor module:function; expected a "
            "tokenizer.json, or a function such as mypackage.tok:encode or tok.py:encode"
        )
    if module_name.endswith(".py") and not os.path.isfile(module_name):
        raise ConfigError(
            f"--tokenizer {spec}: there is no file {module_name}; expected a Python file that "
            f"defines {name}"
        )
    try:
        if module_name.endswith(".py"):
            loader = importlib.util.spec_from_file_location(
                "recordmill_text_tokenizer", module_name
            )
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"--tokenizer {spec}: cannot import {module_name} ({e})") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ConfigError(f"--tokenizer {spec}: {module_name} has no function {name!r}")
    return function
