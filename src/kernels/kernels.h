// Compute kernels used by the fast forward pass. Each entry point dispatches
// at run time to the best implementation the CPU supports (scalar reference,
// AVX2, AVX-512/VNNI, NEON, NEON dotprod/i8mm). The scalar versions are the
// ground truth that every SIMD variant is tested against.
#pragma once
#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "core/config.h"

namespace pocket {
class ThreadPool;
}

namespace pocket::kernels {

// Y[n, rows] = X[n, cols] * W[rows, cols]^T for a weight of any supported
// type (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, PQ4, PQ5, PQ8 with SIMD
// kernels on every level; Q2_K, Q3_K, Q8_K, Q4_1, Q5_0, Q5_1 through the
// scalar reference). X and Y are f32, row-major,
// contiguous. n == 1 is the decode GEMV; n > 1 is prefill GEMM. Work is split
// over output rows so results are identical for any thread count.
void matmul(const TensorView& w, const float* x, int n, float* y, ThreadPool* pool);

// Several weights applied to the same input: Y_i = X * W_i^T. With equal
// type, group and width (q/k/v, gate/up) the activations are quantized once
// and all rows run in one pass over the thread pool, one synchronisation
// instead of one per weight; otherwise it is a plain matmul per weight.
// Results are identical to separate matmul calls.
struct MatmulTarget {
  const TensorView* w;
  float* y;
};
void matmul_multi(std::span<const MatmulTarget> targets, const float* x, int n, ThreadPool* pool);

// Dequantize row `row` of a 2-D weight into `out` (cols floats).
void dequant_row(const TensorView& w, int64_t row, float* out);

// out[i] = x[i] / rms(x) * weight[i]
void rmsnorm(float* out, const float* x, const float* weight, int n, float eps);

// In-place softmax over x[0..n).
void softmax(float* x, int n);

// gate[i] = silu(gate[i]) * up[i]
void swiglu(float* gate, const float* up, int n);

// gate[i] = gelu(gate[i]) * up[i], GELU in its tanh approximation:
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void geglu(float* gate, const float* up, int n);

// Rotate each of n_heads heads of x (head_dim floats each) for position pos.
// inv_freq has head_dim/2 entries: theta^(-2i/head_dim).
void rope(float* x, int n_heads, int head_dim, int pos, RopeStyle style, const float* inv_freq);

// Several query vectors that attend over the same K/V head: the query heads
// of one GQA group, for one token (decode) or a few consecutive tokens
// (prefill). Reading each cached K/V row once for all of them is what makes
// attention cheap; a causal mask is expressed by each query's own n_ctx.
constexpr int kMaxAttentionQueries = 16;
struct AttentionQueries {
  int n = 0;  // 1..kMaxAttentionQueries
  const float* q[kMaxAttentionQueries];
  float* out[kMaxAttentionQueries];
  int n_ctx[kMaxAttentionQueries];      // query j sees positions [first[j], n_ctx[j])
  int first[kMaxAttentionQueries] = {};  // 0 unless a sliding window hides older positions
};

// For each query j (first[j] < n_ctx[j]):
//   out_j[head_dim] = softmax(scale * q_j . K[t]) . V[t],  t in [first[j], n_ctx[j])
// K and V are one head's fp16 rows (IEEE half as uint16_t), contiguous:
// row t starts at t * head_dim. `scratch` holds n * max(n_ctx) floats.
void attention_heads(const AttentionQueries& qs, const uint16_t* k, const uint16_t* v, int head_dim, float scale,
                     float* scratch);

// One head's rows of an int8 KV cache (--kv q8): row t holds
// scale[t] * q[t * head_dim + i], i in [0, head_dim).
struct Q8Rows {
  const int8_t* q;
  const float* scale;
};
// attention_heads over int8 K and V rows, read as stored (no fp16 copy).
// The query is quantized as a row is (quantize_row_q8: codes c, scale qs)
// and a score is the integer dot product of the codes,
//   float(sum_i c_i * K[t]_i) * (qs * scale) * k.scale[t],
// evaluated in that order: the same bits on every ISA and batch (VNNI,
// dotprod or exact float sums), at int8 speed where the CPU has it.
void attention_heads_q8(const AttentionQueries& qs, Q8Rows k, Q8Rows v, int head_dim, float scale, float* scratch);
// One row to int8 with one scale: scale = max|x| / 127 (0 for a zero row),
// y[i] = round(x[i] / scale), ties away from zero. The same on every ISA.
void quantize_row_q8(const float* x, int8_t* y, float* scale, int n);

// One head's rows of a 4-bit KV cache (--kv q4): row t holds head_dim
// 4-bit codes in head_dim / 2 bytes from q + t * head_dim / 2, and the
// value of element i is scale[t] * (code_i - 8), codes in [1, 15].
// Within a row the elements go in groups of 32 (the last group may be
// shorter, g elements, g even): byte j of a group holds element j in its
// low nibble and element j + g / 2 in its high nibble, so one 16-byte load
// gives 16 consecutive elements on each nibble side. head_dim must be even.
struct Q4Rows {
  const uint8_t* q;
  const float* scale;
};
// Element i of a q4 row (its code minus 8, in [-7, 7]).
int q4_code(const uint8_t* row, int i, int head_dim);
// attention_heads over 4-bit K and V rows, read as stored.
void attention_heads_q4(const AttentionQueries& qs, Q4Rows k, Q4Rows v, int head_dim, float scale, float* scratch);
// One row to 4 bits with one scale: scale = max|x| / 7 (0 for a zero row),
// code = 8 + round(x[i] / scale), ties away from zero. The same on every ISA.
void quantize_row_q4(const float* x, uint8_t* y, float* scale, int n);

// Row conversions between f32 and fp16 (round to nearest even).
void f32_to_f16_row(const float* x, uint16_t* y, int64_t n);
void f16_to_f32_row(const uint16_t* x, float* y, int64_t n);

// Name of the instruction set in use ("scalar", "avx2", "avx512-vnni", ...).
const char* active_isa();

}  // namespace pocket::kernels
