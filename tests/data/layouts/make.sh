#!/usr/bin/env bash
# Writes the datasets of earlier layouts beside it, each with the recordmill of its time (a git
# worktree of the commit before the layout changed), from plugin/ (60 rows, 3 partitions, row
# groups of 7 rows, Parquet and Arrow IPC). tests/read/test_layouts.py reads them on every path.
#   before-batch-crc/  written before 5c323fc: no checksums of row groups or batches at all
#   before-group-crc/  written before 5c95999: Arrow batches with a CRC-32 per column
#                      (batch_crc32), no group_offsets / group_crc32c
# Run from the repository's root: bash tests/data/layouts/make.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
declare -A COMMITS=([before-batch-crc]=5c323fc [before-group-crc]=5c95999)
for name in "${!COMMITS[@]}"; do
    old=$(mktemp -d)
    git worktree add -f --detach "$old" "${COMMITS[$name]}^" >/dev/null
    rm -rf "${HERE:?}/$name"
    for fmt in parquet arrow; do
        (cd "$old" && PYTHONPATH=. python writer.py --script "$HERE/plugin" --output "$HERE/$name/$fmt" \
            --partitions 3 --row-group-size 7 --format "$fmt" --quiet)
    done
    rm -f "$HERE/$name"/.*.recordmill-lock
    git worktree remove --force "$old"
done
