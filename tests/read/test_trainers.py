"""recordmill's datasets and loader under the Hugging Face ``Trainer`` and ``accelerate``, each
run for real on two CPU ranks (gloo) as torchrun starts them: every row of an epoch once across
the ranks (padded only as the trainer documents), as many steps on each rank, and a resume from
a checkpoint in epoch 0 or 1 that gives exactly the batches an unbroken run gave."""

from __future__ import annotations

import collections
import json
import os

import numpy as np
import pytest

import recordmill
from tests.conftest import make_plugin
from tests.read.dealt import dealt
from tests.read.test_torch_distributed import launch

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch==2.13.0)")
pytest.importorskip("transformers", reason="pip install transformers accelerate")
import filelock  # noqa: E402 (comes with transformers)
import recordmill.torch as rt  # noqa: E402

IDS = """
    def task_number():
        return 4

    def schema():
        return {"id": {"type": "int64"}}

    def dict_data(task_id):
        for i in range(150 + 5 * (task_id == 3)):
            yield {"id": task_id * 1000 + i}
"""
# 605 rows: 18.9 steps of 16 rows on each of 2 ranks
ROWS = 605

TOKENS = """
    import numpy as np

    def task_number():
        return 3

    def schema():
        return {"tokens": {"type": "int32", "shape": [-1]}}

    def dict_data(task_id):
        for i in range(50):
            n = task_id * 50 + i
            yield {"tokens": np.arange(n * 100, n * 100 + 1 + n % 23, dtype=np.int32)}
"""

