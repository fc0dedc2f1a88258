#!/usr/bin/env bash
# Convert WebDataset .tar shards (a shard, a folder of them, or a brace pattern such as
# "shards/shard-{000000..000009}.tar"), without webdataset: one row a sample.
# Without INPUT it uses the demo files (made on first use).
# Add --overwrite to write OUTPUT again.
set -euo pipefail
# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)

DEMO=${DEMO:-out/demo-data}
if [ -z "${INPUT:-}" ]; then
    INPUT=$DEMO/webdataset
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$INPUT" ] || python -m recordmill demo-data "$DEMO"
fi
OUTPUT=${OUTPUT:-out/webdataset}

python "$CLONE/writer.py" \
    --script webdataset \
    --input "$INPUT" \
    --output "$OUTPUT" \
    --partitions 2 \
    "$@"
