#!/usr/bin/env bash
# Convert MNIST idx files (train-images-idx3-ubyte[.gz] and its labels). Without DATA_DIR it
# uses the demo files (made on first use).
# Add --overwrite to write OUTPUT again.
set -euo pipefail
# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)

DEMO=${DEMO:-out/demo-data}
if [ -z "${DATA_DIR:-}" ]; then
    DATA_DIR=$DEMO/mnist
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$DATA_DIR" ] || python -m recordmill demo-data "$DEMO"
fi
OUTPUT=${OUTPUT:-out/mnist}

python "$CLONE/writer.py" \
    --script mnist \
    --data-dir "$DATA_DIR" \
    --split train \
    --output "$OUTPUT" \
    --partitions 2 \
    "$@"