RANK = """
import faulthandler, json, os, signal, sys, warnings

import torch
from transformers import Trainer, TrainingArguments

import recordmill
import recordmill.torch as rt

warnings.filterwarnings("ignore")


class Model(torch.nn.Module):
    # Keeps what each training step was given.
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.seen = []

    def forward(self, id=None, input_ids=None):
        x = id if id is not None else input_ids
        assert type(x) is torch.Tensor, type(x)
        self.seen.append(x.tolist())
        return {"loss": (self.w * x.float()).sum() * 0}


def blocks(block):
    return {"input_ids": block}


def dataset(kind, paths):
    if kind == "iterable":
        return rt.IterableDataset(paths["ids"], columns=["id"], shuffle=True, seed=3)
    if kind == "map":
        return rt.MapDataset(paths["ids"], columns=["id"])
    if kind == "mix":
        sources = [paths["ids"], paths["more"]]
        mixture = recordmill.mix(sources, [0.7, 0.3], seed=5, columns=["id"], rows=700)
        return rt.IterableDataset(mixture)
    return rt.TokenBlocks(paths["tokens"], 3, transform=blocks)


def arguments(out, **more):
    return TrainingArguments(
        output_dir=out, per_device_train_batch_size=16, num_train_epochs=2, report_to=[],
        use_cpu=True, logging_strategy="no", ddp_backend="gloo", disable_tqdm=True, seed=42,
        ddp_timeout=60, **more,
    )


def trained(wiring, kind, workers, paths, out, resume=None):
    class Mixed(rt.TrainerMixin, Trainer):
        pass

    args = arguments(out, dataloader_num_workers=workers, save_strategy="steps", save_steps=12)
    model = Model()
    trainer = (Mixed if wiring == "mixin" else Trainer)
    trainer(model=model, args=args, train_dataset=dataset(kind, paths)).train(resume)
    return model.seen


def accelerated(wiring, kind, workers, dispatch, paths):
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration

    config = DataLoaderConfiguration(dispatch_batches=dispatch)
    accelerator = Accelerator(cpu=True, dataloader_config=config)
    data = dataset(kind, paths)
    if wiring == "ours":
        order = {"shuffle": True, "seed": 3} if kind == "map" else {}
        loader = rt.DataLoader(data, batch_size=16, num_workers=workers, **order)
    else:
        loader = torch.utils.data.DataLoader(data, batch_size=16, num_workers=workers,
                                             shuffle=kind == "map")
    loader = accelerator.prepare(loader)
    epochs = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        epochs.append([batch["id"].tolist() for batch in loader])
    return epochs


def saved_by_accelerate(paths, out):
    # accelerator.save_state() in epoch 1 after 8 batches; a new job's load_state() goes on
    from accelerate import Accelerator

    def loader(accelerator):
        data = rt.MapDataset(paths["ids"], columns=["id"])
        return accelerator.prepare(rt.DataLoader(data, batch_size=16, shuffle=True, seed=3))

    first = Accelerator(cpu=True)
    dl = loader(first)
    epoch0 = [batch["id"].tolist() for batch in dl]
    head = []
    for batch in dl:
        head.append(batch["id"].tolist())
        if len(head) == 8:
            break
    first.save_state(out)
    # every rank writes the loader's state to one file (accelerate's dl_state_dict.bin): a new
    # job starts once all have, where this one would read it while another rank still writes
    first.wait_for_everyone()
    second = Accelerator(cpu=True)
    again = loader(second)
    second.load_state(out)
    return {"epoch0": epoch0, "head": head, "rest": [batch["id"].tolist() for batch in again],
            "type": type(dl).__name__}


if __name__ == "__main__":
    # Every thread's stack on stderr should the rank still run after 180 s (the test stops it at
    # 240 s): where a hang waits. (An alarm: a forked loader worker does not inherit it.)
    faulthandler.register(signal.SIGALRM, all_threads=True)
    signal.alarm(180)
    paths, out, cases = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    base = os.path.join(os.path.dirname(out), "run")  # the ranks' checkpoints: one folder
    results = {}
    for case in cases:
        what, key = case[0], " ".join(map(str, case))
        try:  # a case that fails is that case's test's failure, not every test's
            if what == "trainer":
                _, wiring, kind, workers = case
                run = f"{base}.{wiring}.{kind}"
                results[key] = {"whole": trained(wiring, kind, workers, paths, run)}
                for step in (24, 12) if wiring == "mixin" or kind == "iterable" else (24,):
                    results[key][f"from {step}"] = trained(
                        wiring, kind, workers, paths, f"{run}-{step}", f"{run}/checkpoint-{step}"
                    )
            elif what == "refused":  # the plain Trainer's checkpoint, resumed with the mixin
                try:
                    trained("mixin", "map", 0, paths, base + ".refused", base + ".plain.map/checkpoint-12")
                    results[key] = {"refused": None}
                except ValueError as e:
                    results[key] = {"refused": str(e)}
                results[key]["saved"] = sorted(os.listdir(base + ".mixin.map/checkpoint-12"))
                args = arguments(base + ".accumulated", save_steps=2, gradient_accumulation_steps=4)
                Mixed = type("Mixed", (rt.TrainerMixin, Trainer), {})
                data = dataset("map", paths)
                Mixed(model=Model(), args=args, train_dataset=data).train()
                try:  # 19 batches an epoch: a last group of 3 that the Trainer would not step
                    Mixed(model=Model(), args=args, train_dataset=data).train(
                        base + ".accumulated/checkpoint-2")
                except ValueError as e:
                    results[key]["accumulated"] = str(e)
                results[key]["ignore_data_skip"] = args.ignore_data_skip  # as it was given
                try:  # a mixture whose epochs differ in length: the Trainer would cut one short
                    sources = [paths["ids"], paths["more"]]
                    mixture = recordmill.mix(sources, [0.7, 0.3], seed=5, columns=["id"])
                    Trainer(model=Model(), args=arguments(base + ".varying", save_strategy="no"),
                            train_dataset=rt.IterableDataset(mixture)).train()
                except ValueError as e:
                    results[key]["varying"] = str(e)
            elif what == "accelerate":
                results[key] = {"epochs": accelerated(*case[1:], paths)}
            else:
                results[key] = saved_by_accelerate(paths, f"{base}.state")
        except Exception as e:
            results[key] = {"error": f"{type(e).__name__}: {e}"}
    with open(out, "w") as f:
        json.dump(results, f)
"""

