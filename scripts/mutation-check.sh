#!/usr/bin/env bash
# Mutation check: breaks each kernel family on purpose, one mutation at a
# time, and shows that a test fails. Every mutation is a small exact text
# substitution in a scratch copy of the tree; the working tree is never
# written. Prints a table (mutation, file, the test that caught it or MISSED)
# and exits non-zero if any mutation is missed.
#
#   scripts/mutation-check.sh [--aarch64] [--only SUBSTRING] [--list]
#
#   --aarch64   the NEON / dotprod / i8mm mutations instead of the x86 ones:
#               cross build with cmake/aarch64-linux-gnu.cmake, tests under
#               qemu-aarch64 with QEMU_CPU=max (every ARM level is supported
#               there, and the tests iterate every supported level)
#   --only S    only the mutations whose name contains S
#   --list      print the mutations and exit
#
# Scratch space: $MUTATION_DIR (default build/mutation): src-copy-<arch>/ (the copy:
# tracked and untracked-but-not-ignored files of the checkout, as they are
# now), build-<arch>/ (one Release build reused for every mutation, so only
# the mutated translation units recompile), ccache/ (restoring a file is a
# cache hit), logs-<arch>/. JOBS (default 1) sets the build parallelism.
set -euo pipefail
# The whole script is one brace group, read before it runs: editing this
# file during a run cannot change what the run does.
{
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${MUTATION_DIR:-$root/build/mutation}"
jobs="${JOBS:-1}"
arch=x86
only=""
list=0
while [ $# -gt 0 ]; do
  case "$1" in
    --aarch64) arch=aarch64 ;;
    --only) only="${2:?--only needs a value}"; shift ;;
    --list) list=1 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "mutation-check: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

# ---- the mutations ----------------------------------------------------------
# mutation NAME FILE OLD NEW [TEST_AREAS]: in FILE, replace the one
# occurrence of OLD by NEW; TEST_AREAS (default "kernels") are the
# pocket_tests_<area> executables run. OLD must occur exactly once, else the
# run stops: a mutation that no longer applies must not pass silently.
# Kernel templates shared by several levels are mutated for one level only,
# through a condition on that level's traits (V::kS8Bias is 0 for Avx2 and
# NeonDot, 128 for Avx512).
names=() files=() olds=() news=() areas=()
mutation() {
  names+=("$1") files+=("$2") olds+=("$3") news+=("$4") areas+=("${5:-kernels}")
}

