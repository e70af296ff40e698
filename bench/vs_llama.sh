#!/usr/bin/env bash
# Side-by-side prefill/decode of Pocket and llama.cpp on the same weights,
# alternated in one run (not part of the tests; llama.cpp is never a
# dependency of Pocket).
#
#   bash bench/vs_llama.sh build  SCRATCH [avx2|avxvnni|aarch64]   # llama.cpp from the llama-cpp-python sdist (PyPI)
#   bash bench/vs_llama.sh run    SCRATCH [avx2|avxvnni] [preset] [rounds]
#   bash bench/vs_llama.sh files  SCRATCH [avx2|avxvnni] GGUF [POCKET_FILE...]
#
# `build` downloads the sdist (0.3.36; its build tools come as wheels) into
# SCRATCH (outside the repository) and
# builds llama-quantize and llama-bench: natively, or with `avx2` limited to
# AVX2/FMA/F16C (no AVX-512, no VNNI) so an AVX-512 host can measure the
# AVX2 level of both engines (`avxvnni`: the same plus the VEX-encoded
# VNNI dot products, Pocket's level of that name). `run` writes the synthetic `preset` (default
# pocket-0.3b) as an F16 Pocket file and its plain GGUF form (which llama.cpp reads), has
# llama-quantize make Q4_K_M and Q4_0 of it and Pocket its q4 g64 file, then
# for `rounds` rounds (default 3) runs, alternating, `pocket bench` on the
# Pocket q4, Q4_K_M and Q4_0 files and `llama-bench` on Q4_K_M and Q4_0
# (2 threads, 512 prompt tokens, 128 generated, 5 runs each after a warm-up;
# with `avx2` / `avxvnni` Pocket runs with POCKET_ISA set to it). Per-round medians go to
# SCRATCH/vs_llama-<isa>-<preset>.tsv, a summary (median of the rounds) to
# stdout. `files` does the same for a real GGUF (both engines on it) and
# Pocket's own conversions of it ($ROUNDS rounds, default 3), with each
# process's peak resident memory (/usr/bin/time) beside Pocket's own figure.
set -euo pipefail

mode=${1:?usage: bench/vs_llama.sh build|run SCRATCH [avx2] [preset] [rounds]}
scratch=$(realpath -m "${2:?scratch folder}")
isa=native
if [[ "${3:-}" == avx2 || "${3:-}" == avxvnni || "${3:-}" == aarch64 ]]; then isa=$3; shift; fi
preset=${3:-pocket-0.3b}
rounds=${4:-3}
repo=$(cd "$(dirname "$0")/.." && pwd)
case "$scratch/" in "$repo"/*) echo "vs_llama: SCRATCH must be outside the repository" >&2; exit 2 ;; esac
mkdir -p "$scratch"
llama_src=$(ls -d "$scratch"/llama_cpp_python-*/vendor/llama.cpp 2>/dev/null | head -1 || true)
llama_build=$llama_src/build-$isa

if [[ "$mode" == build ]]; then
  if [[ -z "$llama_src" ]]; then
    (cd "$scratch" && pip download --no-binary llama-cpp-python --no-deps llama-cpp-python==0.3.36 -d . &&
      tar xzf llama_cpp_python-*.tar.gz)
    llama_src=$(ls -d "$scratch"/llama_cpp_python-*/vendor/llama.cpp | head -1)
    llama_build=$llama_src/build-$isa
  fi
  flags=(-DGGML_NATIVE=ON)
  # On a CPU with AMX, -march=native builds ggml's AMX matmul, which faults (SIGSEGV in
  # ggml_backend_amx_mul_mat) in a guest that was not granted the AMX tile state: name the
  # levels instead, AMX off.
  grep -qw amx_tile /proc/cpuinfo && flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
    -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
  [[ $isa == avx2 ]] && flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
    -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF)
  [[ $isa == avxvnni ]] && flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
    -DGGML_AVX512=OFF -DGGML_AVX_VNNI=ON)
  # aarch64: cross-built for dotprod CPUs (run under qemu-aarch64 -cpu cortex-a76 by tools/qemu/arm_cost.sh).
  [[ $isa == aarch64 ]] && flags=(-DGGML_NATIVE=OFF -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64
    -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++
    -DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod+fp16 -DGGML_OPENMP=OFF)
  cmake -S "$llama_src" -B "$llama_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF "${flags[@]}"
  cmake --build "$llama_build" --target llama-quantize llama-bench -j"$(nproc)"
  exit 0
fi
[[ "$mode" == run || "$mode" == files ]] || { echo "vs_llama: unknown mode $mode" >&2; exit 2; }
[[ -x "$llama_build/bin/llama-bench" ]] || { echo "vs_llama: run 'bench/vs_llama.sh build $scratch${isa/native/}' first" >&2; exit 2; }

