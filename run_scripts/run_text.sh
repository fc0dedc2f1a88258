#!/usr/bin/env bash
# Convert a text corpus (JSON Lines, Parquet or plain text: files, folders or globs). With
# TOKENIZER (a Hugging Face tokenizer.json; pip install "recordmill[text]") the documents become
# token ids, EOS appended; without it the text is stored. Without INPUT it uses the demo corpus
# (made on first use).
# Add --overwrite to write OUTPUT again.
set -euo pipefail
# Paths are taken from the folder you run it in; writer.py from the clone this script is in.
CLONE=$(cd "$(dirname "$0")/.." && pwd)

DEMO=${DEMO:-out/demo-data}
if [ -z "${INPUT:-}" ]; then
    INPUT=$DEMO/text/corpus.jsonl
    # Made on first use, and again when an older demo folder lacks these inputs.
    [ -e "$INPUT" ] || python -m recordmill demo-data "$DEMO"
fi
TOKENIZER=${TOKENIZER:-}         # optional: tokenizer.json; default: store the text
EOS=${EOS:-}                     # optional with TOKENIZER: the end-of-document token
OUTPUT=${OUTPUT:-out/text}

python "$CLONE/writer.py" \
    --script text \
    --input "$INPUT" \
    --keep id \
    ${TOKENIZER:+--tokenizer "$TOKENIZER"} \
    ${EOS:+--eos "$EOS"} \
    --output "$OUTPUT" \
    --partitions 2 \
    "$@"
