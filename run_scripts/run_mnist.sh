#!/usr/bin/env bash
# Convert MNIST idx files (train-images-idx3-ubyte[.gz] and its labels). Without DATA_DIR it
# uses the demo files (made on first use).
set -euo pipefail
cd "$(dirname "$0")/.."

DEMO=${DEMO:-out/demo-data}
if [ -z "${DATA_DIR:-}" ]; then
    [ -d "$DEMO" ] || python -m recordmill demo-data "$DEMO"
    DATA_DIR=$DEMO/mnist
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
