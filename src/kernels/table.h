// The per-ISA table of kernel implementations. Each level starts from the
// level below it and overrides what it implements faster, so an entry is
// never missing and the scalar reference is the fallback for everything.
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "kernels/act_quant.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "core/config.h"

namespace pocket::kernels {

constexpr int kNumDTypes = static_cast<int>(kLastDType) + 1;

// One matmul call: Y[n, rows] = X[n, cols] * W^T. `xq` is set when the
// kernel asked for int8 activations (MatmulEntry::int8_acts).
// The weight is passed as plain fields so ISA-specific translation units
// need no inline code from elsewhere (which the linker could merge with a
// copy compiled for another ISA).
struct MatmulJob {
  const TensorView* view;  // for the scalar reference only
  const uint8_t* w;
  DType type;
  int64_t rows, cols;
  int group;
  const float* x;
  const ActBlocks* xq;
  int n;
  float* y;
};
// Computes y[t * rows + r] for every token t and r in [row_begin, row_end).
using MatmulFn = void (*)(const MatmulJob& job, int64_t row_begin, int64_t row_end);

struct MatmulEntry {
  MatmulFn fn = nullptr;
  bool int8_acts = false;  // wants X quantized to int8 blocks of 32 first
  int64_t row_align = 1;   // rows per tile: thread chunks start at multiples
  int act_scale_block = kActBlock;  // columns sharing one activation scale (ActBlocks::scale_block)
};

struct KernelTable {
  Isa isa = Isa::Scalar;
  MatmulEntry matmul[kNumDTypes];
  void (*rmsnorm)(float* out, const float* x, const float* weight, int n, float eps) = nullptr;
  void (*softmax)(float* x, int n) = nullptr;
  void (*swiglu)(float* gate, const float* up, int n) = nullptr;
  void (*geglu)(float* gate, const float* up, int n) = nullptr;
  void (*rope)(float* x, int n_heads, int head_dim, int pos, RopeStyle style, const float* inv_freq) = nullptr;
  void (*attention_heads)(const AttentionQueries& qs, const uint16_t* k, const uint16_t* v, int head_dim, float scale,
                          float* scratch) = nullptr;
  void (*attention_heads_q8)(const AttentionQueries& qs, Q8Rows k, Q8Rows v, int head_dim, float scale,
                             float* scratch) = nullptr;
  void (*attention_heads_q4)(const AttentionQueries& qs, Q4Rows k, Q4Rows v, int head_dim, float scale,
                             float* scratch) = nullptr;
  // kernels::quantize_act_rows (act_quant.h), with the same result on every level.
  void (*quantize_act_rows)(const float* x, int t0, int t1, int64_t cols, ActBlocks& a) = nullptr;
  void (*f32_to_f16_row)(const float* x, uint16_t* y, int64_t n) = nullptr;
  void (*f16_to_f32_row)(const uint16_t* x, float* y, int64_t n) = nullptr;
};

// The table for `isa`; fails with pocket::Error if this CPU cannot run it.
// Tests use it to call every level directly.
const KernelTable& kernel_table(Isa isa);

// The same computations as the public entry points, on a given table.
void matmul_with(const KernelTable& t, const TensorView& w, const float* x, int n, float* y, ThreadPool* pool);
void matmul_multi_with(const KernelTable& t, std::span<const MatmulTarget> targets, const float* x, int n,
                       ThreadPool* pool);

// Overrides installed by each level (defined in the *_<isa>.cpp files).
void install_scalar(KernelTable& t);
void install_avx2(KernelTable& t);
void install_avxvnni(KernelTable& t);
void install_avx512(KernelTable& t);
void install_avx512vbmi(KernelTable& t);
void install_amx(KernelTable& t);
void install_neon(KernelTable& t);
void install_dotprod(KernelTable& t);
void install_i8mm(KernelTable& t);

}  // namespace pocket::kernels
