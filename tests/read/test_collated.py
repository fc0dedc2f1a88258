"""Batches default_collate made, cut and joined along their rows: the same as collating the rows
of each piece, for every layout default_collate knows."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch==2.13.0)")
from torch.utils.data import default_collate  # noqa: E402

from recordmill.read.dataset import gathered  # noqa: E402
from recordmill.read.torch import collated  # noqa: E402

Pair = namedtuple("Pair", "a b")


def samples(kind: str, n: int = 7) -> list:
    made = {
        "tensor": lambda i: torch.full((2, 3), float(i)),
        "numpy": lambda i: np.full(4, i, np.int16),
        "number": lambda i: i * 1.5,
        "string": lambda i: f"row {i}",
        "dict": lambda i: {"x": torch.tensor([i]), "name": f"n{i}", "nested": {"y": i}},
        "tuple": lambda i: (torch.tensor(i), f"s{i}", [i, i + 1]),
        "namedtuple": lambda i: Pair(np.float32(i), str(i)),
    }[kind]
    return [made(i) for i in range(n)]


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return a == b


KINDS = ["tensor", "numpy", "number", "string", "dict", "tuple", "namedtuple"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_cut_and_a_join_are_the_collate_of_those_rows(kind):
    rows = samples(kind)
    batch, shape = collated.collate(rows)
    assert shape is not None and same(batch, default_collate(rows))
    for lo, hi in [(0, 3), (3, 7), (2, 2), (6, 7)]:
        if hi > lo:
            assert same(collated.cut(batch, shape, lo, hi), default_collate(rows[lo:hi]))
    parts = [
        collated.cut(batch, shape, 0, 2),
        collated.cut(batch, shape, 2, 5),
        collated.cut(batch, shape, 5, 7),
    ]
    assert same(collated.join(parts, shape), batch)
    assert same(collated.join(parts[:2], shape), collated.cut(batch, shape, 0, 5))  # two
    assert same(collated.join(parts[1:2], shape), parts[1])  # one: as it is
    one, one_shape = collated.collate(rows[:1])  # a batch of one row
    assert one_shape == shape and same(one, default_collate(rows[:1]))


def test_samples_default_collate_does_not_know_cross_uncollated():
    rows = [b"bytes", b"more"]
    assert collated.collate(rows) == (rows, None)
    assert collated.layout({"x": object()}) is None


# --- batches collated a column at a time (recordmill's DataLoader over a MapDataset) ------------

TYPES_PLUGIN = """
    import numpy as np

    def task_number():
        return 2

    def schema():
        return {
            "i8": "int8", "u8": "uint8", "i32": "int32", "i64": "int64", "u64": "uint64",
            "f16": "float16", "f32": "float32", "f64": "float64", "ok": "bool",
            "name": "string", "maybe": {"type": "string", "nullable": True}, "raw": "bytes",
            "img": {"type": "uint8", "shape": [4, 3], "layout": "tensor"},
            "vec": {"type": "float32", "shape": [3], "layout": "list"},
            "var": {"type": "int16", "shape": [-1]},
        }

    def dict_data(task_id):
        for i in range(20):
            n = task_id * 20 + i
            yield {
                "i8": -n, "u8": n, "i32": n * 1000, "i64": -(2**40) - n, "u64": n,
                "f16": n / 4, "f32": n / 3, "f64": n / 7, "ok": n % 3 == 0,
                "name": f"row {n}", "maybe": None if n % 4 else "x", "raw": bytes([n]) * 3,
                "img": np.full((4, 3), n, np.uint8), "vec": np.arange(3, dtype=np.float32) + n,
                "var": np.array([n, -n], np.int16),
            }
