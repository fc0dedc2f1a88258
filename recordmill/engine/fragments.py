"""Reading the staged task fragments back by global row number: consecutive slices for in-order
partitions, gathers for shuffled ones (see rows.py for where each row lives)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from recordmill.dataset import layout
from recordmill.dataset.rows import RowIndex
from recordmill.dataset.storage import Store
from recordmill.engine.plain import numpy_array


class Fragments:
    """The staged batches of all tasks, addressed by global row number."""

    def __init__(
        self,
        staging: Store,
        fragments: tuple[tuple[int, tuple[int, ...]], ...],
        schema: pa.Schema,
    ):
        """``fragments``: (task_id, batch row counts) of every non-empty task, in task order."""
        self.staging = staging
        self.schema = schema
        self.batches: list[tuple[int, int]] = []  # (task_id, batch index)
        sizes = []
        for task_id, batch_rows in fragments:
            for b, n in enumerate(batch_rows):
                self.batches.append((task_id, b))
                sizes.append(n)
        self.index = RowIndex(sizes)
        self._readers: dict[int, pa.ipc.RecordBatchFileReader] = {}

    def _reader(self, task_id: int) -> pa.ipc.RecordBatchFileReader:
        return pa.ipc.open_file(self.staging.input_file(layout.fragment_file(task_id)))

    def sequential(self, start: int, stop: int) -> Iterator[pa.RecordBatch]:
        """Global rows ``start`` to ``stop``, batch by batch."""
        for i, lo, hi in self.index.spans(start, stop):
            task_id, b = self.batches[i]
            if self.staging.local:
                # A mapping per batch: zero-copy, and unmapped once the batch is written, so
                # memory stays bounded by one batch however large a task's fragment is.
                reader = self._reader(task_id)
            else:
                # Elsewhere one reader per fragment: it fetches just the batches asked for, and
                # opening it again would cost a footer request per batch.
                if task_id not in self._readers:
                    self._readers = {task_id: self._reader(task_id)}
                reader = self._readers[task_id]
            yield reader.get_batch(b).slice(lo, hi - lo)

    def shuffled(self, order: np.ndarray, step: int) -> Iterator[pa.Table]:
        """The global rows in ``order``, ``step`` rows at a time."""
        for lo in range(0, len(order), step):
            yield self.gather(order[lo : lo + step])

    def gather(self, rows: np.ndarray) -> pa.Table:
        """The given global rows, in the given order."""
        plan = self.index.gather(rows)
        pieces = []
        for i, part in zip(plan.groups, plan.parts, strict=True):
            task_id, b = self.batches[i]
            if task_id not in self._readers:
                self._readers[task_id] = self._reader(task_id)
            pieces.append(self._readers[task_id].get_batch(b).take(numpy_array(plan.local[part])))
        table = pa.Table.from_batches(pieces, schema=self.schema)
        return table.take(numpy_array(plan.inverse))  # (pa.array: pandas, plain.py)
