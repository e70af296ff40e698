#!/usr/bin/env bash
# Sets up dependencies and builds the Release library, CLI, tests and
# benchmarks into build/release (through ccache when it is installed).
#   scripts/build.sh [extra cmake args]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/lib.sh"
bash "$root/scripts/setup.sh"
cmake -S "$root" -B "$root/build/release" -G Ninja -DCMAKE_BUILD_TYPE=Release $(ccache_launcher) "$@" >/dev/null
cmake --build "$root/build/release" -j"${JOBS:-$(nproc)}"
