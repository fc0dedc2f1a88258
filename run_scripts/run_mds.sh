#!/usr/bin/env bash
# Convert a MosaicML MDS dataset (the folder of index.json and shard.*.mds files, compressed or
# not), without mosaicml-streaming: one row a sample.
# Without INPUT it uses the demo files (made on first use).
# Add --overwrite to write OUTPUT again.
set -euo pipefail
# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)

DEMO=${DEMO:-out/demo-data}
if [ -z "${INPUT:-}" ]; then
    INPUT=$DEMO/mds
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$INPUT" ] || python -m recordmill demo-data "$DEMO"
fi
OUTPUT=${OUTPUT:-out/mds}

python "$CLONE/writer.py" \
    --script mds \
    --input "$INPUT" \
    --output "$OUTPUT" \
    --partitions 2 \
    "$@"
