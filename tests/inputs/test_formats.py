"""What the format helpers share: how packed inputs are split into tasks by default."""

from __future__ import annotations

import pytest

from recordmill.errors import ConfigError
from recordmill.inputs import TASK_BYTES, tasks_for


def test_packed_inputs_split_by_size_unless_told():
    assert tasks_for(0, 0) == 1  # an empty file is still a task (its damage gets reported)
    assert tasks_for(TASK_BYTES, 0) == 1
    assert tasks_for(TASK_BYTES + 1, 0) == 2
    assert tasks_for(140 << 30, 0) == 4480  # ImageNet's train.rec: work for every worker
    assert tasks_for(140 << 30, 3) == 3
    with pytest.raises(ConfigError, match="--tasks must be 0"):
        tasks_for(10, -1)
