"""Packed token blocks (``Dataset.token_blocks``, ``recordmill.torch.TokenBlocks``): every block
equal to the numpy concatenation of the documents in the epoch's order, dealt to workers and
ranks, resumed mid-epoch with other worker and rank counts, read through the disk cache."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import recordmill
from tests.conftest import each_format, make_plugin
from tests.read.dealt import dealt

torch = pytest.importorskip("torch")
import recordmill.torch as rt  # noqa: E402

# Documents of 0 to 300 tokens (some longer than a block, some empty), ids that fill uint16.
PLUGIN = """
    import numpy as np

    def task_number():
        return 3

    def schema():
        return {"tokens": {"type": "uint16", "shape": [-1]}, "length": {"type": "int32"},
                "doc": {"type": "int64"}}

    def dict_data(task_id):
        rng = np.random.default_rng(task_id)
        for i in range(70):
            n = 0 if i % 23 == 5 else int(rng.integers(1, 300))
            yield {"tokens": rng.integers(0, 65536, n).astype(np.uint16), "length": n,
                   "doc": task_id * 1000 + i}
"""


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    return each_format(tmp_path_factory.mktemp("tokens"), PLUGIN, partitions=2, row_group_size=16)


def reference(path, block_size, order=None, eos=None, targets=True):
    """The blocks computed with numpy: the documents in ``order``, end to end, cut."""
    ds = recordmill.open(path)
    tokens = [ds[i]["tokens"] for i in range(len(ds))]
    order = range(len(ds)) if order is None else order
    pieces = [np.append(tokens[i], [eos] * (eos is not None)) for i in order]
    stream = np.concatenate(pieces).astype(tokens[0].dtype)
    width = block_size + targets
    count = (len(stream) - width) // block_size + 1
    return np.stack([stream[j * block_size : j * block_size + width] for j in range(count)])


def as_rows(blocks) -> list[tuple[int, ...]]:
    return [tuple(np.asarray(b).tolist()) for batch in blocks for b in np.atleast_2d(batch)]


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
@pytest.mark.parametrize(("block_size", "eos", "targets"), [(7, None, True), (512, 9, True),
                                                           (64, None, False)])  # fmt: skip
def test_blocks_are_the_documents_end_to_end(docs, fmt, block_size, eos, targets):
    ds = recordmill.open(docs[fmt])
    got = list(ds.token_blocks(block_size, shuffle=False, eos=eos, targets=targets))
    assert np.array_equal(np.stack(got), reference(docs[fmt], block_size, None, eos, targets))
    assert got[0].dtype == np.uint16 and got[0].shape == (block_size + targets,)
    order = ds.shuffled(seed=3, epoch=2)
    assert sorted(order.tolist()) == list(range(len(ds)))
    shuffled = np.concatenate(list(ds.token_blocks(block_size, shuffle=True, seed=3, epoch=2,
                                                   eos=eos, targets=targets, batch_size=5)))  # fmt: skip
    assert np.array_equal(shuffled, reference(docs[fmt], block_size, order, eos, targets))


def test_a_tokenized_corpus_packs_as_numpy_concatenates_it(text_corpus, tmp_path):
    files, tok_path, tokenizer = text_corpus
    recordmill.write("text", tmp_path / "out", progress=False,
                     options={"input": [str(f) for f in files], "tokenizer": str(tok_path),
                              "eos": "<|endoftext|>", "task_bytes": 50_000})  # fmt: skip
    eos = tokenizer.token_to_id("<|endoftext|>")
    stream = np.concatenate([[*tokenizer.encode(f.read_text()).ids, eos] for f in files])
    blocks = np.stack(list(recordmill.open(tmp_path / "out").token_blocks(128, shuffle=False)))
    assert len(blocks) == (len(stream) - 129) // 128 + 1
    for j in (0, 1, len(blocks) // 2, len(blocks) - 1):
        assert blocks[j].tolist() == stream[j * 128 : j * 128 + 129].tolist()


def loader_blocks(path, workers, rank=None, world=None, seed=0, **kwargs):
    blocks = rt.TokenBlocks(path, 32, seed=seed, rank=rank, world_size=world)
    return rt.DataLoader(blocks, batch_size=4, num_workers=workers, **kwargs)


def stop_after(loader, batches: int) -> tuple[list[tuple[int, ...]], dict]:
    """The blocks of a loader's first ``batches`` batches, and its state after them."""
    seen = []
    for k, batch in enumerate(loader):
        seen += as_rows(batch)
        if k == batches - 1:
            return seen, loader.state_dict()
    raise AssertionError(f"the loader gave fewer than {batches} batches")


