// Public kernel entry points: pick the table for the selected ISA once and
// split matmuls over output rows on the thread pool.
#include "kernels/kernels.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "kernels/dequant.h"
#include "kernels/table.h"
#include "core/pq_format.h"
#include "util/thread_pool.h"
#include "util/error.h"

namespace pocket::kernels {

namespace {

KernelTable build_table(Isa isa) {
  KernelTable t;
  install_scalar(t);
  // Each level builds on the one below it.
  switch (isa) {
    case Isa::Scalar:
      break;
    case Isa::Amx:
    case Isa::Avx512Vbmi:
    case Isa::Avx512:
    case Isa::AvxVnni:
    case Isa::Avx2:
#if defined(__x86_64__)
      install_avx2(t);
      if (isa == Isa::AvxVnni) install_avxvnni(t);  // not below Avx512: a CPU may have AVX-512 without it
      if (isa == Isa::Avx512 || isa == Isa::Avx512Vbmi || isa == Isa::Amx) install_avx512(t);
      if (isa == Isa::Avx512Vbmi || isa == Isa::Amx) install_avx512vbmi(t);
      if (isa == Isa::Amx) install_amx(t);
#endif
      break;
    case Isa::I8mm:
    case Isa::Dotprod:
    case Isa::Neon:
#if defined(__aarch64__)
      install_neon(t);
      if (isa != Isa::Neon) install_dotprod(t);
      if (isa == Isa::I8mm) install_i8mm(t);
#endif
      break;
  }
  t.isa = isa;
  return t;
}

const KernelTable& active() {
  static const KernelTable& t = kernel_table(selected_isa());
  return t;
}

// Activations are padded to whole weight groups for PQ types.
int64_t padded_cols(const TensorView& w) {
  int64_t unit = is_pq(w.type) ? w.group : kActBlock;
  return (w.cols() + unit - 1) / unit * unit;
}

}  // namespace

const KernelTable& kernel_table(Isa isa) {
  // One immutable table per level, built on first use of that level and
  // only after detection says the CPU runs it: install_<isa>() is compiled
  // for its level and may itself use that level's instructions, so it must
  // stay unreachable on CPUs below it.
  auto isas = supported_isas();
  if (std::find(isas.begin(), isas.end(), isa) == isas.end()) fail("kernels: ISA ", isa_name(isa), " is not supported");
  constexpr int kLevels = static_cast<int>(Isa::I8mm) + 1;
  static std::once_flag built[kLevels];
  static KernelTable tables[kLevels];
  const int i = static_cast<int>(isa);
  std::call_once(built[i], [&] { tables[i] = build_table(isa); });
  return tables[i];
}

namespace {

constexpr size_t kMaxFusedTargets = 4;
// Activations at least this large (tokens x columns) are quantized by the
// pool: below it one pass costs about what handing it out does.
constexpr int64_t kParallelQuantElems = 32 * 1024;

// Y_i = X * W_i^T for checked weights that share type, group and width:
// activations quantized once, all rows in one pass over the pool. Each
// target's rows start at a multiple of the row alignment in one shared row
// space, so every chunk maps to aligned rows of one or more weights.
void matmul_fused(const KernelTable& table, std::span<const MatmulTarget> targets, const float* x, int n,
                  ThreadPool* pool) {
  if (n <= 0) return;
  const TensorView& w0 = *targets[0].w;
  const MatmulEntry& e = table.matmul[static_cast<int>(w0.type)];
  // Per calling thread and reused: the buffers only grow, so steady-state
  // decoding quantizes activations without allocating.
  thread_local ActBlocks xq;
  if (e.int8_acts) {
    // A reference, not the name: inside the lambda `xq` would name the
    // running worker's own thread_local buffer.
    ActBlocks& acts = xq;
    prepare_acts(n, padded_cols(w0), acts, e.act_scale_block);
    // Prefill: the rows split across the pool (serial, this was 4% of a
    // 1-thread AVX2 prefill, so 7% at 2 threads). Decode: one row, no split.
    if (pool != nullptr && static_cast<int64_t>(n) * w0.cols() >= kParallelQuantElems)
      pool->parallel_for(n, [&](int64_t t0, int64_t t1, int) {
        table.quantize_act_rows(x, static_cast<int>(t0), static_cast<int>(t1), w0.cols(), acts);
      });
    else
      table.quantize_act_rows(x, 0, n, w0.cols(), acts);
  }
  MatmulJob jobs[kMaxFusedTargets];
  int64_t begin[kMaxFusedTargets + 1] = {0};
  const size_t count = targets.size();
  for (size_t i = 0; i < count; ++i) {
    const TensorView& w = *targets[i].w;
    jobs[i] = MatmulJob{&w, static_cast<const uint8_t*>(w.data), w.type, w.rows(), w.cols(), w.group, x,
                        e.int8_acts ? &xq : nullptr, n, targets[i].y};
    begin[i + 1] = begin[i] + (w.rows() + e.row_align - 1) / e.row_align * e.row_align;
  }
  auto run = [&](int64_t b, int64_t end) {
    for (size_t i = 0; i < count; ++i) {
      const int64_t lo = std::max(b, begin[i]) - begin[i];
      const int64_t hi = std::min(end - begin[i], jobs[i].rows);
      if (lo < hi) e.fn(jobs[i], lo, hi);
    }
  };
  if (pool == nullptr) {
    run(0, begin[count]);
    return;
  }
  pool->parallel_for(begin[count], [&](int64_t b, int64_t end, int) { run(b, end); }, e.row_align);
}

}  // namespace

void matmul_with(const KernelTable& table, const TensorView& w, const float* x, int n, float* y, ThreadPool* pool) {
  check_weight(w);
  const MatmulTarget target{&w, y};
  matmul_fused(table, {&target, 1}, x, n, pool);
}

void matmul_multi_with(const KernelTable& table, std::span<const MatmulTarget> targets, const float* x, int n,
                       ThreadPool* pool) {
  if (targets.empty()) return;
  const TensorView& w0 = *targets[0].w;
  bool fusable = targets.size() <= kMaxFusedTargets;
  for (const MatmulTarget& t : targets) {
    check_weight(*t.w);
    fusable = fusable && t.w->type == w0.type && t.w->group == w0.group && t.w->cols() == w0.cols();
  }
  if (fusable) {
    matmul_fused(table, targets, x, n, pool);
    return;
  }
  for (const MatmulTarget& t : targets) matmul_with(table, *t.w, x, n, t.y, pool);
}

void matmul(const TensorView& w, const float* x, int n, float* y, ThreadPool* pool) {
  matmul_with(active(), w, x, n, y, pool);
}

void matmul_multi(std::span<const MatmulTarget> targets, const float* x, int n, ThreadPool* pool) {
  matmul_multi_with(active(), targets, x, n, pool);
}

void rmsnorm(float* out, const float* x, const float* weight, int n, float eps) {
  active().rmsnorm(out, x, weight, n, eps);
}
void softmax(float* x, int n) { active().softmax(x, n); }
void swiglu(float* gate, const float* up, int n) { active().swiglu(gate, up, n); }
void geglu(float* gate, const float* up, int n) { active().geglu(gate, up, n); }
void rope(float* x, int n_heads, int head_dim, int pos, RopeStyle style, const float* inv_freq) {
  active().rope(x, n_heads, head_dim, pos, style, inv_freq);
}
namespace {
void check_queries(const AttentionQueries& qs) {
  if (qs.n < 1 || qs.n > kMaxAttentionQueries) fail("attention: ", qs.n, " queries (1..", kMaxAttentionQueries, ")");
  for (int j = 0; j < qs.n; ++j)
    if (qs.first[j] < 0 || qs.first[j] >= qs.n_ctx[j])
      fail("attention: query ", j, " sees positions [", qs.first[j], ", ", qs.n_ctx[j], "), which is empty");
}
}  // namespace

void attention_heads(const AttentionQueries& qs, const uint16_t* k, const uint16_t* v, int head_dim, float scale,
                     float* scratch) {
  check_queries(qs);
  active().attention_heads(qs, k, v, head_dim, scale, scratch);
}
void attention_heads_q8(const AttentionQueries& qs, Q8Rows k, Q8Rows v, int head_dim, float scale, float* scratch) {
  check_queries(qs);
  active().attention_heads_q8(qs, k, v, head_dim, scale, scratch);
}
void quantize_row_q8(const float* x, int8_t* y, float* scale, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float inv = d > 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) y[i] = static_cast<int8_t>(std::lround(std::clamp(x[i] * inv, -127.0f, 127.0f)));
  *scale = d;
}
void attention_heads_q4(const AttentionQueries& qs, Q4Rows k, Q4Rows v, int head_dim, float scale, float* scratch) {
  check_queries(qs);
  active().attention_heads_q4(qs, k, v, head_dim, scale, scratch);
}
int q4_code(const uint8_t* row, int i, int head_dim) {
  const int g0 = i / 32 * 32, g = std::min(32, head_dim - g0), half = g / 2, w = i - g0;
  const uint8_t b = row[g0 / 2 + w % half];
  return (w < half ? b & 15 : b >> 4) - 8;
}
void quantize_row_q4(const float* x, uint8_t* y, float* scale, int n) {
  *scale = 0.0f;
  if (n <= 0) return;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 7.0f;
  const float inv = d > 0.0f ? 1.0f / d : 0.0f;
  std::fill(y, y + n / 2, uint8_t{0});
  for (int i = 0; i < n; ++i) {
    const int c = 8 + static_cast<int>(std::lround(std::clamp(x[i] * inv, -7.0f, 7.0f)));
    const int g0 = i / 32 * 32, g = std::min(32, n - g0), half = g / 2, w = i - g0;
    y[g0 / 2 + w % half] |= static_cast<uint8_t>(w < half ? c : c << 4);
  }
  *scale = d;
}
void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) { active().f32_to_f16_row(x, y, n); }
void f16_to_f32_row(const uint16_t* x, float* y, int64_t n) { active().f16_to_f32_row(x, y, n); }

const char* active_isa() { return isa_name(active().isa); }

}  // namespace pocket::kernels
