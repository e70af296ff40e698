#!/usr/bin/env bash
# Cross-compile Pocket for aarch64 and run the tests under qemu-user. The
# areas whose code differs per kernel level (kernels, quantization, model
# forward) run on three emulated cores: cortex-a53 (NEON only), cortex-a76
# (+dotprod) and max (+i8mm), so every level the runtime dispatch can pick is
# exercised; every other test runs once, on max.
#   scripts/cross-aarch64.sh [build-dir]     (default: build-aarch64)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build-aarch64}"
jobs="${JOBS:-2}"
source "$root/scripts/lib.sh"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release $(ccache_launcher) \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" -DPOCKET_BUILD_BENCH=OFF \
  -DGTest_FOUND=ON -DCMAKE_PROJECT_pocket_INCLUDE="$root/scripts/cross-aarch64-gtest.cmake"
cmake --build "$build" -j"$jobs"

export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
export POCKET_TEST_EMULATED=1  # tests of ISA-independent slow paths skip (tests/common/test_util.h)
per_level="kernels quant model"
# The nine runs go $jobs at a time (qemu-user is mostly one thread per
# process), the model tests first; logs in $build/logs/, one line per run.
logs="$build/logs"
mkdir -p "$logs"
runs=()
for area in model quant kernels; do
  for cpu in cortex-a53 cortex-a76 max; do
    runs+=("QEMU_CPU=$cpu-pocket_tests_$area" "env QEMU_CPU=$cpu qemu-aarch64 $build/pocket_tests_$area --gtest_brief=1")
  done
done
echo "== per kernel level: pocket_tests_{$per_level} on QEMU_CPU=cortex-a53, cortex-a76, max"
parallel_steps "$jobs" "${runs[@]}"

echo "== QEMU_CPU=max ctest, the areas not run above"
QEMU_CPU=max ctest --test-dir "$build" --output-on-failure -j"$jobs" -LE "^(${per_level// /|})\$"