def expected_epoch(path, epoch, seed=0):
    order = recordmill.open(path).shuffled(seed, epoch)
    return as_rows(reference(path, 32, order))


@pytest.mark.parametrize("workers", [0, 2])
def test_the_loader_deals_every_block_once_to_workers_and_ranks(docs, workers):
    path = docs["parquet"]
    expected = expected_epoch(path, 0)
    assert as_rows(loader_blocks(path, workers)) == expected  # in order, whatever the workers
    ranks = [as_rows(loader_blocks(path, workers, rank=r, world=2)) for r in range(2)]
    for rank in range(2):  # an odd last block is dealt to both ranks, the first again
        assert ranks[rank] == [b for batch in dealt(expected, rank, 2, 4) for b in batch]


def test_blocks_without_a_batch_size_are_dealt_to_the_ranks_in_turn(docs):
    """Iterated as they are (torch's DataLoader: a block at a time), block k of the epoch goes
    to rank ``k % world_size``, the last rank padded with the first block."""
    path = docs["parquet"]
    expected = expected_epoch(path, 0)
    ranks = [as_rows(rt.TokenBlocks(path, 32, rank=r, world_size=2)) for r in range(2)]
    pad = expected[:1] * (len(expected) % 2)
    assert ranks == [expected[0::2], expected[1::2] + pad]


@pytest.mark.parametrize(("before", "after"), [(2, 0), (0, 3), (2, 1)])
def test_resume_mid_epoch_with_other_workers(docs, before, after):
    path = docs["arrow"]
    loader = loader_blocks(path, before)
    loader.set_epoch(1)
    seen, state = stop_after(loader, 5)
    resumed = loader_blocks(path, after)
    resumed.load_state_dict(state)
    rest = as_rows(resumed)
    assert seen + rest == expected_epoch(path, 1)
    assert resumed.position.epoch == 2  # the epoch ran out: the next one starts


def test_token_blocks_and_the_loader_shuffle_alike_by_default(docs):
    path = docs["arrow"]
    numpy_blocks = as_rows(recordmill.open(path).token_blocks(32, batch_size=4))
    assert numpy_blocks == as_rows(loader_blocks(path, 0)) == expected_epoch(path, 0)


def test_blocks_shuffled_within_windows_are_each_window_s_blocks_and_resume_exactly(docs):
    """shuffle_window=8: each run of 8 blocks of the stream comes in a seeded order of its
    own (a long document no longer fills whole batches), the same in numpy and the loader,
    resumed exactly; a state of another window is refused."""
    path = docs["parquet"]
    stream = expected_epoch(path, 1)
    numpy_blocks = as_rows(recordmill.open(path).token_blocks(32, epoch=1, shuffle_window=8))
    assert numpy_blocks != stream
    for lo in range(0, len(stream), 8):
        assert sorted(numpy_blocks[lo : lo + 8]) == sorted(stream[lo : lo + 8])

    def windowed(workers):
        blocks = rt.TokenBlocks(path, 32, shuffle_window=8)
        loader = rt.DataLoader(blocks, batch_size=4, num_workers=workers)
        loader.set_epoch(1)
        return loader

    seen, state = stop_after(windowed(2), 3)
    resumed = windowed(0)
    resumed.load_state_dict(state)
    assert seen + as_rows(resumed) == numpy_blocks
    other = loader_blocks(path, 0)
    with pytest.raises(ValueError, match="the saved state has shuffle_window=8, this one None"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="shuffle_window must be a whole number of blocks"):
        rt.TokenBlocks(path, 32, shuffle_window=-1)


