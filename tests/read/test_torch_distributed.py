"""recordmill.torch under a real torch.distributed process group (gloo), the rank left to
recordmill: each rank reads its share, whatever starts the DataLoader workers (fork, spawn,
forkserver); and under PyTorch Lightning's DDP with its default distributed sampler."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

import recordmill
from tests.read.dealt import dealt
from tests.read.test_torch import (  # noqa: F401 (dataset: a fixture)
    all_ids,
    dataset,
    formula_batches,
    permutation_ids,
)

pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch==2.13.0)")

# Each rank runs every loader in turn and writes the ids of each batch it was handed.
RANK = """
import datetime, json, sys

import torch
import torch.distributed as dist

import recordmill.torch as rtorch

if __name__ == "__main__":
    path, out, loaders, part = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
    # as torchrun does: rank and world size from the environment; a step that one rank waits for
    # in vain is an error after a minute, not a hang of half an hour
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    seen = {}
    for style, workers, context in loaders:
        if style == "cached":  # each rank with a cache of its own size: 4, 5... parts, the
            # last one's every part (a full permutation of its own): all take the smallest's
            rank, last = dist.get_rank(), dist.get_world_size() - 1
            parts = 4 + rank if rank < last else 1000
            cache = {"cache_dir": out + ".cache", "cache_limit": parts * part}
            data = rtorch.IterableDataset(path, columns=["id"], shuffle=True, seed=4, **cache)
            loader = rtorch.DataLoader(data, batch_size=7, num_workers=workers)
        elif style == "map":
            data = rtorch.MapDataset(path, columns=["id"])
            loader = rtorch.DataLoader(data, batch_size=7, shuffle=True, seed=4,
                                       num_workers=workers, multiprocessing_context=context)
        else:
            data = rtorch.IterableDataset(path, columns=["id"], shuffle=True, seed=4)
            loader = rtorch.DataLoader(data, batch_size=7, num_workers=workers,
                                       multiprocessing_context=context)
        batches = []
        for batch in loader:  # each step all-reduced, as DDP's backward is: as many on each rank
            batches.append(batch["id"].tolist())
            dist.all_reduce(torch.ones(1))
        seen[f"{style} {workers} {context}"] = {"batches": batches, "state": loader.state_dict()}
    with open(out, "w") as f:
        json.dump(seen, f)
    dist.destroy_process_group()
"""

# Each kind of worker start once (a spawned or forkserver worker imports torch afresh: seconds),
# each style of dataset through a fresh interpreter (which the dataset reaches pickled).
LOADERS = [
    ("iterable", 0, None),
    ("iterable", 2, "fork"),
    ("iterable", 1, "spawn"),
    ("map", 0, None),
    ("map", 2, "fork"),
    ("cached", 0, None),
]
# Three ranks: the dealing over an odd world.
LOADERS_3 = [("iterable", 0, None), ("map", 1, "forkserver"), ("map", 0, None)]
LOADERS_3 += [("cached", 0, None)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script, world, args, tmp_path, extra_env=None, timeout=300):
    """``world`` ranks of ``script``, as torchrun starts them (environment variables only); a
    rank still running after ``timeout`` seconds (a hang: ranks waiting on each other) is a
    failure, and every rank is stopped."""
    import os

    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    env.update({"WORLD_SIZE": str(world), **(extra_env or {})})
    ranks = []
    for rank in range(world):
        out = tmp_path / f"rank{rank}.json"
        cmd = [sys.executable, str(script), *map(str, args(out))]
        ranks.append(subprocess.Popen(cmd, env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)}))
    try:
        codes = [p.wait(timeout=timeout) for p in ranks]
    finally:
        for p in ranks:
            p.kill()
    assert codes == [0] * world
    return [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(world)]


@pytest.mark.parametrize("world", [2, 3])
def test_each_rank_reads_its_share_under_a_real_process_group(dataset, tmp_path, world):  # noqa: F811
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    part = recordmill.open(dataset, cache_dir=tmp_path / "probe").cache.largest
    loaders = LOADERS if world == 2 else LOADERS_3
    args = [dataset, None, json.dumps(loaders), part]
    results = launch(script, world, lambda out: [*args[:1], out, *args[2:]], tmp_path)
    # the cached loaders: every rank in the block order of the smallest cache (4 parts), the
    # one whose cache holds every part too
    ds = recordmill.open(dataset)
    blocks = ds.take(ds.shuffled(4, 0, blocks=4)).column("id").to_pylist()
    for style, workers, context in loaders:
        key = f"{style} {workers} {context}"
        every = []
        for rank, seen in enumerate(results):
            expected = formula_batches(dataset, style, rank, world, 7, 4)
            if style == "cached":
                expected = dealt(blocks, rank, world, 7)
            assert seen[key]["batches"] == expected, f"rank {rank} of {world}, {key}"
            # a complete epoch: the state is at the start of the next one
            assert (seen[key]["state"]["epoch"], seen[key]["state"]["position"]) == (1, 0)
            every += [i for batch in expected for i in batch]
        # every row once over the ranks, and the order's first again to give each as many
        assert set(every) == set(all_ids(dataset)) and len(every) == len(all_ids(dataset)) + (
            -len(all_ids(dataset)) % world
        ), key


LIGHTNING = """
import faulthandler, json, signal, sys

