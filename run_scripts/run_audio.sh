#!/usr/bin/env bash
# Convert a folder of audio files (WAV, FLAC), one sub-folder per class: their bytes, or with
# --decode --rate 16000 mono float32 samples; sample rate, channels and duration as columns.
# Without INPUT it uses the demo files (made on first use).
# Add --overwrite to write OUTPUT again.
set -euo pipefail
# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)

DEMO=${DEMO:-out/demo-data}
if [ -z "${INPUT:-}" ]; then
    INPUT=$DEMO/audio
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$INPUT" ] || python -m recordmill demo-data "$DEMO"
fi
OUTPUT=${OUTPUT:-out/audio}

python "$CLONE/writer.py" \
    --script audio \
    --input "$INPUT" \
    --output "$OUTPUT" \
    --partitions 2 \
    "$@"
