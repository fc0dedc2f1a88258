#!/usr/bin/env bash
# Convert the images named by an im2rec .lst file (or TorchRecord "path label" lines), here
# decoded to 224 x 224 RGB tensors. Without LIST it uses the demo list (made on first use).
# Add --overwrite to write OUTPUT again.
set -euo pipefail
# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)

DEMO=${DEMO:-out/demo-data}
if [ -z "${LIST:-}" ]; then
    LIST=$DEMO/images_train.lst
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$LIST" ] || python -m recordmill demo-data "$DEMO"
    ROOT=$DEMO/images
fi
OUTPUT=${OUTPUT:-out/filelist}

python "$CLONE/writer.py" \
    --script filelist \
    --list "$LIST" \
    ${ROOT:+--root "$ROOT"} \
    --encode tensor --size 224 \
    --output "$OUTPUT" \
    --partitions 2 \
    "$@"
