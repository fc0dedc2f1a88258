"""The csv plugin's fast path: a task's records read by pyarrow's CSV reader (typed, in C++),
as batches, where it gives exactly what the record-by-record path of ``plugin.py`` gives."""

import pyarrow as pa
import pyarrow.csv as pacsv

from recordmill.kit import to_arrow_schema

# As the record-by-record path reads: "" is null but in strings, booleans spelt as its
# _parse_bool takes them (in these casings; another makes the record path say it).
BOOLS = {
    "true_values": ["true", "True", "TRUE", "1", "yes", "Yes", "YES"],
    "false_values": ["false", "False", "FALSE", "0", "no", "No", "NO"],
}


def read(path, start, count, header, specs, delimiter):
    """Records from byte ``start`` (``count`` of them, or to the end with -1) of a CSV file with
    the columns ``header`` and the declared ``specs``, as record batches; None where pyarrow
    cannot be sure to give what the record path gives (a cell it cannot parse, a record of other
    width, a null where the field takes none, an array or float16 column)."""
    if any(s.get("shape") or s["type"] == "float16" for s in specs.values()):
        return None
    arrow = to_arrow_schema(dict(specs))
    types = {n: pa.string() if specs[n]["type"] == "bytes" else arrow.field(n).type for n in header}
    source = pa.OSFile(path)
    source.seek(start)
    try:
        reader = pacsv.open_csv(
            source,
            read_options=pacsv.ReadOptions(column_names=list(header), block_size=4 << 20),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter, newlines_in_values=True, ignore_empty_lines=False
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=types, null_values=[""], strings_can_be_null=False, **BOOLS
            ),
        )
        batches, rows = [], 0
        while count < 0 or rows < count:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            batches.append(batch)
            rows += batch.num_rows
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    finally:
        source.close()
    table = pa.Table.from_batches(batches, schema=reader.schema)
    table = table.slice(0, count) if count >= 0 else table
    if any(table.column(n).null_count for n in header if not specs[n].get("nullable")):
        return None
    return table.select(list(specs)).to_batches()  # as read: no column is joined past 2 GiB