pocket=$repo/build/release/pocket
pocket_env=()
[[ $isa == avx2 || $isa == avxvnni ]] && pocket_env=(POCKET_ISA=$isa)
# Each row: median prefill and decode of 5 runs after a warm-up, Pocket's
# bandwidth probe, and the process's peak resident set: llama-bench's maximum
# RSS from GNU time, Pocket's VmHWM as its bench reports it (its bandwidth
# probe's buffer left out).
pocket_row() {  # round, path
  local out
  out=$(env "${pocket_env[@]}" "$pocket" bench -m "$2" -p 512 -n 128 -t 2 --runs 5 --json 2>/dev/null)
  python3 -c 'import json,sys; j=json.loads(sys.argv[3])
print("\t".join([sys.argv[1], "pocket", sys.argv[2].rsplit("/", 1)[-1], "%.1f" % j["prefill_tok_s"]["median"],
  "%.1f" % j["decode_tok_s"]["median"], "%.1f" % (j["bandwidth_bytes_s"] / 1e9), "%.0f" % j["peak_rss_mb"]]))' \
    "$1" "$2" "$out" >>"$tsv"
}
llama_row() {  # round, path
  local out
  out=$(/usr/bin/time -f 'maxrss_kb=%M' "$llama_build/bin/llama-bench" -m "$2" -p 512 -n 128 -t 2 -r 5 -o json 2>&1)
  python3 -c 'import json,re,statistics as st,sys; t=sys.argv[3]; r=json.loads(t[t.index("["):t.rindex("]") + 1])
rss=re.search(r"maxrss_kb=(\d+)", t).group(1)
pp=[x for x in r if x["n_prompt"] > 0][0]; tg=[x for x in r if x["n_gen"] > 0][0]
print("\t".join([sys.argv[1], "llama.cpp", sys.argv[2].rsplit("/", 1)[-1], "%.1f" % st.median(pp["samples_ts"]),
  "%.1f" % st.median(tg["samples_ts"]), "-", "%.0f" % (int(rss) / 1024)]))' \
    "$1" "$2" "$out" >>"$tsv"
}
header() { printf 'round\tengine\tfile\tprefill_tok_s\tdecode_tok_s\tbandwidth_GB_s\tmax_rss_MiB\n' >"$tsv"; }

if [[ "$mode" == files ]]; then
  gguf=$(realpath "${3:?usage: bench/vs_llama.sh files SCRATCH [avx2] GGUF [POCKET_FILE...]}")
  shift 3
  tsv=$scratch/vs_llama-$isa-$(basename "$gguf" .gguf).tsv
  header
  for ((r = 1; r <= ${ROUNDS:-3}; r++)); do
    llama_row "$r" "$gguf"
    pocket_row "$r" "$gguf"
    for f in "$@"; do pocket_row "$r" "$(realpath "$f")"; done
  done
else
  files=$scratch/files
  mkdir -p "$files"
  f16=$files/$preset-f16.gguf
  # A Pocket file keeps its tokenizer in pocket.* keys, which llama.cpp cannot read: the plain
  # GGUF form (`pocket quantize --format gguf`) of the same f16 weights is what llama-quantize reads.
  if [[ ! -f $f16 ]]; then
    "$pocket" create --preset "$preset" --weights f16 -o "$files/$preset-f16.pocket"
    "$pocket" quantize "$files/$preset-f16.pocket" "$f16" --weights f16 --embed f16 --format gguf
  fi
  for q in Q4_K_M Q4_0; do
    [[ -f $files/$preset-$q.gguf ]] || "$llama_build/bin/llama-quantize" "$f16" "$files/$preset-$q.gguf" "$q" >/dev/null
  done
  [[ -f $files/$preset-q4.pocket ]] || "$pocket" create --preset "$preset" --weights q4 --group 64 -o "$files/$preset-q4.pocket"
  tsv=$scratch/vs_llama-$isa-$preset.tsv
  header
  for ((r = 1; r <= rounds; r++)); do
    pocket_row "$r" "$files/$preset-q4.pocket"
    llama_row "$r" "$files/$preset-Q4_K_M.gguf"
    pocket_row "$r" "$files/$preset-Q4_K_M.gguf"
    llama_row "$r" "$files/$preset-Q4_0.gguf"
    pocket_row "$r" "$files/$preset-Q4_0.gguf"
  done
fi
python3 - "$tsv" "$isa" <<'EOF'
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print(f"{sys.argv[2]} level, medians of {len({r['round'] for r in rows})} rounds (each the median of 5 runs after 1 warm-up):")
print("| engine | file | prefill 512 tok/s [min, max] | decode 128 tok/s [min, max] | max RSS MiB |")
print("|---|---|---|---|---|")
for key in dict.fromkeys((r["engine"], r["file"]) for r in rows):
    sel = [r for r in rows if (r["engine"], r["file"]) == key]
    p = [float(r["prefill_tok_s"]) for r in sel]; d = [float(r["decode_tok_s"]) for r in sel]
    m = st.median(float(r["max_rss_MiB"]) for r in sel)
    print(f"| {key[0]} | {key[1]} | {st.median(p):.1f} [{min(p):.1f}, {max(p):.1f}] | {st.median(d):.1f} [{min(d):.1f}, {max(d):.1f}] | {m:.0f} |")
bw = [float(r["bandwidth_GB_s"]) for r in rows if r["bandwidth_GB_s"] != "-"]
print(f"Pocket's bandwidth probe over the run: median {st.median(bw):.1f} GB/s [{min(bw):.1f}, {max(bw):.1f}]")
EOF