if [ "$arch" = x86 ]; then
  # Q4_0 (GGUF, gguf_kernels.h): the zero-point 8 * d, whose product with
  # the block sum S[b] is subtracted at the end, scaled on one x86 level
  # (kS8Bias tells AVX2, 0, from AVX-512, 128). The first is the 0.6% error
  # the float-reference bound of test_matmul.cpp lets through.
  for f in 1.006 1.001 1.0001; do
    mutation "avx2-q4_0-zero-point-x$f" src/kernels/gguf_kernels.h \
      'w = B::nibbles16(blk + 2), neg_offset = 8.0f * d;' \
      "w = B::nibbles16(blk + 2), neg_offset = 8.0f * d * (B::kS8Bias == 0 ? ${f}f : 1.0f);"
  done
  mutation avx512-q4_0-zero-point-x1.006 src/kernels/gguf_kernels.h \
    'w = B::nibbles16(blk + 2), neg_offset = 8.0f * d;' \
    'w = B::nibbles16(blk + 2), neg_offset = 8.0f * d * (B::kS8Bias == 128 ? 1.006f : 1.0f);'
  # Q8_0 (GGUF) on AVX-512: the +128 bias of vpdpbusd removed 0.1% short.
  mutation avx512-q8_0-bias-x0.999 src/kernels/gguf_kernels.h \
    'w = B::load32(blk + 2), neg_offset = static_cast<float>(B::kS8Bias) * d;' \
    'w = B::load32(blk + 2), neg_offset = static_cast<float>(B::kS8Bias) * d * 0.999f;'
  # PQ4: the group offset m * sum(x) scaled.
  for lvl in avx2:0 avx512:128; do
    for f in 1.006 1.001; do
      mutation "${lvl%:*}-pq4-zero-point-x$f" src/kernels/tiled_kernels.h \
        'acc[t] = V::fma(m, V::set1(xsum[t]), V::fma(gacc[t], s, acc[t]));' \
        "acc[t] = V::fma(V::mul(m, V::set1(V::kS8Bias == ${lvl#*:} ? ${f}f : 1.0f)), V::set1(xsum[t]), V::fma(gacc[t], s, acc[t]));"
    done
  done
  # Sign flips in the PQ8 tile: AVX-512's -128 * sum(x) correction added
  # instead of subtracted; AVX2's int8 dot of rows 8..15 subtracted.
  mutation avx512-pq8-bias-sign src/kernels/tiled_kernels.h \
    'V::set1(-static_cast<float>(V::kS8Bias))' \
    'V::set1(V::kS8Bias == 128 ? static_cast<float>(V::kS8Bias) : -static_cast<float>(V::kS8Bias))'
  mutation avx2-pq8-rows8-15-sign src/kernels/x86_vec.h \
    'return {chained(_mm256_add_epi32(acc.a, dot8_s8s8(w.a, x.a))), chained(_mm256_add_epi32(acc.b, dot8_s8s8(w.b, x.b)))};' \
    'return {chained(_mm256_add_epi32(acc.a, dot8_s8s8(w.a, x.a))), chained(_mm256_sub_epi32(acc.b, dot8_s8s8(w.b, x.b)))};'
  # AVX-VNNI's signed dot: rows 8..15 of the PQ8 tile without the +128 flip
  # (caught only where the CPU has AVX-VNNI, as the avx512 ones need AVX-512).
  mutation avxvnni-pq8-rows8-15-unflipped src/kernels/x86_vec.h \
    'return dot_u8s8(acc, {flip(w.a), flip(w.b)}, x);' \
    'return dot_u8s8(acc, {flip(w.a), w.b}, x);'
  # PQ5's fifth bits (x86_vec.h): AVX-512 takes the plane bit one above for
  # chunks 2-3 (bits 5-7); AVX2 lets the neighbouring plane bit through.
  mutation avx512-pq5-plane-bit src/kernels/x86_vec.h \
    'if constexpr (S > 4) moved = _mm512_srli_epi16(plane, S - 4);' \
    'if constexpr (S > 4) moved = _mm512_srli_epi16(plane, S - 3);'
  # The K-quants' integer sub-block scales on AVX2 (Q4_K, Q5_K, Q6_K): one
  # scaled pair sum subtracted instead of added.
  mutation avx2-kquant-scaled-sum-sign src/kernels/x86_vec.h \
    'return chained(_mm256_add_epi32(acc, _mm256_madd_epi16(p, s)));' \
    'return chained(_mm256_sub_epi32(acc, _mm256_madd_epi16(p, s)));'
  # Activation quantization (x86 path): one of the four running maxima dropped.
  mutation x86-act-amax-lane src/kernels/act_quant.cpp \
    'const __m128 m = _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3));' \
    'const __m128 m = _mm_max_ps(_mm_max_ps(m0, m1), m2);'
  # The GGUF kernels' token chunks: every chunk's tiles written to the first.
  mutation gguf-token-chunk-offset src/kernels/gguf_kernels.h \
    'gguf_row<B, Type, T>(job, r, c0 + t0);' \
    'gguf_row<B, Type, T>(job, r, t0);'
  # Q6_K's bias of 32 taken off as 16 times the scaled activation sums (every
  # x86 level shares it).
  mutation x86-q6k-bias-shift src/kernels/x86_vec.h \
    'return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(dot, 5));' \
    'return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(dot, 4));'
  mutation avx2-pq5-plane-mask src/kernels/x86_vec.h \
    'return _mm256_or_si256(nib, _mm256_and_si256(moved, _mm256_set1_epi8(0x10)));' \
    'return _mm256_or_si256(nib, _mm256_and_si256(moved, _mm256_set1_epi8(0x30)));'
  # AVX-512 VBMI: the high nibble's field one bit late (caught only where
  # the CPU has AVX512_VBMI).
  mutation avx512vbmi-high-nibble-field src/kernels/x86_vec.h \
    '_mm512_multishift_epi64_epi8(_mm512_set1_epi64(field_ctrl(4)), v)' \
    '_mm512_multishift_epi64_epi8(_mm512_set1_epi64(field_ctrl(5)), v)'
  # AMX (caught only where the CPU has AMX-INT8): the group's min term
  # rounded in another order than pq_tile's (batch invariance), the second
  # block's activations one byte late (odd groups of 64 columns), and the
  # sums of a row's first 2048-column piece dropped.
  mutation amx-float-order src/kernels/kernels_amx.cpp \
    'at = V::fma(mins, V::set1(xsum), V::fma(g, s, at));' \
    'at = V::fma(g, s, V::fma(mins, V::set1(xsum), at));'
  mutation amx-block-offset src/kernels/kernels_amx.cpp \
    'POCKET_AMX_DOTS(3, 5, 7, x + kActBlock, stride, w + 512);' \
    'POCKET_AMX_DOTS(3, 5, 7, x + kActBlock + 1, stride, w + 512);'
  mutation amx-piece-carry src/kernels/kernels_amx.cpp \
    'p.g0 == 0 ? V::zero_f() : _mm512_maskz_loadu_ps(rows_mask, y)' \
    'V::zero_f()'
  # Off-by-one indices in the PQ tile: AVX2 PQ4 high-nibble activations one
  # column early (its int16-sum path), the same for PQ5 on the AVX2 and
  # dotprod levels; AVX-512 PQ8 chunk c dotted with chunk c+1's activations.
  mutation avx2-pq4-column-off-by-one src/kernels/tiled_kernels.h \
    's16[t] = V::add16_u8s8(s16[t], hi, V::bcast4(x + 4));' \
    's16[t] = V::add16_u8s8(s16[t], hi, V::bcast4(x + 3));'
  mutation avx2-pq5-column-off-by-one src/kernels/tiled_kernels.h \
    'iacc[t] = V::dot_u8s8(iacc[t], hi, V::bcast4(x + 4));' \
    'iacc[t] = V::dot_u8s8(iacc[t], hi, V::bcast4(x + 4 - (V::kS8Bias == 0 ? 1 : 0)));'
  # AVX2's int16 block sums taken for PQ5 too: 5-bit codes overflow int16.
  mutation avx2-int16-sums-pq5 src/kernels/tiled_kernels.h \
    'constexpr bool sum16 = V::kInt16Sums && Q == 4;' \
    'constexpr bool sum16 = V::kInt16Sums && Q <= 5;'
  mutation avx512-pq8-chunk-off-by-one src/kernels/tiled_kernels.h \
    'V::bcast4(xrow[t] + k0 + c * 4)' \
    'V::bcast4(xrow[t] + k0 + ((c + (V::kS8Bias == 128 ? 1 : 0)) % 8) * 4)'
  # Activation quantization: the block scale stored 0.1% off its codes.
  mutation act-quant-scale-x1.001 src/kernels/act_quant.cpp \
    'a.d[t * a.nb + b] = d;' \
    'a.d[t * a.nb + b] = d * 1.001f;' "kernels quant"
  # RMSNorm: eps doubled (AVX2, used by AVX-512 too); scalar weight index reversed.
  mutation avx2-rmsnorm-eps-x2 src/kernels/ops_avx2.cpp \
    'std::sqrt(ss / static_cast<float>(n) + eps)' \
    'std::sqrt(ss / static_cast<float>(n) + 2.0f * eps)'
  mutation scalar-rmsnorm-eps-x2 src/kernels/scalar.cpp \
    'std::sqrt(ss / n + eps)' \
    'std::sqrt(ss / n + 2.0 * eps)'
  mutation scalar-rmsnorm-weight-index src/kernels/scalar.cpp \
    'out[i] = x[i] * inv * weight[i];' \
    'out[i] = x[i] * inv * weight[n - 1 - i];'
  # Softmax: the vector loop forgets to subtract the maximum (only wrong
  # where exp overflows); scalar likewise.
  mutation x86-softmax-no-max-subtraction src/kernels/x86_math.h \
    'const __m256 vm = _mm256_set1_ps(mx);' \
    'const __m256 vm = _mm256_setzero_ps();'
  mutation scalar-softmax-no-max-subtraction src/kernels/scalar.cpp \
    'x[i] = std::exp(x[i] - mx);' \
    'x[i] = std::exp(x[i]);'
  # RoPE: angle of the next position (AVX2); pair index of the halves
  # style one off (scalar).
  mutation avx2-rope-angle-position src/kernels/ops_avx2.cpp \
    'float angle = static_cast<float>(pos) * inv_freq[i];' \
    'float angle = static_cast<float>(pos + 1) * inv_freq[i];'
  mutation scalar-rope-pair-index src/kernels/scalar.cpp \
    'int b = style == RopeStyle::Halves ? i + half : 2 * i + 1;' \
    'int b = style == RopeStyle::Halves ? (i + 1) % half + half : 2 * i + 1;'
  # SwiGLU: sigmoid(g) computed as sigmoid(-g) (AVX2).
  mutation avx2-swiglu-sigmoid-sign src/kernels/ops_avx2.cpp \
    ': _mm256_sub_ps(_mm256_setzero_ps(), g);' \
    ': g;'
  # Attention: AVX-512 score scale 0.1% off; K block offset one position
  # late after the first block (shared blocking, every SIMD level).
  mutation avx512-attention-scale-x1.001 src/kernels/attention_avx512.cpp \
    'const __m128 r = _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(r8), _mm256_extractf128_ps(r8, 1)), vscale);' \
    'const __m128 r = _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(r8), _mm256_extractf128_ps(r8, 1)), _mm_mul_ps(vscale, _mm_set1_ps(1.001f)));'
  # scores_quad (many queries: verify, prefill): the reduction tree pairs
  # lanes (0, 2) and (1, 3) where scores() pairs (0, 1) and (2, 3): the same
  # terms summed in another order, so only the bits differ from decode's.
  mutation avx512-attention-quad-tree-order src/kernels/attention_avx512.cpp \
    'g[m] = _mm512_add_ps(_mm512_shuffle_ps(h[2 * m], h[2 * m + 1], 0x88),
                             _mm512_shuffle_ps(h[2 * m], h[2 * m + 1], 0xDD));' \
    'g[m] = _mm512_add_ps(_mm512_shuffle_ps(h[2 * m], h[2 * m + 1], 0x44),
                             _mm512_shuffle_ps(h[2 * m], h[2 * m + 1], 0xEE));'
  mutation attention-k-block-position src/kernels/attention_impl.h \
    'const P kb = k + static_cast<size_t>(t0) * hd;' \
    'const P kb = k + static_cast<size_t>(t0 + (t0 > 0 ? 1 : 0)) * hd;'
  # q4 KV rows: AVX-512 and AVX2 read the low nibbles where the high ones
  # hold the elements (and the other way round).
  mutation avx512-q4-kv-nibble-side src/kernels/attention_avx512.cpp \
    'if (p.high()) c = _mm512_srli_epi32(c, 4);' \
    'if (!p.high()) c = _mm512_srli_epi32(c, 4);'
  mutation avx2-q4-kv-nibble-side src/kernels/ops_avx2.cpp \
    'c = _mm256_and_si256(_mm256_srl_epi32(c, _mm_cvtsi32_si128(p.high() ? 4 : 0))' \
    'c = _mm256_and_si256(_mm256_srl_epi32(c, _mm_cvtsi32_si128(p.high() ? 0 : 4))'
  # fp16 rows: f32 -> f16 truncates instead of rounding to nearest (AVX2).
  mutation avx2-f32-to-f16-rounding src/kernels/ops_avx2.cpp \
    '_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)' \
    '_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_ZERO)'