# (wiring, kind, DataLoader workers): the Trainer given the dataset as it is ("plain"), and the
# Trainer with recordmill's TrainerMixin; workers of both counts across the kinds
TRAINERS = [
    ("plain", "iterable", 0),
    ("plain", "map", 2),
    ("plain", "mix", 0),
    ("plain", "tokens", 2),
    ("mixin", "iterable", 2),
    ("mixin", "map", 0),
    ("mixin", "mix", 2),
    ("mixin", "tokens", 0),
]
# accelerator.prepare() of recordmill's DataLoader ("ours") or of torch's over our dataset, with
# accelerate's default dispatch (None: dispatched from one rank for an iterable) or not (False)
ACCELERATE = [
    ("ours", "map", 0, None),
    ("ours", "iterable", 2, None),
    ("torch", "map", 0, None),
    ("torch", "iterable", 0, None),
    ("torch", "iterable", 2, False),
]


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("trainers")
    made = {}
    for name, source, partitions in [("ids", IDS, 3), ("tokens", TOKENS, 2)]:
        made[name] = str(root / name)
        recordmill.write(
            make_plugin(root / f"{name}-p", source),
            made[name],
            partitions=partitions,
            progress=False,
        )
    more = IDS.replace("task_id * 1000 + i", "50_000 + task_id * 1000 + i")
    made["more"] = str(root / "more")
    recordmill.write(make_plugin(root / "more-p", more), made["more"], partitions=2, progress=False)
    return made


@pytest.fixture(scope="module")
def results(paths, tmp_path_factory):
    """Every case on two ranks, in one launch (each rank imports transformers once), run once a
    session: pytest sets a module's fixture up again where another module's tests ran between
    its own, and each xdist test process would run it again."""
    session = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the folder every test process of a run shares
        session = session.parent
    done = session / "trainers.json"
    with filelock.FileLock(f"{done}.lock"):
        if not done.exists():
            tmp = tmp_path_factory.mktemp("ranks")
            script = tmp / "rank.py"
            script.write_text(RANK)
            cases = [("trainer", *c) for c in TRAINERS] + [("accelerate", *c) for c in ACCELERATE]
            cases += [("refused",), ("saved",)]
            args = lambda out: [json.dumps(paths), out, json.dumps(cases)]  # noqa: E731
            done.write_text(json.dumps(launch(script, 2, args, tmp, timeout=240)))
        return json.loads(done.read_text())


def case(results: list[dict], *what) -> list[dict]:
    """Each rank's result of one case, which must have run through."""
    got = [rank[" ".join(map(str, what))] for rank in results]
    for rank, result in enumerate(got):
        assert "error" not in result, f"rank {rank}: {result['error']}"
    return got


def epoch_items(paths, kind, epoch):
    """What an epoch holds, read in one process: ids (of rows or of a mixture's draws), or blocks."""
    if kind == "tokens":
        blocks = rt.TokenBlocks(paths["tokens"], 3)
        blocks.set_epoch(epoch)
        return [tuple(b.tolist()) for b in blocks]
    if kind == "mix":
        m = recordmill.mix(
            [paths["ids"], paths["more"]], [0.7, 0.3], seed=5, columns=["id"], rows=700
        )
        return [row["id"] for row in m.rows(m.order(epoch))]
    return recordmill.open(paths["ids"]).to_arrow()["id"].to_pylist()


def flat(batches) -> list:
    return [tuple(x) if isinstance(x, list) else x for batch in batches for x in batch]


def assert_each_once(got: list, expected: list, spare: int) -> None:
    """Every item of ``expected`` as often as there, and at most ``spare`` more (padding)."""
    missing = collections.Counter(expected) - collections.Counter(got)
    assert not missing, f"{sum(missing.values())} of {len(expected)} never seen"
    assert len(expected) <= len(got) <= len(expected) + spare


