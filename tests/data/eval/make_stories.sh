#!/bin/sh
# Regenerates stories260k_samples.txt: 40 stories sampled from the F32
# stories260K model itself (plain temperature-1 sampling: no top-k/top-p/
# min-p, no repetition penalty; seeds 1..40), each started from
# "Once upon a time" and ended at EOS or 400 tokens, separated by blank lines.
# Usage: tests/data/eval/make_stories.sh path/to/pocket > tests/data/eval/stories260k_samples.txt
set -eu
pocket=$1
model=${2:-/work/shared/models/stories260K.bin}
for seed in $(seq 1 40); do
  "$pocket" run -m "$model" -p "Once upon a time" -n 400 --temp 1 --top-k 0 --top-p 1 --min-p 0 \
    --repeat-penalty 1 --seed "$seed" -t 1 -q
  echo
done
