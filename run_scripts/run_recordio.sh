#!/usr/bin/env bash
# Convert MXNet RecordIO files (.rec, with their .idx where present; a file or a folder of them),
# as im2rec writes them, without MXNet. Without INPUT it uses the demo files (made on first use).
# Add --overwrite to write OUTPUT again.
set -euo pipefail
# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)

DEMO=${DEMO:-out/demo-data}
if [ -z "${INPUT:-}" ]; then
    INPUT=$DEMO/recordio
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$INPUT" ] || python -m recordmill demo-data "$DEMO"
fi
OUTPUT=${OUTPUT:-out/recordio}

python "$CLONE/writer.py" \
    --script recordio \
    --input "$INPUT" \
    --output "$OUTPUT" \
    --partitions 2 \
    "$@"
