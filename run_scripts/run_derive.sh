#!/usr/bin/env bash
# Derive a dataset from a dataset: each row of INPUT (a recordmill dataset or Parquet files)
# through FUNCTION (FILE.py or FILE.py:NAME; map(row) -> row, or None to leave the row out).
# Without INPUT it derives from the template's demo dataset (written on first use) with the
# demo's keep_even.py. Add --overwrite to write OUTPUT again, or --append with OUTPUT=INPUT to
# add the derived rows to INPUT as its next version.
set -euo pipefail
# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)

DEMO=${DEMO:-out/demo-data}
if [ -z "${INPUT:-}" ]; then
    INPUT=$DEMO/template-dataset
    [ -e "$DEMO/derive" ] || python -m recordmill demo-data "$DEMO"
    [ -e "$INPUT" ] || python "$CLONE/writer.py" --script "$CLONE/templates/template" \
        --output "$INPUT" --partitions 2 --workers 0 --quiet
fi
FUNCTION=${FUNCTION:-$DEMO/derive/keep_even.py}
OUTPUT=${OUTPUT:-out/derive}

python "$CLONE/writer.py" \
    --script derive \
    --input "$INPUT" \
    --function "$FUNCTION" \
    --output "$OUTPUT" \
    --partitions 2 \
    "$@"
