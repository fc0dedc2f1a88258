"""The Parquet writer's per-column settings: no dictionary for floats (they rarely repeat), one
for numbers and strings that do, nothing for bytes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from recordmill.engine.writers import ParquetWriter


def test_floats_are_written_without_a_dictionary_and_labels_with_one(tmp_path):
    rng = np.random.default_rng(7)
    n = 20_000
    table = pa.table(
        {
            "x": rng.normal(size=n),  # measurements: every value new
            "vec": pa.FixedSizeListArray.from_arrays(rng.normal(size=3 * n).astype(np.float32), 3),
            "label": rng.integers(0, 10, n),
            "name": pa.array([f"class {i % 7}" for i in range(n)]),
        }
    )
    path = tmp_path / "t.parquet"
    with pa.OSFile(str(path), "wb") as sink:
        writer = ParquetWriter(sink, table.schema, "auto")
        writer.write(table)
        writer.close()
    meta = pq.ParquetFile(path).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(4)}
    for floats in ("x", "vec.list.element"):
        assert not any("DICTIONARY" in e for e in encodings[floats]), encodings
    for repeating in ("label", "name"):
        assert any("DICTIONARY" in e for e in encodings[repeating]), encodings
    # What it saves: the file against pyarrow's default, a dictionary tried for every column.
    tried = tmp_path / "d.parquet"
    pq.write_table(table, tried, compression="zstd", write_page_checksum=True)
    assert path.stat().st_size < 0.9 * tried.stat().st_size
    assert pq.read_table(path).equals(table)
