"""The refusals of recordmill.torch's loaders that no other test reaches: states of other
settings, positions, blocks, weights or sources given to ``load_state_dict``, samplers of another
dataset or kind, a mixture given its own decode or cache, and the package without PyTorch."""

from __future__ import annotations

import subprocess
import sys

import pytest

import recordmill
from tests.conftest import make_plugin
from tests.read.test_read_refusals import PLUGIN, write


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("torch")
    return {"a": write(root, "a"), "b": write(root, "b")}


torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")
import recordmill.torch as rtorch  # noqa: E402


def loader(source, **options):
    return rtorch.DataLoader(rtorch.IterableDataset(source, **options), batch_size=3)


def started(source, **options):
    first = loader(source, **options)
    next(iter(first))
    return first.state_dict()


@pytest.mark.parametrize("key", ["seed", "shuffle"])
def test_a_state_of_other_settings_is_refused_naming_the_setting(paths, key):
    state = started(paths["a"], shuffle=True, seed=5)
    other = {"seed": 6, "shuffle": False}[key]
    with pytest.raises(ValueError) as caught:
        loader(paths["a"], **{"shuffle": True, "seed": 5, key: other}).load_state_dict(state)
    assert str(caught.value) == (
        f"cannot resume: the saved state has {key}={state[key]!r}, this one {other!r}; resume "
        "with the dataset and settings the state was saved with"
    )


def test_a_position_outside_the_epoch_is_refused_on_both_sides(paths):
    state = started(paths["a"])
    resumed = loader(paths["a"])
    resumed.load_state_dict({**state, "position": 10})  # after the last batch: the next epoch
    assert resumed.state_dict()["epoch"] == state["epoch"] + 1
    with pytest.raises(ValueError) as caught:
        loader(paths["a"]).load_state_dict({**state, "position": 11})
    assert str(caught.value) == (
        f"cannot resume: the saved state has epoch {state['epoch']} and position 11; a position "
        "is 0 to 10 (the rows of an epoch)"
    )


# Damaged or forged fields, each alone, and the line that refuses it (10 rows, shuffled).
FORGED = [
    ("epoch", -1, "epoch=-1; expected a whole number from 0 to 2,147,483,647"),
    ("epoch", 10**30, f"epoch={10**30}; expected a whole number from 0 to 2,147,483,647"),
    ("epoch", 1.0, "epoch=1.0; expected a whole number from 0 to 2,147,483,647"),
    ("position", -1, "position=-1; expected a whole number from 0"),
    ("position", "8", "position='8'; expected a whole number from 0"),
    ("position", True, "position=True; expected a whole number from 0"),
    ("blocks", -1, "blocks=-1; expected a whole number from 0 to 10"),
    ("blocks", 10**12, "blocks=1000000000000; expected a whole number from 0 to 10"),
    ("stream", 10**12, "stream=1000000000000; expected a whole number from 0 to 6"),
    ("batches", 11, "batches=11; expected a whole number from 0 to 10"),
    ("stream", -100, "stream=-100; expected a whole number from 0 to 6"),
    ("shuffle", 1, "shuffle=1, this one True; resume with the dataset and settings the state"),
    ("read_rejects", -(10**9), "read_rejects=-1000000000; expected a whole number from 0 to 4"),
    ("read_rejects", 5, "read_rejects=5; expected a whole number from 0 to 4"),
]


@pytest.mark.parametrize(("key", "value", "line"), FORGED)
def test_a_damaged_or_forged_state_is_refused_in_one_line(paths, key, value, line):
    """Each field a state names is checked against what it can be: a forged read_rejects
    switched max_read_rejects off, stream=10**12 gave an empty epoch, stream=-100 other rows."""

    def skipping():
        data = rtorch.MapDataset(paths["a"], on_error="skip")
        return rtorch.DataLoader(data, batch_size=2, shuffle=True, seed=5)

    first = skipping()
    batches = iter(first)
    next(batches), next(batches)
    state = first.state_dict()
    assert state["position"] == 4  # of 10 rows
    fresh = skipping()
    with pytest.raises(ValueError) as caught:
        fresh.load_state_dict({**state, key: value})
    assert str(caught.value).startswith(f"cannot resume: the saved state has {line}")
    assert "\n" not in str(caught.value)
    assert fresh.state_dict() == skipping().state_dict()  # nothing of it taken


