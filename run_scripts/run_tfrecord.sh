#!/usr/bin/env bash
# Convert TFRecord files of tf.train.Example (a file or a folder of them), without TensorFlow.
# Without INPUT it uses the demo files (made on first use).
set -euo pipefail
cd "$(dirname "$0")/.."

DEMO=${DEMO:-out/demo-data}
if [ -z "${INPUT:-}" ]; then
    INPUT=$DEMO/tfrecord
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$INPUT" ] || python -m recordmill demo-data "$DEMO"
fi
OUTPUT=${OUTPUT:-out/tfrecord}

python writer.py \
    --script tfrecord \
    --input "$INPUT" \
    --output "$OUTPUT" \
    --partitions 2 \
    --overwrite \
    "$@"
