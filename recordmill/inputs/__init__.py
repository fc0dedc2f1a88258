"""The inputs recordmill converts, read without their tools (any plugin may use these): the image
pipeline (``images``), im2rec/TorchRecord list files (``filelists``), MNIST idx files (``idx``),
the packed files of other tools (``tfrecord``, ``mindrecord``, ``recordio``, ``ofrecord``,
``torchrecord``; ``protobuf`` and ``features`` for what several share), and the demo inputs of
every built-in plugin (``demo``)."""

from recordmill.errors import ConfigError

# Packed inputs (a .rec file, an LMDB database, a MindRecord shard) are split into tasks of about
# this many bytes unless told otherwise: one 140 GB file must not be one task, and tasks no
# larger than partitions let rows go straight to the partitions.
TASK_BYTES = 32 << 20


def tasks_for(size: int, asked: int) -> int:
    """How many tasks ``size`` bytes split into: ``asked``, or with 0 one per ``TASK_BYTES``."""
    if asked < 0:
        raise ConfigError(f"--tasks must be 0 (split by size) or more, got {asked}")
    return asked or max(1, -(-size // TASK_BYTES))
