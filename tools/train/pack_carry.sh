#!/usr/bin/env bash
# Fill .train/ (repo root, git-ignored) with what tools/train/gpu_run.sh reads on the
# device machine, where nothing else of ours exists:
#   .train/tokenizer/tokenizer.json, tokenizer_config.json   the pruned 64K tokenizer
#   .train/data/train.bin, heldout_zh.bin, heldout_en.bin, meta.json   prepare.py's output
# The corpus split comes from tools/corpus/make_corpus.py (run here if build/corpus is
# missing); tokenization from tools/train/prepare.py with the venv's `tokenizers`.
#   bash tools/train/pack_carry.sh [TOKENIZER_DIR]   (default /work/artifacts/qwen3-64k)
set -euo pipefail
cd "$(dirname "$0")/../.."
TOK=${1:-/work/artifacts/qwen3-64k}
PY=${PYTHON:-build/train-venv/bin/python}
[ -f "$TOK/tokenizer.json" ] || { echo "pack_carry.sh: no $TOK/tokenizer.json" >&2; exit 1; }
[ -f build/corpus/train_zh.txt ] || python3 tools/corpus/make_corpus.py
rm -rf .train
mkdir -p .train/tokenizer .train/data
cp "$TOK/tokenizer.json" .train/tokenizer/
[ -f "$TOK/tokenizer_config.json" ] && cp "$TOK/tokenizer_config.json" .train/tokenizer/
"$PY" tools/train/prepare.py --tokenizer .train/tokenizer --corpus build/corpus --out .train/data
du -ab .train | sort -k2
du -sh .train
