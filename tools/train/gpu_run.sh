#!/usr/bin/env bash
# The device run: trains pocket-mini and its drafts on one CUDA GPU from the carried
# .train/ folder (tools/train/pack_carry.sh fills it) and leaves at most 8 files in $OUT:
#   pack-NN.safetensors (f16, each < 15 MB; target, plain draft and DFlash draft)
#   configs.json, log.json, console.txt
#   bash tools/train/gpu_run.sh --smoke          # whole pipeline, about 45 s
#   bash tools/train/gpu_run.sh [TARGET_MIN [DRAFT_MIN [DFLASH_MIN]]]   # default 5 1 1.5
# Extra train.py flags may follow after `--`. Needs only python3 with torch, transformers,
# tokenizers, safetensors, numpy (no network, no torch.compile).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
[ -f .train/data/train.bin ] && [ -f .train/tokenizer/tokenizer.json ] || {
  echo "gpu_run.sh: .train/ is missing (run tools/train/pack_carry.sh and carry .train)" >&2; exit 1; }
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
python3 -c 'import torch, transformers, tokenizers, safetensors, numpy; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
SMOKE=()
if [ "${1:-}" = "--smoke" ]; then SMOKE=(--smoke); shift; fi
M=${1:-5}; D=${2:-1}; F=${3:-1.5}
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
# the GPU configuration: the shipped shape with the wider FFN, longer windows, big batches
python3 tools/train/train.py --data .train/data --tokenizer .train/tokenizer --out "$OUT" --device cuda \
  --hidden 256 --layers 8 --heads 4 --kv-heads 2 --head-dim 64 --ffn 1024 \
  --seq-len 512 --batch 64 --lr 3e-3 --max-epochs 12 --evals 20 --eval-windows 128 \
  --draft-layers 2 --dflash-layers 2 --block-size 8 --blocks-per-seq 16 \
  --minutes "$M" --draft-minutes "$D" --dflash-minutes "$F" "${SMOKE[@]}" "$@" 2>&1 | tee "$OUT/console.txt"
ls -l "$OUT"
n=$(ls "$OUT" | wc -l)
[ "$n" -le 8 ] || { echo "gpu_run.sh: $n files in \$OUT (limit 8)" >&2; exit 1; }
