#!/usr/bin/env bash
# scripts/fuzz.sh [TARGET|all] [SECONDS]   run libFuzzer targets (default: all, 60 s each)
# scripts/fuzz.sh --build                  only build build/fuzz
# scripts/fuzz.sh --seeds                  regenerate fuzz/corpus/ seeds with pocket_fuzz_seeds
# scripts/fuzz.sh --list                   list the targets
# scripts/fuzz.sh --campaign TARGET [TOTAL] run TARGET toward TOTAL executions (default
#                                          10,000,000) in legs: each leg runs the rest on
#                                          every core (-fork=nproc, nice 0, libFuzzer's temp
#                                          files in /dev/shm) from the working corpus and
#                                          appends its figures to build/fuzz/ledger.tsv
# scripts/fuzz.sh --stop TARGET            end a campaign's leg cleanly (SIGTERM to the fork
#                                          parent, which ignores SIGINT); the leg still counts
# scripts/fuzz.sh --ledger                 each target's executions so far, from the ledger
# scripts/fuzz.sh --recover [TARGET]       record the legs whose fuzz.sh went away before
#                                          writing their row (session or machine lost, the
#                                          process killed) from their logs; --campaign does
#                                          this first for its target
#
# Installs clang and libclang-rt-14-dev via apt when missing (log in
# build/logs/fuzz-apt.log), configures build/fuzz with clang and
#   CMAKE_CXX_FLAGS / CMAKE_C_FLAGS = -fsanitize=fuzzer-no-link,address,undefined ...
# (the library is instrumented; the fuzz_<name> executables add -fsanitize=fuzzer
# at link, see fuzz/CMakeLists.txt), builds, then runs each target on a scratch
# copy of its seed corpus (build/fuzz/corpus/<name>; fuzz/corpus/ is never
# modified) with its dictionary and per-input limits: 2 GB RSS, 1 GB per
# malloc, 10 s. Crash/leak/timeout/OOM inputs go to build/fuzz/artifacts/<name>/.
# Exits non-zero if any target found anything. Environment: POCKET_FUZZ_JOBS
# (build parallelism, default 1), POCKET_FUZZ_NICE (default 10),
# POCKET_FUZZ_ARGS (extra libFuzzer flags), POCKET_FUZZ_LOG_TAG (logs go to
# build/logs/fuzz-<name>-<tag>.log instead: a long run in the background then
# keeps its log when the test command's short runs of the same target write theirs),
# POCKET_FUZZ_BUILD_DIR (a build folder configured with -DPOCKET_BUILD_FUZZ=ON and
# these sanitizers, e.g. the test command's clang ASan build, used instead of
# configuring build/fuzz; corpora and crash inputs stay in build/fuzz), POCKET_FUZZ_WORK
# and POCKET_FUZZ_LOGS (other folders for the corpora, crash inputs and ledger, and for
# the logs, than build/fuzz and build/logs: the ledger's own test uses them).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work_root="${POCKET_FUZZ_WORK:-$root/build/fuzz}"
build="${POCKET_FUZZ_BUILD_DIR:-$work_root}"
logs="${POCKET_FUZZ_LOGS:-$root/build/logs}"
mkdir -p "$logs"
jobs="${POCKET_FUZZ_JOBS:-1}"
nice_level="${POCKET_FUZZ_NICE:-10}"