import torch

import recordmill.torch as rtorch


def say_where_if_stuck(*_):
    # This process's stacks on stderr, should it still run after 200 s (the test waits 300 s).
    # (An alarm, which a fork does not inherit: dump_traceback_later's thread would hang a
    # forked worker that calls it again.)
    faulthandler.register(signal.SIGALRM, all_threads=True)
    signal.alarm(200)


def loader(path, style):
    # No workers: what is Lightning's here is the sampler it swaps in and the loader it makes
    # again around it; workers under DDP ranks are test_each_rank_reads_its_share_...'s (each
    # forkserver worker imported this script and torch again: seconds a fit)
    if style == "iterable":  # dealt by recordmill, as many batches to each rank
        data = rtorch.IterableDataset(path, columns=["id"], shuffle=True, seed=4)
        return rtorch.DataLoader(data, batch_size=7)
    data = rtorch.MapDataset(path, columns=["id"])
    return rtorch.DataLoader(data, batch_size=7, shuffle=True, seed=4)


def fit(path, style):
    import pytorch_lightning as pl

    class Model(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            self.seen = []

        def train_dataloader(self):
            return loader(path, style)

        def training_step(self, batch, index):
            self.seen.append(batch["id"].tolist())
            return self.layer(batch["id"].float()[:, None]).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.0)

    model = Model()
    trainer = pl.Trainer(strategy="ddp", devices=2, accelerator="cpu", max_epochs=1,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(model)  # use_distributed_sampler=True, Lightning's default
    return model.seen, trainer.global_rank


if __name__ == "__main__":
    say_where_if_stuck()
    path, out = sys.argv[1:]
    seen = {}
    for style in ("map", "iterable"):
        seen[style], rank = fit(path, style)
    with open(out.replace("RANK", str(rank)), "w") as f:
        json.dump(seen, f)
"""


def test_lightning_ddp_with_its_default_sampler_reads_each_row_once(dataset, tmp_path):  # noqa: F811
    """Lightning puts a DistributedSampler in: ours takes its place, with its rank and its way
    of giving every rank as many rows (it pads with the order's first rows, so that DDP's steps
    stay in step): 153 rows on 2 ranks are 77 each, one row twice. An IterableDataset, which
    Lightning leaves alone, is dealt as many batches to each rank (it crashed at the epoch's
    end when one rank had a step more)."""
    pytest.importorskip("pytorch_lightning", reason="pip install pytorch-lightning")
    script = tmp_path / "fit.py"
    script.write_text(LIGHTNING)
    out = tmp_path / "seenRANK.json"
    # Lightning's DDP starts the other rank itself, running this script again
    subprocess.run([sys.executable, script, dataset, out], check=True, timeout=300)
    order = permutation_ids(dataset, 4)
    padded = order + order[: -len(order) % 2]
    every = {"map": [], "iterable": []}
    for rank in range(2):
        seen = json.loads((tmp_path / f"seen{rank}.json").read_text())
        mine = padded[rank::2]
        assert seen["map"] == [mine[i : i + 7] for i in range(0, len(mine), 7)], f"rank {rank}"
        assert seen["iterable"] == dealt(order, rank, 2, 7), f"rank {rank}"  # and as many steps
        for style, batches in seen.items():
            every[style] += [i for batch in batches for i in batch]
    for style, rows in every.items():
        assert sorted(set(rows)) == sorted(all_ids(dataset)) and len(rows) == len(padded), style
