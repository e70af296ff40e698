#!/usr/bin/env bash
# The Python package (bindings/python) built and tested the way a user installs
# it (test.sh stage "bindings"): a virtual environment in build/bindings-venv
# with the pinned build and test packages (bindings/python/requirements-test.txt),
# libpocket installed from BUILD_DIR into build/bindings-prefix (so the wheel
# reuses the library already built instead of compiling it again), then
# `pip install bindings/python` and pytest on stories260K. Without PyPI the
# stage says so and stops with success. (The Java binding is a ctest test of
# the release stage.)
#   scripts/bindings.sh [BUILD_DIR]     (default build/release)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/lib.sh"
build="${1:-$root/build/release}"
venv="$root/build/bindings-venv"
req="$root/bindings/python/requirements-test.txt"
if ! pinned_venv "$venv" "$req"; then
  echo "bindings: SKIPPED: could not install bindings/python/requirements-test.txt from PyPI (no network?);"
  echo "bindings: the Java binding and the C API were still tested in the release stage"
  exit 0
fi

prefix="$root/build/bindings-prefix"
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
 --config-settings=cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache)
# The build packages are pinned in the venv already: no build isolation.
"$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall \
  --config-settings=build-dir="$root/build/bindings-wheel" --config-settings=cmake.define.CMAKE_PREFIX_PATH="$prefix" "${launcher[@]}" \
  "$root/bindings/python"
# Run from outside the source tree so `import pocket` is the installed package.
cd "$root/build"
POCKET_TEST_MODEL="${POCKET_TEST_MODEL:-$root/../shared/models/stories260K.bin}" POCKET_ROOT="$root" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/bindings/python/tests"