"""


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    from tests.conftest import written

    root = tmp_path_factory.mktemp("collated")
    return written(root, TYPES_PLUGIN, partitions=2, row_group_size=8)


def test_a_batch_collated_by_columns_is_the_default_collate_of_its_rows(typed):
    import recordmill

    ds = recordmill.open(typed)
    rows = [12, 0, 7, 39, 31, 12, 25]  # the first with a string in "maybe": torch needs it
    given = [{k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in row.items()}
             for row in ds.rows(rows)]  # fmt: skip
    fast = collated.as_tensors(collated.from_columns(ds.schema, gathered(ds, rows)))
    slow = default_collate(given)
    assert fast.keys() == slow.keys()
    for name in fast:
        if isinstance(slow[name], torch.Tensor):  # the same values, dtype and shape
            assert fast[name].dtype == slow[name].dtype, name
            assert torch.equal(fast[name], slow[name]), name
        else:
            assert fast[name] == slow[name], name
    assert fast["i8"].dtype == torch.int64 and fast["f32"].dtype == torch.float32
    assert fast["img"].shape == (7, 4, 3) and fast["maybe"][:3] == ["x", "x", None]


def test_a_gathered_column_becomes_a_tensor_without_a_copy_and_mapped_bytes_are_copied(
    typed, monkeypatch
):
    import pyarrow as pa

    import recordmill

    monkeypatch.setattr(collated, "SMALL_BYTES", 0)  # a tensor however small
    batch = recordmill.open(typed).select(["img"]).gather([3, 1, 2])
    img = collated.from_columns(batch.schema, batch.columns)["img"]
    # The gather's own bytes: the tensor is a view of them (the copy saved).
    assert img.data_ptr() == batch.column("img").buffers()[1].address
    # Bytes the batch does not own (a memory-mapped file) are copied, never written through.
    path = typed.parent / "mapped.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, batch.schema) as w:
        w.write_batch(batch)
    mapped = pa.ipc.open_file(pa.memory_map(str(path))).get_batch(0)
    img = collated.from_columns(mapped.schema, mapped.columns)["img"]
    assert img.data_ptr() != mapped.column("img").buffers()[1].address
    img += 1
    assert mapped.column("img").buffers()[1].to_pybytes()[0] == 3


def test_recordmills_loader_hands_out_the_batches_torchs_would(typed):
    import recordmill.torch as rtorch
    from torch.utils.data import DataLoader

    def loader(kind, **kw):
        data = rtorch.MapDataset(typed, columns=["i64", "f16", "img", "name", "var"])
        if kind == "recordmill":
            return rtorch.DataLoader(data, batch_size=6, shuffle=True, seed=5, **kw)
        sampler = rtorch.Sampler(data, shuffle=True, seed=5)
        return DataLoader(data, batch_size=6, sampler=sampler, **kw)

    for workers in (0, 2):
        ours = list(loader("recordmill", num_workers=workers))
        theirs = list(loader("torch", num_workers=workers))
        assert len(ours) == len(theirs) == 7
        assert all(same(a, b) for a, b in zip(ours, theirs, strict=True))
        assert ours[0]["img"].dtype == torch.uint8 and ours[0]["f16"].dtype == torch.float16


def test_recordmills_loader_collates_columns_without_rows_unless_it_decodes(typed, monkeypatch):
    """A batch collated by default is made a column at a time, no row dict made (``rows`` never
    read); with ``decode`` each row is decoded first, as torch's loader gets it."""
    import recordmill.torch as rtorch
    from torch.utils.data import DataLoader

    from recordmill.read.dataset import Dataset

    rows_read = []
    rows = Dataset.rows
    monkeypatch.setattr(Dataset, "rows", lambda ds, ids: rows_read.append(ids) or rows(ds, ids))
    plain = next(iter(rtorch.DataLoader(rtorch.MapDataset(typed, columns=["i64"]), batch_size=4)))
    assert rows_read == []
    decoded = rtorch.MapDataset(typed, columns=["i64"], decode={"i64": lambda v: v * 10})
    ours = next(iter(rtorch.DataLoader(decoded, batch_size=4)))
    theirs = next(iter(DataLoader(decoded, batch_size=4)))
    assert torch.equal(ours["i64"], plain["i64"] * 10) and torch.equal(ours["i64"], theirs["i64"])
    assert len(rows_read) == 2  # a batch each, ours and torch's


def test_loaders_of_one_dataset_each_read_it_their_own_way(typed):
    import recordmill.torch as rtorch
    from torch.utils.data import DataLoader

    data = rtorch.MapDataset(typed, columns=["i64", "img"])
    ours = next(iter(rtorch.DataLoader(data, batch_size=4)))
    theirs = next(iter(DataLoader(data, batch_size=4)))  # torch's own, after recordmill's
    assert torch.equal(ours["img"], theirs["img"]) and torch.equal(ours["i64"], theirs["i64"])
    rows = next(iter(rtorch.DataLoader(data, batch_size=4, collate_fn=list)))
    assert len(rows) == 4 and isinstance(rows[0], dict)  # a collate of its own: the rows
    assert torch.equal(next(iter(rtorch.DataLoader(data, batch_size=4)))["img"], ours["img"])