def test_a_refused_state_of_another_epoch_leaves_the_loader_where_it_was(paths):
    """The fields are checked in the state's epoch (its rows, a mixture's weights): refused, the
    loader is back in its own, nothing of the state kept."""
    state = started(paths["a"], shuffle=True, seed=5)
    resumed = loader(paths["a"], shuffle=True, seed=5)
    before = resumed.state_dict()
    for forged in ({"epoch": 3, "position": 11}, {"epoch": 3, "blocks": -1}):
        with pytest.raises(ValueError, match=r"^cannot resume: the saved state has "):
            resumed.load_state_dict({**state, **forged})
        assert resumed.state_dict() == before
    resumed.load_state_dict({**state, "epoch": 3})
    assert resumed.state_dict() == {**state, "epoch": 3}


def test_a_state_of_batches_handed_out_apart_names_its_rank(paths):
    """A state that counts this rank's own batches (ranks that skipped rows are not in step)
    resumes only the rank that saved it."""

    def skipping():
        data = rtorch.MapDataset(paths["a"], on_error="skip")
        return rtorch.DataLoader(data, batch_size=2, shuffle=True, seed=5)

    first = skipping()
    next(iter(first))
    state = first.state_dict()
    for forged, whose in [
        ({"batches": 1}, "names no rank"),
        ({"stream": 1, "rank": 1, "world_size": 2}, "is rank 1 of 2's"),
    ]:
        with pytest.raises(ValueError) as caught:
            skipping().load_state_dict({**state, **forged})
        assert str(caught.value) == (
            f"cannot resume: the saved state {whose} and this is rank 0 of 1; with rows skipped, "
            "ranks are not in step: resume each rank from the state it saved, with the same "
            "world size"
        )


def test_a_state_that_is_not_a_dict_is_refused(paths):
    with pytest.raises(ValueError, match=r"^cannot resume: a state is the dict loader.state_dic"):
        loader(paths["a"]).load_state_dict([("epoch", 0)])


def test_a_mixture_state_of_other_weights_or_sources_is_refused(paths, tmp_path):
    m = recordmill.mix([paths["a"], paths["b"]], seed=1)
    state = started(m)
    damaged = {**state, "mixture": {**state["mixture"], "steps": [[3, [0.5, 0.5]]]}}
    with pytest.raises(ValueError) as caught:
        loader(m).load_state_dict(damaged)
    assert str(caught.value) == "cannot resume: the saved state's weights are [[3, [0.5, 0.5]]]"
    other = loader(recordmill.mix([paths["a"], paths["b"]], [0.9, 0.1], seed=1))
    with pytest.raises(ValueError, match="a position is 0 to"):  # other weights: kept no more
        other.load_state_dict({**state, "position": 10**6})
    fresh = loader(recordmill.mix([paths["a"], paths["b"]], [0.9, 0.1], seed=1))
    assert [b["id"].tolist() for b in other] == [b["id"].tolist() for b in fresh]
    with pytest.raises(ValueError) as caught:
        loader(m).load_state_dict({**state, "mixture": [3, [0.5, 0.5]]})
    assert str(caught.value) == (
        "cannot resume: the saved state's mixture is [3, [0.5, 0.5]]; expected the dict of its "
        "sources and weights that a mixture's state_dict() gives"
    )
    grown = write(tmp_path, "b", ("id", "label"))
    recordmill.write(
        make_plugin(tmp_path / "pb", PLUGIN.format(fields={"id": "int64", "label": "int64"})),
        grown,
        append=True,
        workers=0,
        progress=False,
    )
    with pytest.raises(ValueError) as caught:
        loader(recordmill.mix([paths["a"], grown], seed=1)).load_state_dict(state)
    assert str(caught.value).startswith(
        "cannot resume: source 1 (b) has version 2, the saved state's source 1 (b) had 1; resume "
        "with the sources (and versions) the state was saved with"
    )


def test_a_mixture_takes_no_decode_cache_or_version_of_its_own(paths, tmp_path):
    m = recordmill.mix([paths["a"]])
    for given in ({"version": 1}, {"cache_dir": tmp_path}, {"decode": {"id": int}}):
        with pytest.raises(TypeError) as caught:
            rtorch.IterableDataset(m, **given)
        assert str(caught.value) == (
            "a mixture's decode, cache and versions are its sources': give them to "
            "recordmill.mix() or to the datasets it mixes"
        )