targets=()
for f in "$root"/fuzz/*.cpp; do targets+=("$(basename "$f" .cpp)"); done

mode="${1:-all}"
seconds="${2:-60}"
if [[ "$mode" == "--list" ]]; then
  printf '%s\n' "${targets[@]}"
  exit 0
fi

# --- campaigns: long runs in legs, counted in a ledger --------------------------
# One row per leg, tab-separated (the header names the columns). A leg ends when its
# runs are done, at --stop, or when its process goes away. In the last case fuzz.sh
# never writes the row; the leg's "<log>.leg" file (commit, pid) stays, and --recover
# (or the target's next --campaign) writes the row from the log: the executions of the
# jobs that had ended (the fork parent's last status line; the jobs cut off do not
# count), inputs saved since the leg began, exit "lost". A machine that goes away with
# its disk leaves nothing to recover; the corpus is gone too.
ledger="$work_root/ledger.tsv"
ledger_row() {  # start end target runs exec/s cov ft saved exit commit cpu leak_check_off
  [[ -f "$ledger" ]] ||
    printf 'start\tend\ttarget\truns\texec_per_s\tcov\tft\tsaved\texit\tcommit\tcpu\tleak_check_off\n' >"$ledger"
  local IFS=$'\t'
  printf '%s\n' "$*" >>"$ledger"
}
ledger_total() {  # executions recorded for target $1
  [[ -f "$ledger" ]] || { echo 0; return; }
  awk -F'\t' -v t="$1" 'NR > 1 && $3 == t { s += $4 } END { print s + 0 }' "$ledger"
}
if [[ "$mode" == --ledger ]]; then
  [[ -f "$ledger" ]] || { echo "fuzz: no ledger yet (${ledger#"$root"/})"; exit 0; }
  awk -F'\t' 'NR > 1 { s[$3] += $4; n[$3]++; f[$3] += $8; o[$3] += $12 } END {
    for (t in s) printf "fuzz_%s: %d executions in %d legs, %d inputs saved%s\n", t, s[t], n[t], f[t],
      o[t] ? sprintf("; leak check turned off in %d processes", o[t]) : "" }' "$ledger" | sort
  exit 0
fi
# The CPU as the ledger names it: the model and the widest x86 vector extension.
cpu_name() {
  local model flags ext=""
  model=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')
  flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | sed 's/.*: //') "
  for f in amx_int8 avx512_vnni avx512f avx_vnni avx2; do
    [[ "$flags" == *" $f "* ]] && { ext="$f"; break; }
  done
  echo "${model:-$(uname -m)}${ext:+ ($ext)}"
}
# The figures of a leg's log $1: sets runs, eps (the status line's), cov, ft.
read_leg_log() {
  local status_line
  # -fork=N: the parent's last status line ("#N: cov: ... exec/s R ... job: J") holds the
  # totals; the final stats in its log are one worker's. Otherwise the final stats.
  status_line=$(grep -aoE '#[0-9]+: cov: .* exec/s [0-9]+ .* job: [0-9]+' "$1" | tail -1 || true)
  if [[ -n "$status_line" ]]; then
    runs=$(grep -oE '^#[0-9]+' <<<"$status_line" | tr -d '#')
    eps=$(grep -oE 'exec/s [0-9]+' <<<"$status_line" | grep -oE '[0-9]+$')
  else
    runs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$1" | tail -1 | grep -o '[0-9]*$' || true)
    eps=$(grep -ao 'stat::average_exec_per_sec: *[0-9]*' "$1" | tail -1 | grep -o '[0-9]*$' || true)
  fi
  cov=$(grep -ao 'cov: [0-9]*' "$1" | tail -1 | grep -o '[0-9]*$' || true)
  ft=$(grep -ao 'ft: [0-9]*' "$1" | tail -1 | grep -o '[0-9]*$' || true)
}
leg_running() {  # the leg whose .leg file is $1, of target $2, still runs: its fuzz.sh or its fork parent
  local pid
  pid=$(awk '{ print $2 }' "$1")
  { [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q 'fuzz\.sh --campaign'; } ||
    pgrep -f "/fuzz_$2 .*-fork=" >/dev/null 2>&1
}
recover_legs() {  # write the rows of target $1's lost legs (every target's when $1 is empty)
  local leg log t start end t0 t1 found leak_off runs eps cov ft
  for leg in "$logs"/fuzz-*-campaign-*.log.leg; do
    [[ -f "$leg" ]] || continue
    log="${leg%.leg}"
    t=$(basename "$log"); t="${t#fuzz-}"; t="${t%-campaign-*}"
    [[ -z "$1" || "$t" == "$1" ]] || continue
    leg_running "$leg" "$t" && continue
    start=$(date -u -r "$log.start" +%FT%TZ 2>/dev/null) || { rm -f "$leg"; continue; }
    if [[ -f "$ledger" ]] &&
       awk -F'\t' -v s="$start" -v t="$t" '$1 == s && $3 == t { f = 1 } END { exit !f }' "$ledger"; then
      rm -f "$leg"  # recorded after all
      continue
    fi
    runs="" eps="" cov="" ft=""
    [[ -f "$log" ]] && read_leg_log "$log"
    t0=$(date -r "$log.start" +%s)
    t1=$(date -r "$log" +%s 2>/dev/null || echo "$t0")
    end=$(date -u -d "@$t1" +%FT%TZ)
    eps=$(( ${runs:-0} / (t1 > t0 ? t1 - t0 : 1) ))
    found=$(find "$work_root/artifacts/$t" -type f -newer "$log.start" 2>/dev/null | wc -l || true)
    leak_off=$(sort -u "$log.leak-check-off" 2>/dev/null | grep -c . || true)
    ledger_row "$start" "$end" "$t" "${runs:-0}" "$eps" "${cov:-?}" "${ft:-?}" "$found" lost \
      "$(awk '{ print $1 }' "$leg")" "$(cpu_name)" "$leak_off"
    rm -f "$leg" "$log.leak-check-off"
    rm -rf "$work_root/legs/$(basename "$log" .log)"
    echo "fuzz: recorded a lost leg of fuzz_$t from $(basename "$log") ($start to $end): ${runs:-0}" \
      "executions, $found inputs saved; campaign total $(ledger_total "$t")"
  done
}
if [[ "$mode" == --recover ]]; then
  t="${2:-}"; t="${t#fuzz_}"
  if [[ -n "$t" && ! -f "$root/fuzz/$t.cpp" ]]; then
    echo "fuzz: unknown target '$t' (targets: ${targets[*]})" >&2
    exit 2
  fi
  recover_legs "$t"
  exit 0
fi
campaign_total=""
if [[ "$mode" == --campaign || "$mode" == --stop ]]; then
  t="${2:-}"; t="${t#fuzz_}"
  if [[ -z "$t" || ! -f "$root/fuzz/$t.cpp" ]]; then
    echo "fuzz: $mode needs a target (targets: ${targets[*]})" >&2
    exit 2
  fi
  if [[ "$mode" == --stop ]]; then
    # The fork parent is the one process of the target whose arguments hold -fork=.
    pids=$(pgrep -f "/fuzz_$t .*-fork=" || true)
    [[ -n "$pids" ]] || { echo "fuzz: no campaign leg of fuzz_$t is running" >&2; exit 1; }
    # shellcheck disable=SC2086
    kill -TERM $pids
    echo "fuzz: asked fuzz_$t to stop (pid $pids); its leg is recorded once its jobs have ended"
    exit 0
  fi
  campaign_total="${3:-10000000}"
  if ! [[ "$campaign_total" =~ ^[0-9]+$ ]]; then
    echo "fuzz: TOTAL must be a number of executions (got '$campaign_total')" >&2
    exit 2
  fi
  recover_legs "$t"
  done_runs=$(ledger_total "$t")
  if ((done_runs >= campaign_total)); then
    echo "fuzz: fuzz_$t has $done_runs executions in the ledger, at least $campaign_total: nothing to run"
    exit 0
  fi
  mode="$t"
  seconds=86400
  campaign_commit=$(git -C "$root" describe --always --dirty 2>/dev/null || echo '?')  # what the leg's binary is built from
  # The cores shared at the test command's priority: at nice 19 a starved job's first
  # input once passed the 10 s limit (docs/reliability.md, fuzz_tokenize_diff).
  nice_level="${POCKET_FUZZ_NICE:-0}"
  POCKET_FUZZ_ARGS="-fork=$(nproc) -runs=$((campaign_total - done_runs)) ${POCKET_FUZZ_ARGS:-}"
  POCKET_FUZZ_LOG_TAG="${POCKET_FUZZ_LOG_TAG:-campaign-$(date -u +%Y%m%dT%H%M%S)}"
  # The jobs' corpus and feature files: ~8% of fuzz_safetensors_struct's time went to
  # creating ext4 inodes for them.
  [[ -d /dev/shm && -w /dev/shm ]] && export TMPDIR=/dev/shm
  echo "fuzz: campaign fuzz_$t: $done_runs of $campaign_total executions in the ledger; this leg runs the rest"
fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "fuzz: SECONDS must be a positive integer (got '$seconds')" >&2
  exit 2
fi
if [[ "$mode" != all && "$mode" != --build && "$mode" != --seeds ]]; then
  mode="${mode#fuzz_}"
  if [[ ! -f "$root/fuzz/$mode.cpp" ]]; then
    echo "fuzz: unknown target '$mode' (targets: ${targets[*]})" >&2
    exit 2
  fi
fi

# --- toolchain ----------------------------------------------------------------
source "$root/scripts/lib.sh"  # find_clang; ccache, when installed
find_clang
cxx="$clang_cxx" cc="$clang_cc"
if [[ -z "$cxx" ]] || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer*.a >/dev/null 2>&1; then
  echo "fuzz: installing clang and libclang-rt-14-dev (log: build/logs/fuzz-apt.log)"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  if ! { $sudo_cmd apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends \
           clang libclang-rt-14-dev; } >"$logs/fuzz-apt.log" 2>&1; then
    echo "fuzz: apt-get failed; the end of build/logs/fuzz-apt.log:" >&2
    tail -n 30 "$logs/fuzz-apt.log" >&2
    exit 1
  fi
  find_clang
  cxx="$clang_cxx" cc="$clang_cc"
fi

# --- configure and build ----------------------------------------------------------
# Line tables only: crash reports need file:line, not variables; src/formats/gguf.cpp
# compiled in 6.2-6.9 s this way against 7.3-8.1 s with -g (clang 14, Zen 4).
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1 -gline-tables-only"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
# shellcheck disable=SC2207
generator+=($(ccache_launcher))
if [[ -n "${POCKET_FUZZ_BUILD_DIR:-}" ]]; then
  if ! grep -q '^POCKET_BUILD_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
    echo "fuzz: POCKET_FUZZ_BUILD_DIR=$build is not a build folder configured with -DPOCKET_BUILD_FUZZ=ON" >&2
    exit 2
  fi
elif [[ ! -f "$build/CMakeCache.txt" ]]; then
  echo "fuzz: configuring build/fuzz (log: build/logs/fuzz-configure.log)"
  if ! nice -n "$nice_level" cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Fuzz \
      -DPOCKET_BUILD_FUZZ=ON -DPOCKET_BUILD_TESTS=OFF -DPOCKET_BUILD_BENCH=OFF \
      -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
      -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" >"$logs/fuzz-configure.log" 2>&1; then
    tail -n 30 "$logs/fuzz-configure.log" >&2
    exit 1
  fi
fi
build_targets=()
if [[ "$mode" == all || "$mode" == --build ]]; then
  for t in "${targets[@]}"; do build_targets+=("fuzz_$t"); done
elif [[ "$mode" == --seeds ]]; then
  build_targets=(pocket_fuzz_seeds)
else
  build_targets=("fuzz_$mode")
fi
echo "fuzz: building ${build_targets[*]} in ${build#"$root"/} (log: build/logs/fuzz-build.log)"
if ! nice -n "$nice_level" cmake --build "$build" -j "$jobs" --target "${build_targets[@]}" \
    >"$logs/fuzz-build.log" 2>&1; then
  grep -B2 -A12 -m3 'error' "$logs/fuzz-build.log" >&2 || tail -n 40 "$logs/fuzz-build.log" >&2
  exit 1
fi
[[ "$mode" == --build ]] && exit 0
if [[ "$mode" == --seeds ]]; then
  "$build/fuzz/pocket_fuzz_seeds" "$root/fuzz/corpus"
  exit 0
fi

# --- run ------------------------------------------------------------------------
run_list=("${targets[@]}")
[[ "$mode" != all ]] && run_list=("$mode")
status=0
summary=()
for t in "${run_list[@]}"; do
  work="$work_root/corpus/$t"
  art="$work_root/artifacts/$t"
  log="$logs/fuzz-$t${POCKET_FUZZ_LOG_TAG:+-$POCKET_FUZZ_LOG_TAG}.log"
  mkdir -p "$work" "$art"
  # A structure-aware variant (<name>_struct) starts from <name>'s seeds and dictionary.
  seeds="$t"; [[ -d "$root/fuzz/corpus/$t" ]] || seeds="${t%_struct}"
  [[ -d "$root/fuzz/corpus/$seeds" ]] && cp -n "$root/fuzz/corpus/$seeds"/* "$work"/ 2>/dev/null || true
  dict=()
  [[ -f "$root/fuzz/dict/$seeds.dict" ]] && dict=("-dict=$root/fuzz/dict/$seeds.dict")
  before=$(find "$art" -type f | wc -l)
  touch "$log.start"
  exe="$build/fuzz/fuzz_$t"
  if [[ -n "$campaign_total" ]]; then
    # The leg's commit and this script's pid, removed once the row is written.
    echo "$campaign_commit $$" >"$log.leg"
    # Fork mode starts every job from the binary's path: a rebuild of build/fuzz during
    # the leg would change the code under test part-way (it did, in session 32). The
    # leg runs a copy of its own, removed at its end.
    leg_bin="$work_root/legs/$(basename "$log" .log)"
    mkdir -p "$leg_bin"
    cp "$exe" "$leg_bin/"
    exe="$leg_bin/fuzz_$t"
  fi
  echo "fuzz: fuzz_$t for ${seconds}s (log: ${log#"$root"/})"
  rc=0
  # libFuzzer turns its leak check off, with one INFO line, once 1,000 inputs have ended with more
  # mallocs than frees (a target that keeps state across inputs); after that "0 leaks" means
  # nothing. Fork mode's jobs write their logs under TMPDIR and delete them, so a watcher reads
  # them while they run (any campaign's: one runs at a time, on every core; jobs shorter than its
  # 5 s poll are not seen, and the message comes only after a job's first 1,000 such inputs).
  off_jobs="$log.leak-check-off"
  : >"$off_jobs"
  watcher=""
  if [[ "${POCKET_FUZZ_ARGS:-}" == *-fork=* ]]; then
    (while sleep 5; do
      grep -l 'disabled leak detection' "${TMPDIR:-/tmp}"/libFuzzerTemp.FuzzWithFork*.dir/*.log 2>/dev/null >>"$off_jobs" ||
        true  # no such line (or no job log yet): keep watching; set -e would end the watcher here
    done) &
    watcher=$!
  fi
  # -entropic_scale_per_exec_time=1: the entropic schedule gives an input less energy the
  # longer it runs. Without it, fuzz_constrain's corpus drifted to regexes that take ~1 s each
  # under the sanitizers (`.*` then dozens of `.`), and a campaign leg fell from 661 to 150
  # exec/s; with it, 1,490 exec/s from the same corpus, coverage still growing (session 32).
  # A later -entropic_scale_per_exec_time=0 in POCKET_FUZZ_ARGS turns it off.
  # shellcheck disable=SC2086
  nice -n "$nice_level" "$exe" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -malloc_limit_mb=1024 -timeout=10 -print_final_stats=1 -artifact_prefix="$art/" "${dict[@]}" \
    -entropic_scale_per_exec_time=1 ${POCKET_FUZZ_ARGS:-} "$work" >"$log" 2>&1 || rc=$?
  if [[ -n "$watcher" ]]; then
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
  fi
  grep -q 'disabled leak detection' "$log" && echo "$log" >>"$off_jobs"
  leak_off=$(sort -u "$off_jobs" | grep -c . || true)
  rm -f "$off_jobs"
  read_leg_log "$log"
  found=$(($(find "$art" -type f | wc -l) - before))
  # Every input libFuzzer saved counts (crash-, leak-, timeout-, oom-, slow-unit-); named by kind,
  # since a timeout or slow unit on a starved machine is not a crash.
  kinds=$(find "$art" -type f -newer "$log.start" -printf '%f\n' 2>/dev/null | sed 's/-[0-9a-f]*$//' | sort | uniq -c |
          awk '{printf "%s%d %s", (NR > 1 ? ", " : ""), $1, $2}')
  if [[ -n "$campaign_total" ]]; then
    # A leg's own rate: the status line's is the last job's.
    elapsed=$(($(date +%s) - $(date -r "$log.start" +%s)))
    eps=$(( ${runs:-0} / (elapsed > 0 ? elapsed : 1) ))
  fi
  line="fuzz_$t: ${runs:-?} runs, ${eps:-?} exec/s, cov ${cov:-?}, ft ${ft:-?}, $found inputs saved${kinds:+ ($kinds)}"
  if [[ -n "$campaign_total" ]]; then
    ((rc == 72)) && rc=0  # libFuzzer's exit after a SIGTERM ("run interrupted"): --stop
    ledger_row "$(date -u -r "$log.start" +%FT%TZ)" "$(date -u +%FT%TZ)" "$t" "${runs:-0}" "${eps:-?}" "${cov:-?}" \
      "${ft:-?}" "$found" "$rc" "$campaign_commit" "$(cpu_name)" "$leak_off"
    rm -f "$log.leg"
    rm -rf "$leg_bin"
    line+=" over ${elapsed} s; campaign total $(ledger_total "$t") of $campaign_total (${ledger#"$root"/})"
  fi
  ((leak_off > 0)) && line+="; WARNING: libFuzzer turned its leak check off in $leak_off process(es) (state kept across inputs)"
  if ((rc != 0 || found > 0)); then
    status=1
    newest=$(ls -t "$art" 2>/dev/null | head -1)
    line+=" (exit $rc; input: ${newest:+$art/$newest}; log: $log)"
    grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|FINDING|terminate called|SUMMARY' "$log" \
      | sed 's/^/   /' || true
  fi
  echo "$line"
  summary+=("$line")
done
if ((${#run_list[@]} > 1)); then
  echo "fuzz: summary"
  printf '%s\n' "${summary[@]}"
fi
exit "$status"