else
  # PQ4 offset m * sum(x) on the plain-NEON / i8mm skeleton and on the
  # dotprod tile (tiled_kernels.h with NeonDot, the only trait there).
  mutation arm-pq4-zero-point-x1.001 src/kernels/arm_pq_kernels.h \
    'acc[t][i] = vfmaq_f32(vfmaq_f32(acc[t][i], gacc[t][i], s), m, vdupq_n_f32(xsum[t]));' \
    'acc[t][i] = vfmaq_f32(vfmaq_f32(acc[t][i], gacc[t][i], s), vmulq_n_f32(m, 1.001f), vdupq_n_f32(xsum[t]));'
  mutation dotprod-pq4-zero-point-x1.001 src/kernels/tiled_kernels.h \
    'acc[t] = V::fma(m, V::set1(xsum[t]), V::fma(gacc[t], s, acc[t]));' \
    'acc[t] = V::fma(m, V::set1(xsum[t] * 1.001f), V::fma(gacc[t], s, acc[t]));'
  # q4 KV rows: the NEON load reads the other nibble side.
  mutation neon-q4-kv-nibble-side src/kernels/attention_neon.h \
    'b = p.high() ? vshr_n_u8(b, 4) : vand_u8(b, vdup_n_u8(15));' \
    'b = p.high() ? vand_u8(b, vdup_n_u8(15)) : vshr_n_u8(b, 4);'
  # NEON (no dotprod) PQ8: one int16 product lane subtracted (sign flip).
  mutation neon-pq8-sign src/kernels/kernels_neon.cpp \
    'acc[t][2 * i + 1] = vpadalq_s16(acc[t][2 * i + 1], ph);' \
    'acc[t][2 * i + 1] = vpadalq_s16(acc[t][2 * i + 1], vnegq_s16(ph));'
  # NEON PQ4: high-nibble activations one column early (off-by-one).
  mutation neon-pq4-column-off-by-one src/kernels/kernels_neon.cpp \
    'xh = bcast4(x[t] + 8 * c + 4);' \
    'xh = bcast4(x[t] + 8 * c + 3);'
  # i8mm GEMM: the first token pair takes the second pair's activation sums.
  mutation i8mm-gemm-xsum-pair src/kernels/kernels_i8mm.cpp \
    'xsum[2 * u] = pair_lanes<0>(v);' \
    'xsum[2 * u] = pair_lanes<1>(v);'
  # dotprod GEMM: high nibbles meet the low nibbles' activation columns.
  mutation dotprod-gemm-high-nibble-columns src/kernels/arm_pq_gemm.h \
    'dots(std::integral_constant<int, 2 * C + 1>{}' \
    'dots(std::integral_constant<int, 2 * C>{}'
  # PQ5 on every ARM level (arm_vec.h): the last chunk's high nibbles take
  # plane bit 6 instead of 7.
  mutation arm-pq5-plane-bit7 src/kernels/arm_vec.h \
    'vdupq_n_s8(static_cast<int8_t>(4 - s))' \
    'vdupq_n_s8(static_cast<int8_t>(s == 7 ? -2 : 4 - s))'
  # NEON element-wise ops (ops_neon.cpp, every ARM level).
  mutation neon-rmsnorm-eps-x2 src/kernels/ops_neon.cpp \
    'std::sqrt(ss / static_cast<float>(n) + eps)' \
    'std::sqrt(ss / static_cast<float>(n) + 2.0f * eps)'
  mutation neon-softmax-no-max-subtraction src/kernels/attention_neon.h \
    'const float32x4_t vm = vdupq_n_f32(mx);' \
    'const float32x4_t vm = vdupq_n_f32(0.0f);'
  mutation neon-swiglu-sigmoid-sign src/kernels/ops_neon.cpp \
    ': vnegq_f32(g);' \
    ': g;'
  mutation neon-rope-angle-position src/kernels/ops_neon.cpp \
    'const float angle = static_cast<float>(pos) * inv_freq[i];' \
    'const float angle = static_cast<float>(pos + 1) * inv_freq[i];'
