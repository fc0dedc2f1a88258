"""The one pass over a dataset's small columns that the statistics need.

The columns are read straight from the partition files with pyarrow, so that only their own bytes
are read: Parquet column chunks of those columns, Arrow IPC pages of those columns (memory-mapped
on a local disk). ``recordmill.open`` would read and check each row group whole, which for an
image dataset means every image. The page is a look at the data, not a check of it: ``recordmill
verify`` checks. Their structure is checked all the same (offsets within their buffers), as every
read of recordmill's does: a damaged or forged file is one line, never a read past its memory. A progress bar (tqdm, on stderr) appears once the pass is seen to read more than
:data:`BAR_BYTES`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from recordmill.dataset.storage import Store
from recordmill.errors import OutputError
from recordmill.read.files import check_structure

BAR_BYTES = 8 << 20
BATCH_ROWS = 65_536


class Bar:
    """A tqdm bar of rows that starts only once the work is seen to be large: after each step,
    the bytes so far, projected over all rows, against ``BAR_BYTES``. ``show``: True always,
    False never, None when large."""

    def __init__(self, total: int, desc: str, show: bool | None = None):
        self.total, self.desc, self.show = total, desc, show
        self.rows = self.bytes = 0
        self._bar: Any = None

    def add(self, rows: int, nbytes: int) -> None:
        self.rows += rows
        self.bytes += nbytes
        if self._bar is None and self.show is not False and self.rows:
            projected = self.bytes / self.rows * self.total
            if self.show or projected > BAR_BYTES:
                self._bar = tqdm(
                    total=self.total, desc=self.desc, unit="rows", file=sys.stderr, leave=False
                )
                self._bar.update(self.rows - rows)
        if self._bar is not None:
            self._bar.update(rows)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def batches(
    store: Store, manifest: dict[str, Any], columns: list[str], bar: Bar
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """(first global row, batch of ``columns``) for every row of the dataset, in order."""
    offset, pending = 0, []
    for piece in _pieces(store, manifest, columns):
        bar.add(piece.num_rows, piece.nbytes)
        pending.append(piece)
        # An image dataset's record batches hold a few dozen rows each: joined, so that each
        # statistic costs one call per BATCH_ROWS rows, not one per small batch.
        if sum(p.num_rows for p in pending) >= BATCH_ROWS:
            batch = pa.concat_batches(pending)
            yield offset, batch
            offset, pending = offset + batch.num_rows, []
    if pending:
        yield offset, pa.concat_batches(pending)


def _pieces(store: Store, manifest: dict[str, Any], columns: list[str]) -> Iterator[pa.RecordBatch]:
    for entry in manifest["partitions"]:
        if not entry["rows"]:
            continue
        try:
            yield from _partition(store, entry["file"], manifest["format"], columns)
        except (OSError, pa.ArrowInvalid) as e:
            said = " ".join(str(e).split())  # pyarrow's messages can hold a newline: one line
            raise OutputError(
                f"{store}/{entry['file']} cannot be read: {said} (recordmill verify tells more)"
            ) from e


def _partition(store: Store, name: str, fmt: str, columns: list[str]) -> Iterator[pa.RecordBatch]:
    source = store.input_file(name)
    try:
        if fmt == "arrow":
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                batch = reader.get_batch(i).select(columns)
                # offsets past the buffers would make a statistic read memory past them
                check_structure(batch, f"{store}/{name}, record batch {i}")
                yield batch
        else:
            parquet = pq.ParquetFile(source)
            yield from parquet.iter_batches(BATCH_ROWS, columns=columns, use_threads=False)
    finally:
        source.close()
