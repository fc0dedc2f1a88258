#!/usr/bin/env bash
# Run a plugin folder (the template by default): the same call as `python writer.py ...`, kept in
# a wrapper. For your own plugin, copy this file to run_xyz.sh and set SCRIPT (or run it as
# SCRIPT=path/to/xyz bash run_scripts/run_template.sh). Your plugin's own options go after it:
#   bash run_scripts/run_xyz.sh --rows-per-task 50
# so the copy works for any plugin, whatever options it has. It never replaces a dataset by
# itself: add --overwrite to write OUTPUT again, or --append to add a version to it.
set -euo pipefail

# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)
SCRIPT=${SCRIPT:-templates/template}  # a plugin folder, a .py file, or a plugin name
# A plugin folder beside the template in the clone is found from any folder too.
if [ ! -e "$SCRIPT" ] && [ -e "$CLONE/$SCRIPT" ]; then SCRIPT=$CLONE/$SCRIPT; fi
OUTPUT=${OUTPUT:-out/$(basename "$SCRIPT" .py)}  # the output folder
PARTITIONS=${PARTITIONS:-4}          # number of output files
WORKERS=${WORKERS:-2}                # worker processes (0: in this process, to debug)

python "$CLONE/writer.py" \
    --script "$SCRIPT" \
    --output "$OUTPUT" \
    --partitions "$PARTITIONS" \
    --workers "$WORKERS" \
    "$@"
