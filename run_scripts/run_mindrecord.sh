#!/usr/bin/env bash
# Convert a MindRecord dataset (any shard of it, or a folder), without MindSpore.
# Without INPUT it uses the demo files (made on first use).
set -euo pipefail
cd "$(dirname "$0")/.."

DEMO=${DEMO:-out/demo-data}
if [ -z "${INPUT:-}" ]; then
    INPUT=$DEMO/mindrecord
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$INPUT" ] || python -m recordmill demo-data "$DEMO"
fi
OUTPUT=${OUTPUT:-out/mindrecord}

python writer.py \
    --script mindrecord \
    --input "$INPUT" \
    --output "$OUTPUT" \
    --partitions 2 \
    --overwrite \
    "$@"