@pytest.mark.parametrize(("wiring", "kind", "workers"), TRAINERS)
def test_the_trainer_trains_on_every_row_once_and_resumes_exactly(
    results, paths, wiring, kind, workers
):
    runs = case(results, "trainer", wiring, kind, workers)
    whole = [run["whole"] for run in runs]
    assert len(whole[0]) == len(whole[1]), "as many steps on each rank"
    steps = len(whole[0]) // 2
    for epoch in range(2):
        seen = flat(whole[0][epoch * steps : (epoch + 1) * steps])
        seen += flat(whole[1][epoch * steps : (epoch + 1) * steps])
        # padding: accelerate's even_batches (a last global batch of 32); ours (a row)
        assert_each_once(seen, epoch_items(paths, kind, epoch), spare=31)
    # checkpoints at step 24 (epoch 1) and, the mixin's and the plain Trainer's of an iterable
    # (its own resume, reading again), 12 (epoch 0)
    for rank, run in enumerate(runs):
        assert run["from 24"] == whole[rank][24:], f"rank {rank}: resumed at step 24"
        if wiring == "mixin" or kind == "iterable":
            assert run["from 12"] == whole[rank][12:], f"rank {rank}: resumed at step 12"


def test_the_trainers_batches_are_those_of_recordmills_order(results, paths):
    """Dispatched from one rank (an iterable under the plain Trainer), a global batch is 32 rows
    of the dataset's order, split between the ranks; with the mixin, each rank reads what
    recordmill's Sampler deals it (seed: the Trainer's)."""
    ds = recordmill.open(paths["ids"])
    ids = np.array(ds.to_arrow()["id"].to_pylist())
    order = ids[ds.shuffled(3, 0)].tolist()
    plain, mixin = (
        case(results, "trainer", "plain", "iterable", 0),
        case(results, "trainer", "mixin", "map", 0),
    )
    for rank in range(2):
        dispatched = plain[rank]["whole"]
        expected = [order[s : s + 32] for s in range(0, ROWS, 32)]
        expected[-1] += order[:2]  # 29 rows: split in two of 15, the first row again
        half = [len(b) // 2 for b in expected]
        halves = [b[rank * h : (rank + 1) * h] for b, h in zip(expected, half, strict=True)]
        assert dispatched[: len(halves)] == halves
        sampled = mixin[rank]["whole"]
        mine = [i for batch in dealt(ids[ds.shuffled(42, 0)].tolist(), rank, 2, 1) for i in batch]
        assert sampled[: -(-len(mine) // 16)] == [mine[i : i + 16] for i in range(0, len(mine), 16)]


@pytest.mark.parametrize(("wiring", "kind", "workers", "dispatch"), ACCELERATE)
def test_accelerate_prepared_loaders_read_every_row_once(
    results, paths, wiring, kind, workers, dispatch
):
    epochs = [run["epochs"] for run in case(results, "accelerate", wiring, kind, workers, dispatch)]
    for epoch in range(2):
        assert len(epochs[0][epoch]) == len(epochs[1][epoch]), "as many steps on each rank"
        seen = flat(epochs[0][epoch]) + flat(epochs[1][epoch])
        # accelerate's IterableDatasetShard pads each DataLoader worker's last global batch
        assert_each_once(seen, epoch_items(paths, kind, epoch), spare=32 * max(1, workers) - 1)


def test_accelerates_save_state_keeps_the_loaders_state(results, paths):
    """accelerator.prepare() hands recordmill's loader back as it is, and save_state() /
    load_state() keep its state: the new job's loader goes on after the 8 batches of epoch 1."""
    ds = recordmill.open(paths["ids"])
    ids = np.array(ds.to_arrow()["id"].to_pylist())
    for rank, saved in enumerate(case(results, "saved")):
        assert saved["type"] == "DataLoader"
        mine = [i for batch in dealt(ids[ds.shuffled(3, 1)].tolist(), rank, 2, 1) for i in batch]
        assert saved["head"] + saved["rest"] == [mine[i : i + 16] for i in range(0, len(mine), 16)]
        assert len(saved["head"]) == 8


def test_a_checkpoint_without_the_loaders_state_is_refused_by_the_mixin(results):
    """A checkpoint that a Trainer without TrainerMixin saved has no loader state: resuming it
    with the mixin would read the epoch from its start again, so it is refused in one line; the
    mixin's own checkpoints have one state a rank."""
    for rank, got in enumerate(case(results, "refused")):
        assert got["refused"] is not None and got["refused"].startswith("cannot resume from ")
        assert got["refused"].endswith(
            f"run.plain.map/checkpoint-12: it has no recordmill-loader-{rank}.json, the "
            "recordmill loader's state that TrainerMixin saves in each checkpoint: it was saved "
            "by a Trainer without TrainerMixin; resume it with the Trainer that saved it"
        )
        assert {"recordmill-loader-0.json", "recordmill-loader-1.json"} <= set(got["saved"])
        assert got["accumulated"] == (
            "cannot resume mid-epoch with gradient_accumulation_steps=4: an epoch's 19 batches "
            "end in a group of 3, which the Trainer would not step after a resume that did not "
            "read the epoch again; train with a gradient_accumulation_steps that divides 19, or "
            "resume at an epoch's end"
        )
        assert got["varying"] == VARYING
        assert got["ignore_data_skip"] is False  # set for a resume's train() only, then put back


VARYING = (
    "a mixture's epochs differ in length (until='first_exhausted' draws until its sources run "
    "out), and the Hugging Face Trainer counts an epoch's steps once, from the first, so it would "
    "cut a longer epoch short: give recordmill.mix(..., rows=N) for epochs of N rows each"
)


@pytest.fixture
def accelerator_state_reset():
    """A Trainer made in this process leaves accelerate's state (which recordmill's datasets
    ask, ``accelerate_deals()``) set for the tests after it: cleared, as accelerate's tests do."""
    yield
    from accelerate.state import AcceleratorState, GradientState, is_initialized

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    assert not is_initialized()


def mixed(**settings):
    """A Hugging Face ``Trainer`` with recordmill's ``TrainerMixin``, made in this process."""
    from transformers import Trainer

    class Mixed(rt.TrainerMixin, Trainer):
        pass

    return Mixed(**settings)


@pytest.mark.usefixtures("accelerator_state_reset")
def test_the_mixins_loader_takes_the_training_arguments(paths, tmp_path):
    """``get_train_dataloader()`` is recordmill's DataLoader with the ``TrainingArguments``' batch
    size, ``drop_last``, workers and ``data_seed`` (over ``seed``), shuffled unless the sampling
    strategy is sequential, and collated by a ``data_collator`` given; a plain dataset is left to
    the ``Trainer``."""
    from transformers import Trainer, TrainingArguments

    data = rt.MapDataset(paths["ids"], columns=["id"])

    def loader(data=data, collator=None, **more):
        args = TrainingArguments(
            output_dir=str(tmp_path), per_device_train_batch_size=16, use_cpu=True, report_to=[],
            seed=42, data_seed=7, dataloader_drop_last=True, **more,
        )  # fmt: skip
        model = torch.nn.Linear(1, 1)
        trainer = mixed(model=model, args=args, train_dataset=data, data_collator=collator)
        return trainer.get_train_dataloader()

    def ids(batches):
        return [b["id"].tolist() for b in batches]

    got = loader()
    assert isinstance(got, rt.DataLoader)
    assert ids(got) == ids(rt.DataLoader(data, batch_size=16, shuffle=True, seed=7, drop_last=True))
    assert len(got) == ROWS // 16  # the last short batch dropped
    stored = recordmill.open(paths["ids"]).to_arrow()["id"].to_pylist()
    in_turn = loader(train_sampling_strategy="sequential")
    assert [i for b in ids(in_turn) for i in b] == stored[: ROWS // 16 * 16]
    assert loader(dataloader_num_workers=2).num_workers == 2
    counted = loader(collator=lambda rows: len(rows))
    assert next(iter(counted)) == 16
    plain = loader(data=torch.utils.data.TensorDataset(torch.arange(40)))
    assert not isinstance(plain, rt.DataLoader)
    # A mixture whose epochs differ in length, however it is given, is refused; one of N rows
    # an epoch is read.
    sources = [paths["ids"], paths["more"]]
    varying = recordmill.mix(sources, [0.7, 0.3], seed=5, columns=["id"])
    for given in (varying, rt.IterableDataset(varying)):
        with pytest.raises(ValueError) as refused:
            loader(data=given)
        assert str(refused.value) == VARYING
    fixed = recordmill.mix(sources, [0.7, 0.3], seed=5, columns=["id"], rows=64)
    assert sum(len(b["id"]) for b in loader(data=fixed)) == 64
    # The plain Trainer counts the dataset's length under accelerate: refused there.
    args = TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=16, use_cpu=True, report_to=[]
    )
    with pytest.raises(ValueError) as refused:
        model = torch.nn.Linear(1, 1)
        Trainer(model=model, args=args, train_dataset=rt.IterableDataset(varying)).train()
    assert str(refused.value) == VARYING


def test_a_rank_without_a_state_of_its_own_resumes_from_the_first_ranks(tmp_path):
    """A job resumed on more ranks than saved the checkpoint: a rank with no state file takes
    rank 0's (every rank's state is the job's); none at all is refused."""
    from recordmill.read.torch.trainer import _saved_state

    (tmp_path / "recordmill-loader-0.json").write_text(json.dumps({"epoch": 1, "position": 64}))
    (tmp_path / "recordmill-loader-1.json").write_text(json.dumps({"epoch": 1, "position": 96}))
    assert _saved_state(str(tmp_path), 1) == {"epoch": 1, "position": 96}
    assert _saved_state(str(tmp_path), 3) == {"epoch": 1, "position": 64}
    with pytest.raises(ValueError, match=r"it has no recordmill-loader-0\.json"):
        _saved_state(str(tmp_path / "elsewhere"), 0)


def test_a_mid_epoch_resume_is_refused_where_accumulation_ends_the_epoch_short(paths):
    """19 batches an epoch: gradient accumulation of 2 leaves a last group of 1, which the
    Trainer would not step after a resume mid-epoch; at an epoch's start, or with steps of 1,
    nothing is refused."""
    from recordmill.read.torch.trainer import _check_accumulation

    loader = rt.DataLoader(rt.MapDataset(paths["ids"], columns=["id"]), batch_size=32)
    assert len(loader) == 19
    _check_accumulation(loader, 2)  # the epoch's start
    next(iter(loader))
    _check_accumulation(loader, 1)
    with pytest.raises(ValueError, match="gradient_accumulation_steps=2: an epoch's 19 batches"):
        _check_accumulation(loader, 2)


@pytest.mark.usefixtures("accelerator_state_reset")
def test_the_mixin_resumes_the_last_checkpoint_and_leaves_other_datasets_to_the_trainer(tmp_path):
    """``train(resume_from_checkpoint=True)`` finds the last checkpoint as the Trainer does; a
    dataset that is not recordmill's is resumed the Trainer's own way (no loader state asked)."""
    from transformers import TrainingArguments

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return {"loss": (self.w * x).sum() * 0}

    rows = [{"x": torch.tensor([float(i)])} for i in range(8)]

    def trainer():
        args = TrainingArguments(
            output_dir=str(tmp_path), per_device_train_batch_size=2, max_steps=4, save_steps=2,
            use_cpu=True, report_to=[], logging_strategy="no", disable_tqdm=True,
        )  # fmt: skip
        return mixed(model=Model(), args=args, train_dataset=rows)

    trainer().train()
    assert sorted(os.listdir(tmp_path)) == ["checkpoint-2", "checkpoint-4"]
    assert trainer().train(resume_from_checkpoint=True).global_step == 4