fi

# count_pattern FILE OLD: how often OLD occurs in FILE (read only).
count_pattern() {
  python3 -c 'import sys; print(open(sys.argv[1]).read().count(sys.argv[2]))' "$1" "$2"
}

if [ "$list" = 1 ]; then
  # With the number of times each pattern occurs in the working tree now (must be 1).
  for i in "${!names[@]}"; do
    printf '%-36s %-34s %s\n' "${names[$i]}" "${files[$i]}" "$(count_pattern "$root/${files[$i]}" "${olds[$i]}")"
  done
  exit 0
fi

# ---- scratch copy and build -------------------------------------------------
case "$work" in
  "$root"/build/*|/tmp/*) ;;
  *) echo "mutation-check: MUTATION_DIR must be under $root/build or /tmp" >&2; exit 2 ;;
esac
src="$work/src-copy-$arch"
build="$work/build-$arch"
logs="$work/logs-$arch"
mkdir -p "$work" "$logs"
rm -rf "$src"
mkdir -p "$src"
# Tracked files plus untracked ones that git does not ignore (new tests),
# as they are in the working tree now; deleted files are skipped. Extracted
# with fresh modification times (-m), so the reused build never keeps an
# object compiled from an earlier run's mutated copy (ccache makes the
# resulting recompiles cheap).
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
  python3 -c 'import os,sys; sys.stdout.buffer.write(b"".join(p + b"\0" for p in sys.stdin.buffer.read().split(b"\0") if p and os.path.isfile(p)))' |
  tar --null -T - -cf -) | tar -C "$src" -xmf -

export CCACHE_DIR="$work/ccache" CCACHE_BASEDIR="$src" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=2G
cmake_args=(-S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPOCKET_BUILD_BENCH=OFF
  -DPOCKET_SHARED_DIR="$root/../shared")
command -v ninja >/dev/null 2>&1 && cmake_args+=(-G Ninja)
command -v ccache >/dev/null 2>&1 && cmake_args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
run_prefix=()
if [ "$arch" = aarch64 ]; then
  cmake_args+=(-DCMAKE_TOOLCHAIN_FILE="$src/cmake/aarch64-linux-gnu.cmake" -DGTest_FOUND=ON
    -DCMAKE_PROJECT_pocket_INCLUDE="$src/scripts/cross-aarch64-gtest.cmake")
  export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu QEMU_CPU="${QEMU_CPU:-max}"
  run_prefix=(qemu-aarch64)
fi
if [ -f "$build/CMakeCache.txt" ] && ! grep -q "^CMAKE_HOME_DIRECTORY:INTERNAL=$src\$" "$build/CMakeCache.txt"; then
  rm -rf "$build"  # made from another source folder
fi
if ! cmake "${cmake_args[@]}" >"$logs/configure.log" 2>&1; then
  tail -n 40 "$logs/configure.log"
  echo "mutation-check: configure failed (log: $logs/configure.log)" >&2
  exit 2
fi

all_areas="$(printf '%s\n' "${areas[@]}" | tr ' ' '\n' | sort -u | tr '\n' ' ')"

# build_and_test LOG AREAS...: builds the areas' test executables; sets
# $result to "pass", "build-failed" or the failing tests.
build_and_test() {
  local log="$1" area out rc failed
  shift
  local targets=()
  for area in "$@"; do targets+=("pocket_tests_$area"); done
  if ! nice -n 10 cmake --build "$build" -j"$jobs" --target "${targets[@]}" >"$log" 2>&1; then
    result=build-failed
    return
  fi
  failed=()
  for area in "$@"; do
    set +e
    out="$(timeout 900 "${run_prefix[@]}" "$build/pocket_tests_$area" --gtest_brief=1 2>&1)"
    rc=$?
    set -e
    printf '== pocket_tests_%s (exit %d)\n%s\n' "$area" "$rc" "$out" >>"$log"
    [ "$rc" = 0 ] && continue
    local names_failed
    names_failed="$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_/.]*\).*/\1/p' | grep -v '^[0-9]' | sort -u |
      tr '\n' ' ')"
    if [ -n "$names_failed" ]; then
      failed+=("$names_failed")
    elif [ "$rc" = 124 ]; then
      failed+=("pocket_tests_$area timed out")
    else
      failed+=("pocket_tests_$area exit $rc (crash)")
    fi
  done
  if [ ${#failed[@]} = 0 ]; then result=pass; else result="${failed[*]}"; fi
}

echo "mutation-check ($arch): source copy $src, build $build"
t0=$SECONDS
# shellcheck disable=SC2086
build_and_test "$logs/baseline.log" $all_areas
if [ "$result" != pass ]; then
  echo "mutation-check: the unmutated tree does not pass ($result); log: $logs/baseline.log" >&2
  exit 2
fi
echo "baseline: unmutated tree builds and passes pocket_tests_{${all_areas% }} ($((SECONDS - t0))s)"

rows=()
missed=0
ran=0
for i in "${!names[@]}"; do
  name="${names[$i]}" file="${files[$i]}"
  [ -n "$only" ] && [[ "$name" != *"$only"* ]] && continue
  ran=$((ran + 1))
  t1=$SECONDS
  cp "$src/$file" "$work/original"
  if ! python3 - "$src/$file" "${olds[$i]}" "${news[$i]}" <<'PY'
import sys
path, old, new = sys.argv[1:4]
text = open(path).read()
n = text.count(old)
if n != 1:
    sys.exit(f"pattern found {n} times (need exactly 1) in {path}:\n{old}")
open(path, "w").write(text.replace(old, new))
PY
  then
    echo "mutation-check: mutation $name no longer applies to $file; fix the script" >&2
    exit 2
  fi
  # shellcheck disable=SC2086
  build_and_test "$logs/$name.log" ${areas[$i]}
  cp "$work/original" "$src/$file"  # restore (a fresh mtime: the next build recompiles it)
  case "$result" in
    pass) status="MISSED"; missed=$((missed + 1)) ;;
    build-failed)
      echo "mutation-check: mutation $name does not compile (log: $logs/$name.log)" >&2
      tail -n 20 "$logs/$name.log" >&2
      exit 2 ;;
    *)
      # The first three failing tests, and how many more.
      read -r -a failed_list <<<"$result"
      status="caught: ${failed_list[*]:0:3}"
      [ ${#failed_list[@]} -gt 3 ] && status="$status (+$((${#failed_list[@]} - 3)) more)"
      ;;
  esac
  rows+=("$(printf '| %s | %s | %s |' "$name" "$file" "$status")")
  printf '%-36s %-34s %s (%ds)\n' "$name" "$file" "$status" $((SECONDS - t1))
done

# The restored copy must build and pass again (nothing left mutated).
# shellcheck disable=SC2086
build_and_test "$logs/restored.log" $all_areas
if [ "$result" != pass ]; then
  echo "mutation-check: the restored tree does not pass ($result); log: $logs/restored.log" >&2
  exit 2
fi

echo
echo "| mutation | file | result |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "$((ran - missed)) of $ran mutations caught ($arch, $((SECONDS - t0))s)"
[ "$missed" = 0 ]
exit
}
