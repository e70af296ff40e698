#!/usr/bin/env bash
# ctest of the ARM cost model (aarch64 cross builds): instructions per
# prefilled token in the q4 matmuls of one layer of a small shape
# (tests/kernels/test_arm_cost_workload.cpp), counted under qemu-aarch64 by
# the insn_count plugin beside this script: (40 tokens - 8 tokens) / 32, so
# building the weights and start-up cancel. One thread, so the counts are
# exact and repeatable, and a bound catches a regression of the ARM GEMM
# (or of the activation quantization it runs) without timing anything.
#
#   tools/qemu/arm_cost_test.sh POCKET_TESTS_KERNELS CPU=BOUND_M [CPU=BOUND_M...]
#
# Fails when a CPU model's count is above its bound (millions of
# instructions per token); exits 77 (ctest: skipped) with a message when
# qemu-aarch64, a host C compiler or plugin support is missing.
set -euo pipefail
tests=${1:?usage: arm_cost_test.sh POCKET_TESTS_KERNELS CPU=BOUND_M...}
shift
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIPPED: $*"; exit 77; }
command -v qemu-aarch64 >/dev/null || skip "qemu-aarch64 not found (Debian: qemu-user)"
cc=${CC_FOR_BUILD:-cc}
command -v "$cc" >/dev/null || skip "no host C compiler ($cc) for the qemu plugin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cc" -O2 -shared -fPIC -fvisibility=hidden -o "$tmp/insn_count.so" "$here/insn_count.c" ||
  skip "the qemu plugin did not build"
export QEMU_LD_PREFIX=${QEMU_LD_PREFIX:-/usr/aarch64-linux-gnu}
count() {  # cpu tokens -> guest instructions
  local out
  out=$(POCKET_ARM_COST_TOKENS=$2 QEMU_CPU=$1 qemu-aarch64 -plugin "$tmp/insn_count.so" "$tests" \
    --gtest_filter=ArmCost.PrefillWorkload 2>&1) || { echo "$out" | tail -20 >&2; return 1; }
  sed -n 's/^guest instructions: //p' <<<"$out"
}
# Plugin support (QEMU >= 4.2, built with plugins): one trial run.
[[ -n "$(count max 1 2>/dev/null)" ]] || skip "qemu-aarch64 cannot load the plugin (QEMU >= 4.2 with plugin support needed)"
fail=0
for spec in "$@"; do
  cpu=${spec%%=*} bound=${spec#*=}
  small=$(count "$cpu" 8) big=$(count "$cpu" 40)
  verdict=$(python3 -c 'import sys; s, b, bound = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
per = (b - s) / 32 / 1e6
print(f"{per:.3f} M instructions per prefilled token (bound {bound:.3f} M): " + ("ok" if per <= bound else "ABOVE THE BOUND"))' \
    "$small" "$big" "$bound")
  echo "QEMU_CPU=$cpu: $verdict"
  [[ $verdict == *ok ]] || fail=1
done
exit "$fail"
