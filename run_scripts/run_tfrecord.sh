#!/usr/bin/env bash
# Convert TFRecord files of tf.train.Example (a file or a folder of them), without TensorFlow.
# Without INPUT it uses the demo files (made on first use).
# Add --overwrite to write OUTPUT again.
set -euo pipefail
# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)

DEMO=${DEMO:-out/demo-data}
if [ -z "${INPUT:-}" ]; then
    INPUT=$DEMO/tfrecord
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$INPUT" ] || python -m recordmill demo-data "$DEMO"
fi
OUTPUT=${OUTPUT:-out/tfrecord}

python "$CLONE/writer.py" \
    --script tfrecord \
    --input "$INPUT" \
    --output "$OUTPUT" \
    --partitions 2 \
    "$@"
