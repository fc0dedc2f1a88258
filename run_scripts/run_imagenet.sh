#!/usr/bin/env bash
# Convert an ImageNet-style folder (one sub-folder per class) with the built-in imagenet plugin.
# Written in the seed's MindRecord flag names, which writer.py accepts unchanged.
# Without IMAGE_DIR it converts the demo images (made on first use by `recordmill demo-data`).
# Add --overwrite to write OUTPUT again.
set -euo pipefail
# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)

DEMO=${DEMO:-out/demo-data}
if [ -z "${IMAGE_DIR:-}" ]; then
    IMAGE_DIR=$DEMO/images
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$IMAGE_DIR" ] || python -m recordmill demo-data "$DEMO"
    LABEL_FILE=${LABEL_FILE:-$DEMO/labels.txt}
fi
LABEL_FILE=${LABEL_FILE:-}       # optional: lines of "n02119789 0 [class name]"
OUTPUT=${OUTPUT:-out/imagenet}

python "$CLONE/writer.py" \
    --mindrecord_script imagenet \
    --mindrecord_file "$OUTPUT" \
    --mindrecord_partitions 4 \
    --mindrecord_workers "$(nproc)" \
    --image-dir "$IMAGE_DIR" \
    ${LABEL_FILE:+--label-file "$LABEL_FILE"} \
    "$@"
