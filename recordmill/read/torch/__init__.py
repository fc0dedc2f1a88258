"""PyTorch datasets over a written dataset (``pip install "recordmill[torch]"``).

``MapDataset`` gives random access (``len`` and ``[i]``) for a ``DataLoader`` with a sampler;
``IterableDataset`` streams rows and splits them across DataLoader workers and distributed ranks
so that every row is read exactly once per epoch. Both take ``transform``, a function applied to
each row dict (decode an image, build tensors), as TorchRecord's loader does. Arrays in the rows
are writable numpy arrays of their stored dtype, so the default collate makes tensors of them
without a warning.

Resuming mid-epoch: ``recordmill.torch.DataLoader`` (a ``torch.utils.data.DataLoader``) counts
the batches it has handed out; its ``state_dict()`` saved after batch k and given to
``load_state_dict()`` in a new job makes the next batch k+1, with exactly the rows not yet seen, in
the same order, whatever ``num_workers`` is. The order of an epoch is one seeded permutation cut
into batches (``Sampler`` for a ``MapDataset``; for an ``IterableDataset`` with one rank batch b goes to
worker ``b % num_workers``, and the DataLoader hands batches out in that order), so it does not
depend on the number of workers. A state is of one version of a dataset that grows (``--append``):
a loader of another version refuses it.

Under the Hugging Face ``Trainer``, ``TrainerMixin`` trains from recordmill's ``DataLoader`` and
keeps its state in the checkpoints; ``accelerator.prepare()`` hands the loader back as it is.
"""

from recordmill.read.torch.datasets import IterableDataset, MapDataset, Sampler
from recordmill.read.torch.loader import DataLoader
from recordmill.read.torch.tokens import TokenBlocks
from recordmill.read.torch.trainer import TrainerMixin

__all__ = ["DataLoader", "IterableDataset", "MapDataset", "Sampler", "TokenBlocks", "TrainerMixin"]
