#!/usr/bin/env bash
# Convert TorchRecord's LMDB databases of caffe2 TensorProtos (one database, or a folder of the
# db0/ db1/ ... sub-records its Writer makes), without caffe2. Needs lmdb:
# pip install "recordmill[torchrecord]". Without INPUT it uses the demo databases (made on first use).
# Add --overwrite to write OUTPUT again.
set -euo pipefail
# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)

DEMO=${DEMO:-out/demo-data}
if [ -z "${INPUT:-}" ]; then
    INPUT=$DEMO/torchrecord
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$INPUT" ] || python -m recordmill demo-data "$DEMO"
fi
OUTPUT=${OUTPUT:-out/torchrecord}

python "$CLONE/writer.py" \
    --script torchrecord \
    --input "$INPUT" \
    --output "$OUTPUT" \
    --partitions 2 \
    "$@"