def test_resume_on_another_number_of_ranks(docs):
    path = docs["parquet"]
    seen, states = [], []
    for rank in range(2):
        head, state = stop_after(loader_blocks(path, 0, rank=rank, world=2), 3)
        seen += head
        states.append(state)
    assert states[0]["position"] == states[1]["position"] == 2 * 3 * 4
    resumed = loader_blocks(path, 2, rank=0, world=1)
    resumed.load_state_dict(states[0])
    assert sorted(seen + as_rows(resumed)) == sorted(expected_epoch(path, 0))


def test_persistent_workers_follow_the_epochs(docs):
    path = docs["arrow"]
    loader = loader_blocks(path, 2, persistent_workers=True)
    epochs = [as_rows(loader) for _ in range(2)]
    assert epochs == [expected_epoch(path, 0), expected_epoch(path, 1)]
    assert epochs[0] != epochs[1]


def test_through_the_disk_cache_from_object_storage(s3, docs, tmp_path):
    plugin = make_plugin(tmp_path / "plugin", PLUGIN)
    uri = s3("tokens/ds")
    recordmill.write(plugin, uri, partitions=2, row_group_size=16, progress=False)
    cache = tmp_path / "cache"
    local = np.stack(list(recordmill.open(docs["parquet"]).token_blocks(50, shuffle=False)))
    remote = recordmill.open(uri, cache_dir=cache)
    assert np.array_equal(np.stack(list(remote.token_blocks(50, shuffle=False))), local)
    assert remote.cache.fetched_parts == len(remote.cache.parts)
    blocks = rt.TokenBlocks(uri, 50, shuffle=False, cache_dir=cache)
    assert as_rows(rt.DataLoader(blocks, batch_size=8, num_workers=2)) == as_rows(local)


def test_refusals(docs, tmp_path):
    path = docs["arrow"]
    with pytest.raises(ValueError, match=r"no column 'ids'; expected a column of token ids"):
        recordmill.open(path).token_blocks(8, column="ids")
    with pytest.raises(ValueError, match=r"column 'doc' is int64; expected token ids"):
        recordmill.open(path).token_blocks(8, column="doc")
    with pytest.raises(ValueError, match=r"holds [\d,]+ tokens; expected at least a block"):
        recordmill.open(path).token_blocks(10**9)
    with pytest.raises(ValueError, match=r"block_size must be a whole number from 1, got 0"):
        recordmill.open(path).token_blocks(0)
    with pytest.raises(ValueError, match=r"eos must be a token id that uint16 holds, got 70000"):
        recordmill.open(path).token_blocks(8, eos=70_000)
    with pytest.raises(
        ValueError, match=r"row \d+: the length column 'doc' says \d+ tokens, but 'tokens' holds"
    ):
        list(recordmill.open(path).token_blocks(8, lengths="doc"))
    with pytest.raises(ValueError, match=r"lengths='nope': expected an integer column"):
        recordmill.open(path).token_blocks(8, lengths="nope")
    state = loader_blocks(path, 0).state_dict()
    other = rt.DataLoader(rt.TokenBlocks(path, 16), batch_size=4)
    with pytest.raises(
        ValueError,
        match=r"saved state has block_size=32, this one 16; resume with the block size, column, "
        r"eos and shuffle_window it was saved with",
    ):
        other.load_state_dict(state)
    rows = rt.DataLoader(rt.IterableDataset(path), batch_size=4).state_dict()
    with pytest.raises(ValueError) as refused:
        other.load_state_dict(rows)
    assert str(refused.value) == (
        "cannot resume: the saved state is not a TokenBlocks state (its 'tokens' is None; "
        "expected the dict of block size, column and eos it was saved with)"
    )


