#!/usr/bin/env bash
# The decision-head accuracy table (docs/decision_head.md): each data set with
# the model's hidden-state features and with a bag-of-tokens baseline trained
# by the same trainer on the same tokens. Writes one JSON report per run into
# OUT and prints the markdown table (bench/heads/make_table.py).
#
# usage: bench/heads/accuracy_table.sh POCKET OUT [stories|zh|mini|gemma|all]
#   POCKET  the pocket CLI;  OUT  a folder for data, models and reports
# Environment: SHARED (default ../shared), THREADS (default 2),
#   ZH_TRAIN / ZH_VAL / ZH_TEST: examples per split for the full-shape model (default 1000 / 300 / 500),
#   also the English subsamples of `gemma`;
#   GEMMA: the Gemma 3 270M file for `gemma` (default: the cached Q4_K_M GGUF).
set -euo pipefail
pocket=$(realpath "$1")
out=$2
what=${3:-all}
here=$(cd "$(dirname "$0")" && pwd)
shared=${SHARED:-$here/../../../shared}
threads=${THREADS:-2}
zt=${ZH_TRAIN:-1000} zv=${ZH_VAL:-300} zs=${ZH_TEST:-500}
mkdir -p "$out/data" "$out/reports" "$out/heads"
[ -f "$out/data/clinc150_train.jsonl" ] || python3 "$here/prepare_data.py" "$shared/data" "$out/data"
cache=$out/feature-cache

# run NAME MODEL_ARGS... -- TRAIN_ARGS...: hidden features, then the bag-of-tokens baseline.
run() {
  local name=$1; shift
  local model=() args=()
  while [ "$1" != "--" ]; do model+=("$1"); shift; done; shift
  args=("$@")
  for kind in hidden tokens; do
    local rep=$out/reports/$name.$kind.json
    [ -s "$rep" ] && continue
    echo "== $name ($kind)" >&2
    "$pocket" train-head "${model[@]}" -t "$threads" --features "$kind" --cache-dir "$cache" \
      -o "$out/heads/$name.$kind.head" --json "${args[@]}" > "$rep.tmp"
    mv "$rep.tmp" "$rep"
  done
}

d=$out/data
if [ "$what" = stories ] || [ "$what" = all ]; then
  st=(-m "$shared/models/stories260K.bin" --tokenizer "$shared/models/tok512.bin")
  run stories-clinc150 "${st[@]}" -- --data "$d/clinc150_train.jsonl" --val "$d/clinc150_val.jsonl" --test "$d/clinc150_test.jsonl" --oos-label oos
  run stories-snips "${st[@]}" -- --data "$d/snips_train.jsonl" --val "$d/snips_val.jsonl" --test "$d/snips_test.jsonl"
  run stories-atis "${st[@]}" -- --data "$d/atis_train.jsonl" --val "$d/atis_val.jsonl" --test "$d/atis_test.jsonl"
  run stories-agnews "${st[@]}" -- --data "$d/agnews_train.jsonl" --val "$d/agnews_val.jsonl" --test "$d/agnews_test.jsonl" --max-tokens 128
fi
zh_sets() {  # zh_sets PREFIX MODEL_ARGS...
  local p=$1; shift
  local smp=$shared/data/intent/smp2017_ecdt_task1_intent.tsv tn=$shared/data/zh/fewclue
  local sub=(--max-train "$zt" --max-val "$zv" --max-test "$zs")
  run "$p-smp2017" "$@" -- --data "$smp" --where split=train --val-where split=develop --test-where split=test "${sub[@]}"
  run "$p-tnews" "$@" -- --data "$tn/tnews_train_few_all.json" --val "$tn/tnews_dev_few_all.json" \
    --test "$tn/tnews_test_public.json" --text-col sentence --label-col label_desc "${sub[@]}"
  run "$p-shopping" "$@" -- --data "$d/shopping_train.jsonl" --val "$d/shopping_val.jsonl" --test "$d/shopping_test.jsonl" \
    --max-tokens 64 "${sub[@]}"
  run "$p-waimai" "$@" -- --data "$d/waimai_train.jsonl" --val "$d/waimai_val.jsonl" --test "$d/waimai_test.jsonl" \
    --max-tokens 64 "${sub[@]}"
}
if [ "$what" = zh ] || [ "$what" = all ]; then
  m=$out/pocket-0.3b-qwen3.pq4
  [ -f "$m" ] || "$pocket" create --preset pocket-0.3b --tokenizer "$shared/tokenizers/qwen3" -o "$m" >&2
  zh_sets random03b -m "$m"
fi
if [ "$what" = mini ] || [ "$what" = all ]; then
  zh_sets mini -m "$here/../../models/pocket-mini.pq4"
fi
if [ "$what" = gemma ]; then  # not in `all`: needs scripts/fetch_gemma3.sh's download
  g=(-m "${GEMMA:-$HOME/.cache/pocket/gemma-3-270m-q4_k_m.gguf}")
  sub=(--max-train "$zt" --max-val "$zv" --max-test "$zs")
  zh_sets gemma "${g[@]}"
  run gemma-snips "${g[@]}" -- --data "$d/snips_train.jsonl" --val "$d/snips_val.jsonl" --test "$d/snips_test.jsonl" "${sub[@]}"
  run gemma-agnews "${g[@]}" -- --data "$d/agnews_train.jsonl" --val "$d/agnews_val.jsonl" \
    --test "$d/agnews_test.jsonl" --max-tokens 64 "${sub[@]}"
fi
python3 "$here/make_table.py" "$out/reports"
