#!/usr/bin/env bash
# cmake --install into a temporary prefix, then build examples/c against it
# twice (find_package(Pocket) and pkg-config), and run both on the model:
# the reply streams and is cancelled after N pieces.
#   install_test.sh BUILD_DIR SOURCE_DIR MODEL CC "EXTRA_C_FLAGS" ["EXTRA_LINK_FLAGS"]
set -euo pipefail
build="$1" src="$2" model="$3" cc="$4" extra="${5:-}" link_extra="${6:-}"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/pocket-install-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
for f in include/pocket/pocket_c.h include/pocket/pocket.h lib/libpocket.a lib/cmake/Pocket/PocketConfig.cmake \
         lib/cmake/Pocket/PocketConfigVersion.cmake lib/pkgconfig/pocket.pc; do
  [[ -e "$tmp/prefix/$f" ]] || { echo "not installed: $f"; ls -R "$tmp/prefix"; exit 1; }
done
so=$(ls "$tmp/prefix/lib/" | grep -E '^libpocket\.so\.[0-9]+$' || true)
[[ -n "$so" ]] || { echo "no libpocket.so.N installed"; ls "$tmp/prefix/lib"; exit 1; }

check_run() {  # check_run NAME EXE
  local n=5
  "$2" "$model" $n >"$tmp/$1.out" 2>"$tmp/$1.err" || { echo "$1 failed:"; cat "$tmp/$1.err"; exit 1; }
  grep -q "^Once upon a time." "$tmp/$1.out" || { echo "$1 printed no continuation:"; cat "$tmp/$1.out"; exit 1; }
  grep -q ": $n pieces, $n tokens generated, stop: cancelled$" "$tmp/$1.err" ||
    { echo "$1 was not cancelled after $n pieces:"; cat "$tmp/$1.err"; exit 1; }
  echo "$1: $(head -c 200 "$tmp/$1.out" | tr '\n' ' ') | $(cat "$tmp/$1.err")"
}

# find_package(Pocket) from the installed package, only the prefix known.
cmake -S "$src/examples/c" -B "$tmp/example" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="-Werror $extra" -DCMAKE_EXE_LINKER_FLAGS="$extra $link_extra" >"$tmp/configure.log" ||
  { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/example" >"$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
# The executable finds libpocket.so.N through its run path and needs nothing else of Pocket's.
# (ldd's output is read whole first: `ldd | grep -q` under pipefail fails at random when
# grep exits on the first match and ldd dies of SIGPIPE writing the rest.)
libs="$(ldd "$tmp/example/pocket_example")"
grep -q "$so => $tmp/prefix/lib/" <<<"$libs" ||
  { echo "pocket_example does not load $so from the prefix:"; echo "$libs"; exit 1; }
check_run cmake "$tmp/example/pocket_example"

# pkg-config (the .pc finds its prefix from where it lies).
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
[[ "$(pkg-config --modversion pocket)" == "$(sed -n 's/^Version: //p' "$tmp/prefix/lib/pkgconfig/pocket.pc")" ]]
# shellcheck disable=SC2046
"$cc" -std=c99 -Wall -Wextra -Werror -pedantic $extra "$src/examples/c/example.c" -o "$tmp/example_pc" \
  $(pkg-config --cflags --libs pocket) -Wl,-rpath,"$tmp/prefix/lib" $link_extra
check_run pkg-config "$tmp/example_pc"
