#!/usr/bin/env bash
# The whole test suite: Release build, ASan+UBSan build, and the aarch64
# cross build under qemu (NEON, dotprod and i8mm cores).
#   scripts/test.sh            everything
#   scripts/test.sh --quick    Release only
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="${JOBS:-$(nproc)}"
bash "$root/scripts/setup.sh"

echo "== Release build and tests"
bash "$root/scripts/build.sh"
ctest --test-dir "$root/build/release" --output-on-failure -j"$jobs"
[ "${1:-}" = "--quick" ] && exit 0

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
cmake -S "$root" -B "$root/build/asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPOCKET_SANITIZE=ON \
  -DPOCKET_BUILD_BENCH=OFF >/dev/null
cmake --build "$root/build/asan" -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir "$root/build/asan" --output-on-failure -j"$jobs"

echo "== aarch64 cross build, tests under qemu"
bash "$root/scripts/cross-aarch64.sh" "$root/build/aarch64"
