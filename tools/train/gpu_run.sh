#!/usr/bin/env bash
# The device run: trains pocket-mini and its drafts on one CUDA GPU from the carried
# .train/ folder (tools/train/pack_carry.sh fills it) and leaves at most 8 files in $OUT:
#   pack-NN.safetensors (f16, each < 15 MB; target, plain draft and DFlash draft)
#   configs.json, log.json, console.txt
#   bash tools/train/gpu_run.sh --smoke          # whole pipeline, about 45 s
#   bash tools/train/gpu_run.sh [TOTAL_MIN [TARGET_MIN [DRAFT_MIN [DFLASH_MIN]]]]   # default 7.5 4.5 1 2
# TOTAL_MIN bounds the whole train.py run (start to files written, not counting the
# ~10 s of imports); the target stops at TARGET_MIN or at --max-epochs, whichever is
# first, and the time left is shared by the two drafts in the ratio DRAFT_MIN:DFLASH_MIN.
# Extra train.py flags may follow (after an optional `--`), e.g. `-- --ffn 1024`. Needs only python3 with torch, transformers,
# tokenizers, safetensors, numpy (no network, no torch.compile).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
[ -f .train/data/train.bin ] && [ -f .train/tokenizer/tokenizer.json ] || {
  echo "gpu_run.sh: .train/ is missing (run tools/train/pack_carry.sh and carry .train)" >&2; exit 1; }
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
"${PYTHON:-python3}" -c 'import torch, transformers, tokenizers, safetensors, numpy; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
SMOKE=()
if [ "${1:-}" = "--smoke" ]; then SMOKE=(--smoke); shift; fi
NUM=()
while [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+([.][0-9]+)?$ ]]; do NUM+=("$1"); shift; done
TOT=${NUM[0]:-7.5}; M=${NUM[1]:-4.5}; D=${NUM[2]:-1}; F=${NUM[3]:-2}
[ "${1:-}" = "--" ] && shift
# the GPU configuration: the shipped shape (f16 folder + INT4 file must stay under ~60 MB with
# the 64K vocabulary, so width and depth are fixed by that), longer windows, big batches, many
# epochs with the best held-out state kept, and 2-layer drafts
"${PYTHON:-python3}" tools/train/train.py --data .train/data --tokenizer .train/tokenizer --out "$OUT" --device "${DEVICE:-cuda}" \
  --hidden 256 --layers 8 --heads 4 --kv-heads 2 --head-dim 64 --ffn 768 \
  --seq-len 512 --batch 64 --lr 3e-3 --max-epochs 8 --evals 16 --eval-windows 128 \
  --draft-layers 2 --dflash-layers 2 --block-size 8 --blocks-per-seq 32 --dflash-gamma 4 \
  --total-minutes "$TOT" --minutes "$M" --draft-minutes "$D" --dflash-minutes "$F" "${SMOKE[@]}" "$@" 2>&1 | tee "$OUT/console.txt"
ls -l "$OUT"
n=$(ls "$OUT" | wc -l)
if [ "$n" -gt 8 ]; then rm -f "$OUT/console.txt"; n=$((n - 1)); fi  # log.json has it all
[ "$n" -le 8 ] || { echo "gpu_run.sh: $n files in \$OUT (limit 8)" >&2; exit 1; }
