#!/usr/bin/env bash
# The draft-model drafter against plain decoding: `pocket run` greedy on one
# prompt, plain and `--draft-model` alternated for ROUNDS rounds, the median
# decode tok/s of each and their ratio. Greedy output is the same by
# construction and by test (tests/speculative/test_model_drafter.cpp).
# Usage: bench/speculative_draft_model.sh TARGET DRAFT [ROUNDS] [N] [extra pocket run flags...]
set -euo pipefail
target=$1 draft=$2 rounds=${3:-5} n=${4:-128}
shift $(( $# < 4 ? $# : 4 ))
pocket=${POCKET:-build/release/pocket}
prompt=${PROMPT:-这款手机的电池续航很好，屏幕也很清楚，拍照效果不错，就是}
rate() { sed -n 's/.*generated [0-9]* tokens \([0-9.]*\) tok\/s.*/\1/p' | tail -1; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
plain=() spec=()
for ((r = 1; r <= rounds; r++)); do
  plain+=("$("$pocket" run -m "$target" -p "$prompt" -n "$n" --temp 0 -t 2 --ignore-eos "$@" 2>&1 >/dev/null | rate)")
  out=$("$pocket" run -m "$target" -p "$prompt" -n "$n" --temp 0 -t 2 --ignore-eos --draft-model "$draft" "$@" 2>&1 >/dev/null)
  spec+=("$(rate <<<"$out")")
  stats=$(grep -o '\[speculative[^]]*\]' <<<"$out" | tail -1)
  echo "round $r: plain ${plain[-1]} tok/s, draft-model ${spec[-1]} tok/s  $stats"
done
p=$(printf '%s\n' "${plain[@]}" | median) s=$(printf '%s\n' "${spec[@]}" | median)
echo "median plain $p tok/s, draft-model $s tok/s, speed-up $(awk -v a="$s" -v b="$p" 'BEGIN {printf "%.2f", a / b}')x"