def test_a_sampler_of_another_dataset_or_kind_is_refused(paths):
    data = rtorch.MapDataset(paths["a"])
    other = torch.utils.data.DistributedSampler(rtorch.MapDataset(paths["b"]), 2, 0)
    with pytest.raises(TypeError, match=r"^the DistributedSampler given is of another dataset"):
        rtorch.DataLoader(data, batch_size=2, sampler=other)
    mine = torch.utils.data.DistributedSampler(data, 2, 1, shuffle=False)
    assert len(rtorch.DataLoader(data, batch_size=5, sampler=mine)) == 1
    with pytest.raises(TypeError) as caught:
        rtorch.DataLoader(data, batch_size=2, sampler=torch.utils.data.SequentialSampler(data))
    assert str(caught.value) == (
        "give a recordmill.torch.Sampler (or a torch DistributedSampler) as sampler, or none; got "
        "SequentialSampler"
    )


def test_a_batch_sampler_not_of_a_recordmill_sampler_is_refused(paths):
    data = rtorch.MapDataset(paths["a"])
    theirs = torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(data), 2, False)
    with pytest.raises(TypeError) as caught:
        rtorch.DataLoader(data, batch_sampler=theirs)
    assert str(caught.value) == (
        "give a batch_sampler that draws from a recordmill.torch.Sampler, as torch's "
        "BatchSampler(Sampler(dataset), batch_size, drop_last) does; got BatchSampler of "
        "RandomSampler"
    )
    ours = torch.utils.data.BatchSampler(rtorch.Sampler(data), 2, False)
    with pytest.raises(ValueError, match=r"^sampler option is mutually exclusive with batch_sa"):
        rtorch.DataLoader(data, batch_sampler=ours, sampler=rtorch.Sampler(data))
    skipping = rtorch.MapDataset(paths["a"], on_error="skip")
    with pytest.raises(TypeError, match=r"^on_error='skip' makes full batches itself: give bat"):
        rtorch.DataLoader(skipping, batch_sampler=ours)


def test_recordmill_torch_without_torch_says_what_to_install():
    code = "import sys; sys.modules['torch'] = None; import recordmill.torch"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        'ImportError: recordmill.torch needs PyTorch: pip install "recordmill[torch]" (or pip '
        "install torch)"
    )


@pytest.mark.parametrize(
    "rank, world", [(0, 0), (2, 2), (-1, 2), (0, None), (None, 2), (1.0, 2), (True, 2)]
)
def test_a_rank_outside_its_world_is_refused(paths, rank, world):
    """rank 2 of 2 once read rows of its own choosing, world_size 0 failed in a worker."""
    for make in (
        lambda: rtorch.IterableDataset(paths["a"], rank=rank, world_size=world),
        lambda: rtorch.Sampler(10, rank=rank, world_size=world),
        lambda: rtorch.TokenBlocks(paths["a"], "tokens", 4, rank=rank, world_size=world),
    ):
        with pytest.raises(ValueError, match="rank and world_size go together, world_size a") as e:
            make()
        assert str(e.value).endswith(f"got rank={rank!r}, world_size={world!r}")


def test_a_mixture_read_by_another_sampler_is_refused(paths):
    """Torch's shuffle (or a DistributedSampler, or the Hugging Face Trainer's sampler) over a
    MapDataset of a mixture would read each source's rows once, the weights left aside."""
    m = recordmill.mix([paths["a"], paths["b"]], [0.9, 0.1], seed=1)
    data = rtorch.MapDataset(m)
    with pytest.raises(TypeError) as caught:
        next(iter(torch.utils.data.DataLoader(data, batch_size=4, shuffle=True)))
    assert str(caught.value) == (
        "a MapDataset of a mixture is read in the mixture's order (its weights) only through a "
        "recordmill.torch.Sampler, and another sampler (torch's shuffle, a DistributedSampler, "
        "the Hugging Face Trainer's) would read each source's rows once instead: give it to "
        "recordmill.torch.DataLoader, or read IterableDataset(mix)"
    )
    drawn = torch.utils.data.DataLoader(data, batch_size=4, sampler=rtorch.Sampler(data))
    assert sum(len(b["id"]) for b in drawn) == len(m.order(0))  # its draws, each once
    # Its length numbers its rows across the sources (a draw names one of them), whatever an
    # epoch draws.
    fewer = rtorch.MapDataset(recordmill.mix([paths["a"], paths["b"]], [0.9, 0.1], rows=7))
    assert len(data) == len(fewer) == m.total_rows != 7
    # Outside a Trainer an epoch of any length is read: an IterableDataset's counts epoch 0's.
    assert len(rtorch.IterableDataset(m)) == len(m.order(0))
