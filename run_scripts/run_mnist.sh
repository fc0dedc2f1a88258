#!/usr/bin/env bash
# Convert MNIST idx files (train-images-idx3-ubyte[.gz] and its labels). Without DATA_DIR it
# uses the demo files (made on first use).
set -euo pipefail
cd "$(dirname "$0")/.."

DEMO=${DEMO:-out/demo-data}
if [ -z "${DATA_DIR:-}" ]; then
    DATA_DIR=$DEMO/mnist
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$DATA_DIR" ] || python -m recordmill demo-data "$DEMO"
fi
OUTPUT=${OUTPUT:-out/mnist}

python writer.py \
    --script mnist \
    --data-dir "$DATA_DIR" \
    --split train \
    --output "$OUTPUT" \
    --partitions 2 \
    --overwrite \
    "$@"