def test_token_blocks_pickled_hand_out_the_same_blocks(docs):
    """A DataLoader worker started by spawn or forkserver receives the dataset pickled: what it
    made of the stream is made again there."""
    blocks = rt.TokenBlocks(docs["arrow"], 32, seed=2)
    first = as_rows(blocks)
    assert (
        as_rows(pickle.loads(pickle.dumps(blocks))) == first == expected_epoch(docs["arrow"], 0, 2)
    )


def test_an_epochs_stream_is_made_once(docs, monkeypatch):
    from recordmill.read.tokens import TokenStream

    made = []
    epoch = TokenStream.epoch
    monkeypatch.setattr(
        TokenStream, "epoch", lambda self, order: made.append(1) or epoch(self, order)
    )
    loader = rt.DataLoader(rt.TokenBlocks(docs["arrow"], 32), batch_size=4)
    batches = len(loader)
    assert len(list(loader)) == batches > 1
    assert len(made) == 1  # epoch 0's, for its length and its every batch


def test_through_a_cache_of_a_few_parts_the_documents_follow_its_block_order(docs, tmp_path):
    """Shuffled through a disk cache that holds a few of the dataset's parts, the documents are
    laid end to end in the dataset's block order for that cache (so that a batch reads parts the
    cache holds), which the state names."""
    path = docs["parquet"]
    part = recordmill.open(path, cache_dir=tmp_path / "probe").cache.largest
    cache = {"cache_dir": tmp_path / "cache", "cache_limit": 2 * part}
    loader = rt.DataLoader(rt.TokenBlocks(path, 32, seed=3, **cache), batch_size=4)
    blocks = loader.state_dict()["blocks"]
    assert blocks == 2
    order = recordmill.open(path, **cache).shuffled(3, 0, blocks)
    assert as_rows(loader) == as_rows(reference(path, 32, order))
    assert as_rows(reference(path, 32, order)) != expected_epoch(path, 0, 3)  # another order
    # Resumed through a cache of another size (whose own order is another), it goes on in the
    # order it was saved in.
    seen, state = stop_after(
        rt.DataLoader(rt.TokenBlocks(path, 32, seed=3, **cache), batch_size=4), 3
    )
    bigger = {"cache_dir": tmp_path / "bigger", "cache_limit": 4 * part}
    resumed = rt.DataLoader(rt.TokenBlocks(path, 32, seed=3, **bigger), batch_size=4)
    resumed.load_state_dict(state)
    assert seen + as_rows(resumed) == as_rows(reference(path, 32, order))


def test_token_columns_come_back_as_numpy_arrays(docs):
    ds = recordmill.open(docs["parquet"])
    assert isinstance(ds[0]["tokens"], np.ndarray) and ds[0]["tokens"].dtype == np.uint16
    batch = next(ds.iter_batches(8))
    assert all(isinstance(t, np.ndarray) and t.dtype == np.uint16 for t in batch["tokens"])


