#!/usr/bin/env bash
# Convert a Hugging Face dataset already on this machine (a save_to_disk folder, or the Parquet/
# Arrow files of a Hub dataset in the local cache), without datasets and without the network.
# Without INPUT it uses the demo files (made on first use).
# Add --overwrite to write OUTPUT again.
set -euo pipefail
# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)

DEMO=${DEMO:-out/demo-data}
if [ -z "${INPUT:-}" ]; then
    INPUT=$DEMO/huggingface
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$INPUT" ] || python -m recordmill demo-data "$DEMO"
fi
OUTPUT=${OUTPUT:-out/huggingface}

python "$CLONE/writer.py" \
    --script huggingface \
    --input "$INPUT" \
    --output "$OUTPUT" \
    --partitions 2 \
    "$@"
