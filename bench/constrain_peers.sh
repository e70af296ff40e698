#!/usr/bin/env bash
# Structured output side by side with xgrammar and llguidance (issue 12): the
# pinned peers in build/peers-venv (tools/constrain/peer_requirements.txt),
# then tools/constrain/peer_bench.py on the schema corpus with the Qwen3
# vocabulary (151,669 tokens) and the project's pruned 64K one: compile time,
# mask time per token, agreement of the three masks, keyword probes.
#   bench/constrain_peers.sh [BUILD_DIR] [extra peer_bench.py args, e.g. --steps 32]
# Results: build/peer_bench/<vocabulary>/summary.json and <vocabulary>.txt.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build/release}"
shift || true
source "$root/scripts/lib.sh"
venv="$root/build/peers-venv"
if ! pinned_venv "$venv" "$root/tools/constrain/peer_requirements.txt"; then
  echo "constrain_peers: could not install tools/constrain/peer_requirements.txt from PyPI" >&2
  exit 1
fi
cmake --build "$build" --target bench_constrain_masks >/dev/null
shared="$root/../shared"
mkdir -p "$root/build/peer_bench"
for v in "qwen3:$shared/tokenizers/qwen3/tokenizer.json" "pruned64k:$root/models/pocket-mini/tokenizer.json"; do
  name="${v%%:*}"
  "$venv/bin/python" "$root/tools/constrain/peer_bench.py" --tokenizer "${v#*:}" \
    --pocket "$build/bench_constrain_masks" --out "$root/build/peer_bench/$name" "$@" |
    tee "$root/build/peer_bench/$name.txt"
done
