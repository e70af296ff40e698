#!/usr/bin/env bash
# pocket_c.h compiles on its own as C99 and as C++ (11 and 20) with every
# warning an error, with each compiler given and clang when installed; the
# C example compiles the same way.
#   header_test.sh SOURCE_DIR CC CXX
set -euo pipefail
src="$1" cc="$2" cxx="$3"
flags=(-Wall -Wextra -Werror -pedantic -I"$src/include")
ccs=("$cc") cxxs=("$cxx")
command -v clang >/dev/null && ccs+=(clang)
command -v clang++ >/dev/null && cxxs+=(clang++)
for c in "${ccs[@]}"; do
  "$c" -std=c99 "${flags[@]}" -fsyntax-only -x c "$src/include/pocket/pocket_c.h"
  "$c" -std=c99 "${flags[@]}" -fsyntax-only "$src/examples/c/example.c"
  echo "ok: $c -std=c99"
done
for c in "${cxxs[@]}"; do
  for std in c++11 c++20; do
    "$c" -std=$std "${flags[@]}" -fsyntax-only -x c++ "$src/include/pocket/pocket_c.h"
    echo "ok: $c -std=$std"
  done
done
