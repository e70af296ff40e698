#!/usr/bin/env bash
# Sets up dependencies and builds the Release library, CLI, tests and
# benchmarks into build/release.
#   scripts/build.sh [extra cmake args]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
cmake -S "$root" -B "$root/build/release" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$root/build/release" -j"${JOBS:-$(nproc)}"