def test_small_tensors_cross_from_workers_as_bytes_and_arrive_as_torchs(typed):
    """A small tensor of a worker's batch crosses in the batch's pickle, not through shared
    memory (which costs a socket round trip per tensor): what arrives is the tensor torch's
    loader gives, made in the loader's process (not shared)."""
    import recordmill.torch as rtorch
    from torch.utils.data import DataLoader

    columns = ["i64", "f16", "img", "name"]
    for transform in (None, lambda row: (row["i64"], row["img"], row["name"])):
        data = rtorch.MapDataset(typed, columns=columns, transform=transform)
        ours = list(rtorch.DataLoader(data, batch_size=6, shuffle=True, seed=5, num_workers=2))
        sampler = rtorch.Sampler(data, shuffle=True, seed=5)
        theirs = list(DataLoader(data, batch_size=6, sampler=sampler, num_workers=2))
        assert len(ours) == len(theirs) == 7
        for a, b in zip(ours, theirs, strict=True):
            assert same(a, b)
            tensors = [v for v in (a.values() if transform is None else a) if torch.is_tensor(v)]
            assert len(tensors) == (3 if transform is None else 2)
            assert not any(t.is_shared() for t in tensors)  # made here, not mapped from a worker
            theirs_shared = b.values() if transform is None else b
            assert all(t.is_shared() for t in theirs_shared if torch.is_tensor(t))


def test_a_worker_collate_is_the_default_collate_once_its_arrays_are_tensors(monkeypatch):
    samples = [{"x": np.full((2, 2), i, np.float32), "n": i, "s": str(i)} for i in range(4)]
    pairs = [(np.arange(3) + i, i) for i in range(4)]
    for batch in (samples, pairs):
        crossing = collated.worker_collate(batch)
        fields = crossing.values() if isinstance(crossing, dict) else crossing
        assert all(not torch.is_tensor(v) for v in fields)  # every field is small
        assert same(collated.as_tensors(crossing), default_collate(batch))
    odd = [{"b": torch.ones(2, dtype=torch.bfloat16), "g": torch.ones(2, requires_grad=True)}]
    crossing = collated.worker_collate(odd * 3)  # no numpy of these: they cross as tensors
    assert same(collated.as_tensors(crossing), default_collate(odd * 3))
    assert crossing["b"].dtype == torch.bfloat16 and torch.is_tensor(crossing["g"])
    monkeypatch.setattr(collated, "SMALL_BYTES", 40)  # 4 x 2 x 2 floats: 64 bytes, a tensor
    crossing = collated.worker_collate(samples)
    assert torch.is_tensor(crossing["x"]) and isinstance(crossing["n"], np.ndarray)


@pytest.mark.filterwarnings("ignore:.*pin_memory")
def test_batches_are_pinned_where_torchs_loader_pins_them(typed):
    import recordmill.torch as rtorch
    from torch.utils.data import DataLoader

    data = rtorch.MapDataset(typed, columns=["i64", "img"])
    ours = next(iter(rtorch.DataLoader(data, batch_size=4, num_workers=1, pin_memory=True)))
    theirs = next(iter(DataLoader(data, batch_size=4, num_workers=1, pin_memory=True)))
    assert same(ours, theirs)  # without an accelerator, neither pins (and neither fails)
    assert ours["i64"].is_pinned() == theirs["i64"].is_pinned() == torch.accelerator.is_available()


def test_a_loader_made_again_from_its_attributes_hands_out_the_same_batches(typed):
    """Lightning makes a loader again from its attributes (for DDP): its collate_fn is then one
    of ours, given back, which must read as none given."""
    import recordmill.torch as rtorch

    for transform in (None, lambda row: (row["i64"], row["img"])):
        data = rtorch.MapDataset(typed, columns=["i64", "img"], transform=transform)
        first = rtorch.DataLoader(data, batch_size=4, num_workers=1)
        again = rtorch.DataLoader(first.dataset, batch_size=4, num_workers=1,
                                  collate_fn=first.collate_fn)  # fmt: skip
        ours, theirs = list(first), list(again)
        assert len(ours) == 10 and all(same(a, b) for a, b in zip(ours, theirs, strict=True))
        fields = theirs[0].values() if transform is None else theirs[0]
        assert all(torch.is_tensor(v) for v in fields)


def test_a_tensor_subclass_crosses_as_itself():
    class Tagged(torch.Tensor):
        pass

    samples = [{"t": torch.ones(2).as_subclass(Tagged)} for _ in range(3)]
    assert type(collated.worker_collate(samples)["t"]) is Tagged


def test_columns_made_already_are_collated_as_they_are_beside_the_others():
    import pyarrow as pa

    schema = pa.schema([("data", pa.binary()), ("id", pa.int64()), ("name", pa.string())])
    columns = [[b"ab", b"c"], pa.array([7, 8]), pa.array(["x", "y"])]
    batch = collated.from_columns(schema, columns)
    assert batch["data"] == [b"ab", b"c"] and batch["name"] == ["x", "y"]
    assert np.asarray(batch["id"]).tolist() == [7, 8]