def test_a_mixture_of_token_datasets(docs, tmp_path):
    other = make_plugin(tmp_path / "plugin", PLUGIN.replace("range(70)", "range(30)"))
    recordmill.write(other, tmp_path / "small", row_group_size=16, progress=False)
    mixture = recordmill.mix([docs["arrow"], tmp_path / "small"], weights=[0.7, 0.3], seed=5)
    sources = [recordmill.open(p) for p in (docs["arrow"], tmp_path / "small")]
    tokens = [ds[i]["tokens"] for ds in sources for i in range(len(ds))]
    stream = np.concatenate([tokens[i] for i in mixture.order(0)])
    expected = [
        tuple(stream[j * 32 : j * 32 + 33].tolist()) for j in range((len(stream) - 33) // 32 + 1)
    ]
    loader = rt.DataLoader(rt.TokenBlocks(mixture, 32), batch_size=4, num_workers=2)
    seen, state = stop_after(loader, 4)
    resumed = rt.DataLoader(rt.TokenBlocks(mixture, 32), batch_size=4, num_workers=1)
    resumed.load_state_dict(state)
    assert seen + as_rows(resumed) == expected


def test_a_token_column_with_null_ids_is_refused(tmp_path):
    plugin = make_plugin(tmp_path / "plugin", """
        import pyarrow as pa

        def task_number():
            return 1

        def dict_data(task_id):
            tokens = pa.array([[1, 2, None, 4], [5, 6]], pa.list_(pa.uint16()))
            yield pa.RecordBatch.from_arrays([tokens], names=["tokens"])
    """)  # fmt: skip
    recordmill.write(plugin, tmp_path / "out", progress=False)
    with pytest.raises(ValueError) as refused:
        list(recordmill.open(tmp_path / "out").token_blocks(2))
    assert str(refused.value) == "the token column holds null tokens; expected token ids"


SOURCE = """
    import numpy as np

    def task_number():
        return 2

    def schema():
        return {"tokens": {"type": "uint16", "shape": [-1]}}

    def dict_data(task_id):
        for i in range(100):
            yield {"tokens": np.full(5 + i % 11, BASE + task_id * 100 + i, dtype=np.uint16)}
"""


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    """Two sources of documents whose tokens are each document's own number, low and high."""
    root, made = tmp_path_factory.mktemp("sources"), []
    for name, base in (("low", 1000), ("high", 30000)):
        plugin = make_plugin(root / f"{name}-p", SOURCE.replace("BASE", str(base)))
        recordmill.write(plugin, root / name, progress=False)
        made.append(root / name)
    return made


def mixed_blocks(paths, weights, batch_size: int) -> rt.DataLoader:
    """A loader of blocks of 4 tokens of ``paths`` mixed by ``weights`` (seed 3)."""
    mixture = recordmill.mix(paths, weights=weights, seed=3)
    return rt.DataLoader(rt.TokenBlocks(mixture, 4), batch_size=batch_size)


def test_new_weights_given_to_token_blocks_at_a_resume_apply_from_there(paths):
    """A state saved late in an epoch (more blocks than the epoch has documents) resumed with
    other weights: the rest of the epoch follows them, where they once applied only after as
    many documents as blocks were served (here: never)."""

    def loader(weights):
        return mixed_blocks(paths, weights, batch_size=8)

    whole = as_rows(loader([0.9, 0.1]))
    seen, state = stop_after(loader([0.9, 0.1]), 60)  # 480 blocks: more than the 400 documents
    assert seen == whole[:480]
    same = loader([0.9, 0.1])
    same.load_state_dict(state)
    assert as_rows(same) == whole[480:]  # the same weights: the unbroken epoch
    other = loader([0.1, 0.9])
    other.load_state_dict(state)
    rest = as_rows(other)
    assert rest[0][0] == whole[480][0]  # its first token was read already (as a target)
    high = sum(token >= 30000 for block in rest for token in block[1:])
    assert high / sum(len(block) - 1 for block in rest) > 0.7  # 0.9 of the documents drawn
    # Saved before the epoch's first block: the whole epoch follows the new weights.
    start = loader([0.1, 0.9])
    start.load_state_dict(loader([0.9, 0.1]).state_dict())
    assert as_rows(start) == as_rows(loader([0.1, 0.9]))


def test_new_weights_apply_from_the_first_document_not_read_before_the_resume(paths):
    """Resumed at block ``at`` (odd ones too) with other weights: the documents that start in
    the tokens read before it (its blocks and the next token, a target) are kept as drawn, and
    the mixture's new weights draw every document from the next one on."""

    def loader(weights):
        return mixed_blocks(paths, weights, batch_size=3)

    def runs(tokens):  # each document's tokens are its own value: its value, where it starts
        starts = np.flatnonzero(np.diff(tokens, prepend=-1))
        return tokens[starts], starts

    def stream(blocks):
        return np.concatenate([b[:4] for b in blocks] + [blocks[-1][4:]]).astype(np.int64)

    old, starts = runs(stream(np.array(as_rows(loader([0.9, 0.1])))))
    # at block 15, 21 and 27, and where a document starts right after the tokens read
    edge = next(int(x - 1) // 12 for x in starts if x > 12 and (x - 1) % 12 == 0)
    for stop in (5, 7, 9, edge):
        _, state = stop_after(loader([0.9, 0.1]), stop)
        at = 3 * stop
        kept = int(np.sum(starts < at * 4 + 1))  # documents started in the tokens read
        new = recordmill.mix(paths, weights=[0.1, 0.9], seed=3)
        new.resume(state["mixture"], 0, kept)
        drawn = [int(row["tokens"][0]) for row in new.rows(new.order(0))]
        assert drawn[:kept] == old[:kept].tolist()
        resumed = loader([0.1, 0.9])
        resumed.load_state_dict(state)
        rest, _ = runs(stream(np.array(as_rows(resumed))))
        first = int(np.sum(starts <= at * 4)) - 1  # the document block ``at`` starts in
        assert rest.tolist() == drawn[first : first + len(rest)]


TWO_COLUMNS = """
    import numpy as np

    def task_number():
        return 1

    def schema():
        ids = {"type": "uint16", "shape": [-1]}
        return {"tokens": ids, "other": ids}

    def dict_data(task_id):
        for i in range(40):
            yield {"tokens": np.arange(i, i + 30, dtype=np.uint16),
                   "other": np.arange(i, i + 30, dtype=np.uint16) * 2}
"""


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"block_size": 16}, "block_size"),
        ({"column": "other"}, "column"),
        ({"eos": 0}, "eos"),
        ({"targets": False}, "targets"),
        ({"shuffle_window": 4}, "shuffle_window"),
        ({"shuffle_window": 2}, "shuffle_window"),
    ],
)
def test_every_setting_a_token_state_names_refuses_a_resume_alone(tmp_path, change, key):
    """Each field of a TokenBlocks state, changed alone, refuses the resume: a state that dropped
    any one of them would resume on another stream (other tokens at the same block number)."""
    path = tmp_path / "two"
    recordmill.write(make_plugin(tmp_path / "p", TWO_COLUMNS), path, progress=False)
    settings = {"block_size": 8, "column": "tokens", "eos": None, "targets": True}
    saved = rt.DataLoader(rt.TokenBlocks(path, **settings), batch_size=2)
    next(iter(saved))
    state = saved.state_dict()
    again = rt.DataLoader(rt.TokenBlocks(path, **settings), batch_size=2)
    again.load_state_dict(state)  # the same settings resume
    other = rt.DataLoader(rt.TokenBlocks(path, **{**settings, **change}), batch_size=2)
    with pytest.raises(ValueError, match=f"cannot resume: the saved state has {key}="):
        other.load_state_dict(state)


