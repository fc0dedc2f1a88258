#!/usr/bin/env bash
# Convert an ImageNet-style folder (one sub-folder per class) with the built-in imagenet plugin.
# Written in the seed's MindRecord flag names, which writer.py accepts unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE_DIR=${IMAGE_DIR:?set IMAGE_DIR to the folder holding the class sub-folders}
LABEL_FILE=${LABEL_FILE:-}       # optional: lines of "n02119789 0"
OUTPUT=${OUTPUT:-out/imagenet}

python writer.py \
    --mindrecord_script imagenet \
    --mindrecord_file "$OUTPUT" \
    --mindrecord_partitions 8 \
    --mindrecord_workers "$(nproc)" \
    --image-dir "$IMAGE_DIR" \
    ${LABEL_FILE:+--label-file "$LABEL_FILE"} \
    "$@"
