"""The inputs recordmill converts, read without their tools (any plugin may use these): the image
pipeline (``images``), im2rec/TorchRecord list files (``filelists``), MNIST idx files (``idx``),
the packed files of other tools (``tfrecord``, ``mindrecord``, ``recordio``, ``ofrecord``,
``torchrecord``; ``protobuf`` and ``features`` for what several share), and the demo inputs of
every built-in plugin (``demo``)."""

from recordmill.errors import ConfigError

# Packed inputs (a .rec file, an LMDB database, a MindRecord shard, a text corpus) are split into
# tasks unless told otherwise: into about TASKS (every core of a large machine busy, and the last
# ones short), each of MIN_TASK_BYTES at least (a task's start costs little beside it) and
# TASK_BYTES at most (one 140 GB file must not be one task, and tasks no larger than partitions
# let rows go straight to the partitions).
TASK_BYTES = 32 << 20
MIN_TASK_BYTES = 256 << 10
TASKS = 64


def task_size(total: int) -> int:
    """The bytes of input a task, for an input of ``total`` bytes in all."""
    return max(MIN_TASK_BYTES, min(TASK_BYTES, -(-total // TASKS)))


def tasks_for(size: int, asked: int, total: int | None = None) -> int:
    """How many tasks a file of ``size`` bytes splits into: ``asked``, or with 0 by the
    ``task_size`` of the whole input (``total`` bytes in all its files; default: this one)."""
    if asked < 0:
        raise ConfigError(f"--tasks must be 0 (split by size) or more, got {asked}")
    return asked or max(1, -(-size // task_size(size if total is None else total)))