def test_mapped_tokens_are_read_in_whole_batches_of_blocks_of_a_byte_budget(docs, monkeypatch):
    from recordmill.read import passes
    from recordmill.read.tokens import Epoch

    sizes = []
    read = Epoch.read
    monkeypatch.setattr(
        Epoch, "read", lambda self, rows: sizes.append(len(rows)) or read(self, rows)
    )
    blocks = rt.TokenBlocks(docs["arrow"], 32, shuffle=False)
    block_bytes = 33 * blocks.stream_of().dtype.itemsize  # a block and its next token
    monkeypatch.setattr(passes, "MAPPED_GATHER_BYTES", 10 * block_bytes)
    assert len(list(rt.DataLoader(blocks, batch_size=4))) == -(-len(blocks) // 4)
    assert max(sizes) == 8 and sum(sizes) == len(blocks)  # two batches of 4 within 10 blocks
    sizes.clear()
    blocks = rt.TokenBlocks(docs["arrow"], 32, shuffle=False)  # handed out one at a time,
    assert len(list(blocks)) == len(blocks)  # as torch's own DataLoader asks for them
    assert max(sizes) == 10 and sum(sizes) == len(blocks)
    sizes.clear()
    # Shuffled within a window, each block may read its whole document: a batch at a time
    windowed = rt.TokenBlocks(docs["arrow"], 32, shuffle_window=8)
    assert len(list(rt.DataLoader(windowed, batch_size=4))) == -(-len(windowed) // 4)
    assert max(sizes) == 4 and sum(sizes) == len(windowed)
