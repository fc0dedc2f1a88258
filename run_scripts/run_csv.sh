#!/usr/bin/env bash
# Convert CSV or JSON Lines files (a file or a folder of them) with a YAML schema. Without INPUT
# it uses the demo table (made on first use).
# Add --overwrite to write OUTPUT again.
set -euo pipefail
# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)

DEMO=${DEMO:-out/demo-data}
if [ -z "${INPUT:-}" ]; then
    INPUT=$DEMO/table.csv
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$INPUT" ] || python -m recordmill demo-data "$DEMO"
    SCHEMA=${SCHEMA:-$DEMO/table.schema.yaml}
fi
SCHEMA=${SCHEMA:-}               # optional: column -> type; default: inferred
OUTPUT=${OUTPUT:-out/csv}

python "$CLONE/writer.py" \
    --script csv \
    --input "$INPUT" \
    ${SCHEMA:+--schema "$SCHEMA"} \
    --rows-per-task 50 \
    --output "$OUTPUT" \
    --partitions 2 \
    "$@"
