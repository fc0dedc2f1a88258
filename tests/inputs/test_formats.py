"""What the format helpers share: how packed inputs are split into tasks by default."""

from __future__ import annotations

import pytest

from recordmill.errors import ConfigError
from recordmill.inputs import MIN_TASK_BYTES, TASK_BYTES, TASKS, task_size, tasks_for


def test_packed_inputs_split_by_size_unless_told():
    assert tasks_for(0, 0) == 1  # an empty file is still a task (its damage gets reported)
    # A small input is one task; past MIN_TASK_BYTES it is cut into about TASKS of them.
    assert tasks_for(MIN_TASK_BYTES, 0) == 1
    assert tasks_for(MIN_TASK_BYTES + 1, 0) == 2
    assert tasks_for(TASK_BYTES, 0) == TASKS
    assert tasks_for(TASK_BYTES * TASKS, 0) == TASKS
    assert tasks_for(TASK_BYTES * TASKS + 1, 0) == TASKS + 1  # no task over TASK_BYTES
    assert tasks_for(140 << 30, 0) == 4480  # ImageNet's train.rec: work for every worker
    assert tasks_for(140 << 30, 3) == 3
    # A file of a larger input is cut by the whole input's task size, not its own.
    assert tasks_for(MIN_TASK_BYTES * 4, 0, total=TASK_BYTES * TASKS) == 1
    assert task_size(TASK_BYTES) == TASK_BYTES // TASKS
    with pytest.raises(ConfigError, match="--tasks must be 0"):
        tasks_for(10, -1)
