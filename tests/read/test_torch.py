"""recordmill.torch with a real DataLoader: workers and simulated ranks read every row once."""

from __future__ import annotations

import numpy as np
import pytest

import recordmill
from tests.conftest import make_plugin

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch==2.13.0)")
import recordmill.torch as rtorch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

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
            batch_size=10,
            read_batch_size=8,
        )
        loader = DataLoader(data, batch_size=10, num_workers=2)
        rank_ids = [i for batch in loader for i in batch["id"].tolist()]
        assert abs(len(rank_ids) - 153 / 2) <= 10  # whole batches of 10 are dealt to ranks
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


def test_batches_collate_without_warnings_and_keep_their_dtype(dataset):
    import warnings

    for data in (rtorch.MapDataset(dataset), rtorch.IterableDataset(dataset)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "The given NumPy array is not writable" would raise
            batch = next(iter(DataLoader(data, batch_size=4, num_workers=0)))
        assert batch["img"].dtype == torch.uint8 and batch["x"].dtype == torch.float32


def epoch_ids(loader):
    return [batch["id"].tolist() for batch in loader]


@pytest.mark.filterwarnings("ignore:This DataLoader will create 3 worker processes")
@pytest.mark.parametrize("style", ["map", "iterable"])
def test_the_order_of_batches_does_not_depend_on_the_workers(dataset, style):
    orders = []
    for workers in (0, 1, 3):
        if style == "map":
            data = rtorch.MapDataset(dataset, columns=["id"])
            loader = rtorch.DataLoader(
                data, batch_size=7, shuffle=True, seed=2, num_workers=workers
            )
        else:
            data = rtorch.IterableDataset(dataset, columns=["id"], shuffle=True, seed=2)
            loader = rtorch.DataLoader(data, batch_size=7, num_workers=workers)
        orders.append(epoch_ids(loader))
        assert loader.state_dict()["epoch"] == 1 and loader.state_dict()["position"] == 0
        orders.append(epoch_ids(loader))  # the next epoch: another permutation
    assert orders[0] == orders[2] == orders[4] and orders[1] == orders[3] == orders[5]
    first, second = ([i for b in batches for i in b] for batches in orders[:2])
    assert sorted(first) == sorted(second) == sorted(all_ids(dataset)) and first != second
    assert [len(b) for b in orders[0]] == [7] * 21 + [6]


RESUMING = """
import json, os, signal, sys

import recordmill.torch as rtorch

if __name__ == "__main__":
    path, style, workers, state_file, log_file, kill_after = sys.argv[1:]
    if style == "map":
        data = rtorch.MapDataset(path, columns=["id"])
        loader = rtorch.DataLoader(data, batch_size=7, shuffle=True, seed=5, num_workers=int(workers))
    else:
        data = rtorch.IterableDataset(path, columns=["id"], shuffle=True, seed=5)
        loader = rtorch.DataLoader(data, batch_size=7, num_workers=int(workers))
    if os.path.exists(state_file):
        with open(state_file) as f:
            loader.load_state_dict(json.load(f))
    with open(log_file, "a") as log:
        for k, batch in enumerate(loader, 1):
            log.write(json.dumps(batch["id"].tolist()) + "\\n")
            log.flush()
            with open(state_file + ".tmp", "w") as f:
                json.dump(loader.state_dict(), f)
            os.replace(state_file + ".tmp", state_file)  # a checkpoint after each step
            if k == int(kill_after):
                os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("style", ["map", "iterable"])
def test_a_killed_job_resumes_at_the_next_batch_with_other_workers(dataset, style, tmp_path):
    import json
    import signal
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text(RESUMING)

    def run(workers, state, log, kill_after):
        args = [sys.executable, script, dataset, style, str(workers), state, log, str(kill_after)]
        return subprocess.run(args, timeout=120).returncode

    assert run(2, tmp_path / "full.json", tmp_path / "full.log", 0) == 0
    assert run(2, tmp_path / "cut.json", tmp_path / "cut.log", 5) == -signal.SIGKILL
    assert run(3, tmp_path / "cut.json", tmp_path / "cut.log", 0) == 0
    full = [json.loads(line) for line in (tmp_path / "full.log").read_text().splitlines()]
    cut = [json.loads(line) for line in (tmp_path / "cut.log").read_text().splitlines()]
    assert len(full) == 22 and cut == full  # batches 1-5, killed, then 6-22 with 3 workers


def test_a_state_from_other_settings_is_refused(dataset):
    data = rtorch.IterableDataset(dataset, columns=["id"], shuffle=True, seed=5)
    loader = rtorch.DataLoader(data, batch_size=7)
    state = loader.state_dict()
    with pytest.raises(ValueError, match="seed=6"):
        loader.load_state_dict({**state, "seed": 6})
    with pytest.raises(ValueError, match="persistent_workers"):
        rtorch.DataLoader(data, batch_size=7, num_workers=1, persistent_workers=True)


def test_a_wrong_path_fails_when_the_dataset_is_made(tmp_path):
    for make in (rtorch.MapDataset, rtorch.IterableDataset):
        with pytest.raises(recordmill.OutputError, match="not a recordmill dataset"):
            make(tmp_path)


def test_a_given_sampler_is_kept_and_a_position_must_be_in_the_epoch(dataset):
    data = rtorch.MapDataset(dataset, columns=["id"])
    second_rank = rtorch.Sampler(data, shuffle=False, rank=1, world_size=2)
    loader = rtorch.DataLoader(data, batch_size=10, sampler=second_rank)
    ids = [i for batch in loader for i in batch["id"].tolist()]
    assert ids == all_ids(dataset)[1::2]
    with pytest.raises(ValueError, match="position -20"):
        loader.load_state_dict({**loader.state_dict(), "position": -20})
