"""``recordmill.torch.TrainerMixin``: the Hugging Face ``Trainer`` trains from recordmill's
``DataLoader`` and keeps its state in every checkpoint, so that
``train(resume_from_checkpoint=...)`` goes on with the batch after the last one trained.

The ``Trainer`` resumes by reading an epoch again and throwing away the batches it trained
(accelerate's ``skip_first_batches``, which makes a plain torch loader of the loader's parts). The
mixin saves the loader's ``state_dict()`` beside each checkpoint instead (one JSON file a rank, as
the ``Trainer`` saves one RNG state a rank), loads it into the new loader, and tells the
``Trainer`` not to skip (``ignore_data_skip`` while that ``train()`` runs).
"""

from __future__ import annotations

import json
import os
from typing import Any

from recordmill.read.mixture import Mixture
from recordmill.read.torch.datasets import IterableDataset, MapDataset
from recordmill.read.torch.loader import DataLoader
from recordmill.read.torch.sources import check_counted_once

__all__ = ["STATE_FILE", "TrainerMixin"]

# In each checkpoint folder, a rank's loader state.
STATE_FILE = "recordmill-loader-{rank}.json"


class TrainerMixin:
    """Mix into ``transformers.Trainer`` (or a subclass of it), before it::

        class RecordmillTrainer(TrainerMixin, Trainer):
            pass

    Given a recordmill ``MapDataset``, ``IterableDataset`` (``TokenBlocks`` too), a mixture or a
    dataset's path as ``train_dataset``, ``get_train_dataloader()`` is a recordmill ``DataLoader``
    of it with the ``TrainingArguments``' batch size, workers, pinning and ``drop_last``, shuffled
    (map-style) with ``data_seed`` (else ``seed``); ``data_collator`` where one is given. Its state
    goes into every checkpoint, and a resumed ``train()`` goes on from it: the batches after the
    last one trained, without reading those before again.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._recordmill_loader: DataLoader | None = None
        self._recordmill_resume: dict[str, Any] | None = None
        self.add_callback(_state_saver(self))

    def get_train_dataloader(self) -> Any:
        data = self.train_dataset
        if not isinstance(data, (MapDataset, IterableDataset, Mixture, str, os.PathLike)):
            return super().get_train_dataloader()
        source = getattr(data, "source", None)
        check_counted_once(data if isinstance(data, Mixture) else getattr(source, "mixture", None))
        loader = DataLoader(data, **_loader_options(self, data))
        if self._recordmill_resume is not None:
            loader.load_state_dict(self._recordmill_resume)
            _check_accumulation(loader, self.args.gradient_accumulation_steps)
        self._recordmill_loader = loader
        return self.accelerator.prepare(loader)  # the loader itself, on the Accelerator's device

    def train(
        self, resume_from_checkpoint: str | bool | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        checkpoint = _checkpoint(resume_from_checkpoint, self.args.output_dir)
        self._recordmill_resume = None
        if checkpoint is not None and _ours(self.train_dataset):
            self._recordmill_resume = _saved_state(checkpoint, self.args.process_index)
        skip = self.args.ignore_data_skip
        # The loader resumes itself: nothing to read again and throw away.
        self.args.ignore_data_skip = skip or self._recordmill_resume is not None
        try:
            return super().train(resume_from_checkpoint, *args, **kwargs)
        finally:
            self.args.ignore_data_skip = skip
            self._recordmill_resume = None

    def _save_loader_state(self, output_dir: str) -> None:
        """The loader's state, beside the checkpoint just saved in ``output_dir``."""
        if self._recordmill_loader is None:
            return
        os.makedirs(output_dir, exist_ok=True)
        path = os.path.join(output_dir, STATE_FILE.format(rank=self.args.process_index))
        with open(path, "w") as f:
            json.dump(self._recordmill_loader.state_dict(), f)


def _ours(data: Any) -> bool:
    return isinstance(data, (MapDataset, IterableDataset, Mixture, str, os.PathLike))


def _loader_options(trainer: Any, data: Any) -> dict[str, Any]:
    """The recordmill ``DataLoader``'s options, from the ``TrainingArguments``."""
    from transformers.data.data_collator import default_data_collator

    args = trainer.args
    options: dict[str, Any] = {
        "batch_size": trainer._train_batch_size,
        "num_workers": args.dataloader_num_workers,
        "pin_memory": args.dataloader_pin_memory,
        "drop_last": args.dataloader_drop_last,
    }
    if not isinstance(data, IterableDataset):  # an iterable's order is its own
        options["shuffle"] = args.train_sampling_strategy != "sequential"
        options["seed"] = args.data_seed if args.data_seed is not None else args.seed
    if args.dataloader_num_workers:
        options["persistent_workers"] = args.dataloader_persistent_workers
        options["prefetch_factor"] = args.dataloader_prefetch_factor
        options["multiprocessing_context"] = args.dataloader_multiprocessing_context
    if trainer.data_collator is not default_data_collator:  # one the user gave
        options["collate_fn"] = trainer.data_collator
    return options


def _check_accumulation(loader: DataLoader, steps: int) -> None:
    """Refuses a resume mid-epoch where the epoch's batches end in a short group of gradient
    accumulation: the Trainer steps that group where it counted the epoch's batches itself, by
    reading them again, which the mixin spares it."""
    p, batches = loader.position, len(loader)
    if steps > 1 and batches % steps and (p.position or p.stream or p.taken):
        raise ValueError(
            f"cannot resume mid-epoch with gradient_accumulation_steps={steps}: an epoch's "
            f"{batches} batches end in a group of {batches % steps}, which the Trainer would not "
            f"step after a resume that did not read the epoch again; train with a "
            f"gradient_accumulation_steps that divides {batches}, or resume at an epoch's end"
        )


def _checkpoint(given: str | bool | None, output_dir: str) -> str | None:
    """The checkpoint a ``train()`` resumes from, as the ``Trainer`` finds it."""
    if given is True:
        from transformers.trainer_utils import get_last_checkpoint

        return get_last_checkpoint(output_dir)  # None: the Trainer says so itself
    return None if given in (None, False) else os.fspath(given)  # type: ignore[arg-type]


def _saved_state(checkpoint: str, rank: int) -> dict[str, Any]:
    """This rank's loader state saved in ``checkpoint`` (or the first rank's, where the job had
    fewer ranks: every rank's state is the job's, but with rows skipped)."""
    for name in (STATE_FILE.format(rank=rank), STATE_FILE.format(rank=0)):
        path = os.path.join(checkpoint, name)
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
    raise ValueError(
        f"cannot resume from {checkpoint}: it has no {STATE_FILE.format(rank=rank)}, the "
        "recordmill loader's state that TrainerMixin saves in each checkpoint: it was saved "
        "by a Trainer without TrainerMixin; resume it with the Trainer that saved it"
    )


def _state_saver(trainer: TrainerMixin) -> Any:
    """A ``TrainerCallback`` that saves the loader's state in each checkpoint (on every rank)."""
    from transformers import TrainerCallback
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    class SavesLoaderState(TrainerCallback):
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            folder = f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            trainer._save_loader_state(os.path.join(args.output_dir, folder))

    return SavesLoaderState()
