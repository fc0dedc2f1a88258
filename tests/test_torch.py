"""recordmill.torch with a real DataLoader: workers and simulated ranks read every row once."""

from __future__ import annotations

import numpy as np
import pytest

import recordmill
from tests.conftest import make_plugin

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch==2.13.0)")
from torch.utils.data import DataLoader  # noqa: E402

import recordmill.torch as rtorch  # noqa: E402

PLUGIN = """
    import numpy as np

    def task_number():
        return 3

    def schema():
        return {
            "id": {"type": "int64"},
            "x": {"type": "float32", "shape": [4]},
            "img": {"type": "uint8", "shape": [6, 5]},  # a tensor: raw bytes on disk
        }

    def dict_data(task_id):
        for i in range(50 + task_id):
            n = task_id * 1000 + i
            yield {"id": n, "x": np.full(4, n, dtype=np.float32), "img": np.full((6, 5), n % 251)}
"""


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("torch")
    recordmill.write(
        make_plugin(root / "p", PLUGIN),
        root / "ds",
        partitions=3,
        row_group_size=10,
        progress=False,
    )
    return root / "ds"


def all_ids(dataset):
    return recordmill.open(str(dataset)).to_arrow()["id"].to_pylist()


def test_map_style_with_two_workers(dataset):
    data = rtorch.MapDataset(dataset, transform=lambda row: (torch.from_numpy(row["x"]), row["id"]))
    assert len(data) == 153
    loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=2)
    seen = []
    for x, ids in loader:
        assert x.shape[1:] == (4,) and x.dtype == torch.float32
        assert torch.equal(x[:, 0], ids.to(torch.float32))
        seen += ids.tolist()
    assert sorted(seen) == sorted(all_ids(dataset))


@pytest.mark.parametrize("shuffle", [False, True])
def test_iterable_across_workers_and_two_ranks(dataset, shuffle):
    seen = []
    for rank in range(2):
        data = rtorch.IterableDataset(
            dataset,
            columns=["id"],
            shuffle=shuffle,
            seed=3,
            rank=rank,
            world_size=2,
            read_batch_size=8,
        )
        loader = DataLoader(data, batch_size=10, num_workers=2)
        rank_ids = [i for batch in loader for i in batch["id"].tolist()]
        assert abs(len(rank_ids) - 153 / 2) <= 2
        seen += rank_ids
    assert len(seen) == len(set(seen)) == 153
    assert sorted(seen) == sorted(all_ids(dataset))
    if not shuffle:
        assert seen[:5] == sorted(all_ids(dataset))[:5]  # rank 0, worker 0 starts at the first row


def test_shuffle_changes_with_the_epoch_and_repeats_with_the_seed(dataset):
    data = rtorch.IterableDataset(dataset, columns=["id"], shuffle=True, seed=1)
    first = [row["id"] for row in data]
    again = [row["id"] for row in data]
    data.set_epoch(1)
    other = [row["id"] for row in data]
    assert first == again and first != other and sorted(first) == sorted(other)
    assert first != sorted(first)


def test_decode_and_transform_reach_the_rows(dataset):
    data = rtorch.MapDataset(
        dataset, columns=["x"], decode={"x": lambda v: v * 2}, transform=lambda r: r["x"].sum()
    )
    assert data[0] == pytest.approx(0.0) and data[60] == pytest.approx(
        np.float32(1010 * 2 * 4)
    )  # task 1's row 10


@pytest.mark.parametrize("style", ["map", "iterable"])
def test_tensor_fields_arrive_as_batched_tensors(dataset, style):
    data = rtorch.MapDataset(dataset) if style == "map" else rtorch.IterableDataset(dataset)
    loader = DataLoader(data, batch_size=8, num_workers=2)
    seen = 0
    for batch in loader:
        assert batch["img"].dtype == torch.uint8 and batch["img"].shape[1:] == (6, 5)
        expected = (batch["id"] % 251).to(torch.uint8)
        assert torch.equal(batch["img"][:, 3, 4], expected) and torch.equal(
            batch["img"][:, 0, 0], expected
        )
        seen += len(batch["id"])
    assert seen == 153
