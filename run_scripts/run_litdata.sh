#!/usr/bin/env bash
# Convert a LitData optimized dataset (the folder of index.json and chunk-*.bin files that
# litdata.optimize wrote), without litdata or torch: one row an item.
# Without INPUT it uses the demo files (made on first use).
# Add --overwrite to write OUTPUT again.
set -euo pipefail
# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)

DEMO=${DEMO:-out/demo-data}
if [ -z "${INPUT:-}" ]; then
    INPUT=$DEMO/litdata
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$INPUT" ] || python -m recordmill demo-data "$DEMO"
fi
OUTPUT=${OUTPUT:-out/litdata}

python "$CLONE/writer.py" \
    --script litdata \
    --input "$INPUT" \
    --output "$OUTPUT" \
    --partitions 2 \
    "$@"
