#!/usr/bin/env bash
# Convert the images named by an im2rec .lst file (or TorchRecord "path label" lines), here
# decoded to 224 x 224 RGB tensors. Without LIST it uses the demo list (made on first use).
set -euo pipefail
cd "$(dirname "$0")/.."

DEMO=${DEMO:-out/demo-data}
if [ -z "${LIST:-}" ]; then
    LIST=$DEMO/images_train.lst
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$LIST" ] || python -m recordmill demo-data "$DEMO"
    ROOT=$DEMO/images
fi
OUTPUT=${OUTPUT:-out/filelist}

python writer.py \
    --script filelist \
    --list "$LIST" \
    ${ROOT:+--root "$ROOT"} \
    --encode tensor --size 224 \
    --output "$OUTPUT" \
    --partitions 2 \
    --overwrite \
    "$@"
