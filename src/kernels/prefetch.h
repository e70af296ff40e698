// Software prefetch of the weight streams a GEMV reads. A thread's share of
// a matrix is one contiguous stream, and the hardware prefetchers alone
// (which stop at 4 KB pages) left decode's GEMVs at 66-82% of the measured
// read bandwidth on Gemma 3 270M (AVX-512 Xeon, 2 threads); prefetching
// 512-2048 bytes ahead of each load gave +10% decode there, 4-16 KB less
// (docs/benchmarks.md). Decode's one-token tiles prefetch, and so does the
// first token tile of each weight tile in a matmul of at most
// kPrefetchTokens tokens (tiled_kernels.h: a speculative verify, where the
// weight stream still bounds the time; without it a 2-token verify cost
// 1.56 decode steps, with it 1.13); prefill's batches are compute-bound and
// the extra instructions cost them 5-10%. Prefetches never fault, so
// reading past a matrix's end is harmless.
#pragma once

namespace pocket::kernels {

inline constexpr int kWeightPrefetchBytes = 2048;

// The cache line kWeightPrefetchBytes ahead of p.
inline void prefetch_weights(const void* p) {
  __builtin_prefetch(static_cast<const char*>(p) + kWeightPrefetchBytes);
}

// Every cache line of [p, p + bytes), kWeightPrefetchBytes ahead.
inline void prefetch_weights(const void* p, int bytes) {
  for (int b = 0; b < bytes; b += 64) prefetch_weights(static_cast<const char*>(p) + b);
}

}  // namespace pocket::kernels
