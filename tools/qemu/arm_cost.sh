#!/usr/bin/env bash
# ARM cost model: guest instructions per decoded and per prefilled token of
# an aarch64 `pocket` under qemu-aarch64, on each ARM kernel level's CPU
# model (cortex-a53: NEON; cortex-a76: dotprod; max: i8mm), counted by the
# insn_count plugin beside this script. Single thread, greedy, EOS ignored,
# so the counts are deterministic. Speed cannot be measured under emulation;
# instruction counts can, and compare levels, changes and engines.
#
#   tools/qemu/arm_cost.sh POCKET_AARCH64 MODEL [CPU...]
#
# Decode: (short prompt + 33 generated) - (short prompt + 1), per token.
# Prefill: (long prompt + 1) - (short prompt + 1), per extra prompt token
# (token counts as the run reports them). ARM_COST_SHORT / ARM_COST_LONG
# replace the two prompts (e.g. 8 and 64 bytes for a byte-level vocabulary,
# to match llama-bench's pp8 / pp64).
set -euo pipefail
pocket=${1:?usage: arm_cost.sh POCKET_AARCH64 MODEL [CPU...]}
model=${2:?model}
shift 2
cpus=("$@")
[[ ${#cpus[@]} -gt 0 ]] || cpus=(cortex-a53 cortex-a76 max)
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -shared -fPIC -fvisibility=hidden -o "$tmp/insn_count.so" "$here/insn_count.c"
export QEMU_LD_PREFIX=${QEMU_LD_PREFIX:-/usr/aarch64-linux-gnu}
short=${ARM_COST_SHORT:-"one two three four five six seven"}
long=${ARM_COST_LONG:-"$(for i in $(seq 1 8); do printf '%s ' $short; done)"}
count() {  # cpu, prompt, tokens -> "instructions prompt_tokens"
  local out
  out=$(QEMU_CPU=$1 qemu-aarch64 -plugin "$tmp/insn_count.so" "$pocket" run -m "$model" -t 1 --temp 0 --ignore-eos \
    -p "$2" -n "$3" 2>&1 >/dev/null)
  echo "$(sed -n 's/^guest instructions: //p' <<<"$out") $(sed -n 's/.*\[prompt \([0-9]*\) tokens.*/\1/p' <<<"$out")"
}
printf '| CPU model (level) | instructions per decoded token | per prefilled token |\n|---|---|---|\n'
for cpu in "${cpus[@]}"; do
  python3 -c 'import sys; (b, bp), (d, _), (p, pp) = [map(int, a.split()) for a in sys.argv[2:5]]
print(f"| {sys.argv[1]} | {(d - b) / 32 / 1e6:.2f} M | {(p - b) / (pp - bp) / 1e6:.2f} M |")' \
    "$cpu" "$(count "$cpu" "$short" 1)" "$(count "$cpu" "$short" 33)" "$(count "$cpu" "$long" 1)"
done
