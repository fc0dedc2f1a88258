#!/usr/bin/env bash
# Run a plugin folder (the template by default): the same call as `python writer.py ...`, kept in
# a wrapper. For your own plugin, copy this file to run_xyz.sh and set SCRIPT (or run it as
# SCRIPT=path/to/xyz bash run_scripts/run_template.sh). Your plugin's own options go after it:
#   bash run_scripts/run_xyz.sh --rows-per-task 50
# so the copy works for any plugin, whatever options it has.
set -euo pipefail

SCRIPT=${SCRIPT:-templates/template}  # a plugin folder, a .py file, or a plugin name
# A path from where you are, kept valid across the cd below (the default is the clone's own).
if [ -e "$SCRIPT" ]; then SCRIPT=$(cd "$(dirname "$SCRIPT")" && pwd)/$(basename "$SCRIPT"); fi
cd "$(dirname "$0")/.."
OUTPUT=${OUTPUT:-out/$(basename "$SCRIPT" .py)}  # the output folder
PARTITIONS=${PARTITIONS:-4}          # number of output files
WORKERS=${WORKERS:-2}                # worker processes (0: in this process, to debug)

python writer.py \
    --script "$SCRIPT" \
    --output "$OUTPUT" \
    --partitions "$PARTITIONS" \
    --workers "$WORKERS" \
    --overwrite \
    "$@"
