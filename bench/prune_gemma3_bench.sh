#!/usr/bin/env bash
# Speed and memory of Gemma 3 270M before and after vocabulary pruning
# (issue 17), side by side: ROUNDS rounds, each `pocket bench --runs 1`
# (one warm-up + one measured run, 512-token prefill, 128-token decode,
# 2 threads) on the original then the pruned file, alternating; each round a
# fresh process (so peak RSS is per run). Prints the medians over the rounds
# and writes every run's JSON to build/prune/bench_{orig,pruned}_N.json.
#   bash bench/prune_gemma3_bench.sh [ORIGINAL.gguf] [PRUNED.gguf] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
orig=${1:-$HOME/.cache/pocket/gemma-3-270m-q4_k_m.gguf}
pruned=${2:-build/prune/gemma-3-270m-64k.gguf}
rounds=${3:-5}
mkdir -p build/prune
for i in $(seq 1 "$rounds"); do
  for which in orig pruned; do
    f=$orig; [ "$which" = pruned ] && f=$pruned
    build/release/pocket bench -m "$f" -t 2 -p 512 -n 128 --runs 1 --json > build/prune/bench_${which}_$i.json 2>/dev/null
    echo "round $i $which: $(date -u +%H:%M:%S) $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["prefill_tok_s"]["median"], j["decode_tok_s"]["median"], j["peak_rss_increase_mb"])' build/prune/bench_${which}_$i.json)"
  done
done
python3 - "$rounds" <<'PY'
import json, statistics, sys
n = int(sys.argv[1])
for which in ("orig", "pruned"):
    js = [json.load(open(f"build/prune/bench_{which}_{i}.json")) for i in range(1, n + 1)]
    def col(f):
        v = [f(j) for j in js]
        return f"{statistics.median(v):.1f} [{min(v):.1f}, {max(v):.1f}]"
    print(which, js[0]["model"], "file", js[0]["file_size_bytes"], "bytes")
    print("  prefill 512 tok/s", col(lambda j: j["prefill_tok_s"]["median"]))
    print("  decode 128 tok/s ", col(lambda j: j["decode_tok_s"]["median"]))
    print("  peak RSS increase MB", col(lambda j: j["peak_rss_increase_mb"]))
    print("  bytes/token MB", col(lambda j: j["bytes_per_token"] / 1e6))
    print("  load to first token s", col(lambda j: j["load_to_first_token_s"]))
    print("  bandwidth GB/s", col(lambda j: j["bandwidth_bytes_s"] / 1e9))
PY
