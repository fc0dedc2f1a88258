#!/usr/bin/env bash
# Run the template plugin: the same call as `python writer.py ...`, kept in a wrapper.
# Copy this file to run_xyz.sh for your own plugin and change the values below.
set -euo pipefail
cd "$(dirname "$0")/.."

SCRIPT=templates/template        # a plugin folder, a .py file, or a plugin name
OUTPUT=${OUTPUT:-out/template}   # the output folder
PARTITIONS=4                     # number of output files
WORKERS=${WORKERS:-2}            # worker processes

python writer.py \
    --script "$SCRIPT" \
    --output "$OUTPUT" \
    --partitions "$PARTITIONS" \
    --workers "$WORKERS" \
    --overwrite \
    --tasks 8 \
    --rows-per-task 50 \
    "$@"
