#!/usr/bin/env bash
# Quality of Gemma 3 270M with its vocabulary pruned to 64K (issue 17), on
# the same text for both: the first whole documents of each held-out split
# (about 4,200 zh / 11,500 en characters, ~3,000 tokens each;
# build/prune/heldout_{zh,en}_head.txt). Every token of the file is scored:
#   * `pocket eval -m PRUNED --ref ORIGINAL --ref-map MAP`: the pruned
#     tokenization, the original run on it through the map (KL over kept
#     tokens, reference renormalised; reference perplexity over its full
#     vocabulary; its probability on dropped tokens);
#   * `pocket eval -m ORIGINAL`: the original on its own tokenization.
# nats per character compare the two tokenizations on identical text.
# Writes build/prune/eval_{mapped,original}_{zh,en}.json.
#   bash bench/prune_gemma3_eval.sh [ORIGINAL.gguf] [PRUNED.gguf]
set -euo pipefail
cd "$(dirname "$0")/.."
orig=${1:-$HOME/.cache/pocket/gemma-3-270m-q4_k_m.gguf}
pruned=${2:-build/prune/gemma-3-270m-64k.gguf}
map="${pruned%.gguf}.vocab_map.json"
python3 - <<'PY'
for lang, limit in (("zh", 4200), ("en", 11500)):
    out, n = [], 0
    for line in open(f"build/corpus/heldout_{lang}.txt", encoding="utf-8"):
        if n + len(line) > limit:
            break
        out.append(line)
        n += len(line)
    open(f"build/prune/heldout_{lang}_head.txt", "w", encoding="utf-8").write("".join(out))
PY
for lang in zh en; do
  text=build/prune/heldout_${lang}_head.txt
  build/release/pocket eval -m "$pruned" --ref "$orig" --ref-map "$map" -f "$text" -t 2 --json \
    > build/prune/eval_mapped_$lang.json
  build/release/pocket eval -m "$orig" -f "$text" -t 2 --json > build/prune/eval_original_$lang.json
done
