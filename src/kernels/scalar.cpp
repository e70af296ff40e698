// Scalar reference kernels: the ground truth every SIMD level is tested
// against. Written for clarity, not speed (double accumulators in dots).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dequant.h"
#include "kernels/table.h"
#include "util/half.h"

namespace pocket::kernels {

namespace {

// Works for every weight type: dequantize a row, dot it with each token.
void matmul_ref(const MatmulJob& job, int64_t r0, int64_t r1) {
  const int64_t rows = job.rows, cols = job.cols;
  std::vector<float> wrow(static_cast<size_t>(cols));
  for (int64_t r = r0; r < r1; ++r) {
    dequant_row_unchecked(*job.view, r, wrow.data());
    for (int t = 0; t < job.n; ++t) {
      const float* x = job.x + t * cols;
      double acc = 0.0;
      for (int64_t k = 0; k < cols; ++k) acc += static_cast<double>(wrow[k]) * x[k];
      job.y[t * rows + r] = static_cast<float>(acc);
    }
  }
}

void rmsnorm_ref(float* out, const float* x, const float* weight, int n, float eps) {
  double ss = 0.0;
  for (int i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  float inv = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
  for (int i = 0; i < n; ++i) out[i] = x[i] * inv * weight[i];
}

void softmax_ref(float* x, int n) {
  if (n <= 0) return;
  float mx = *std::max_element(x, x + n);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  float inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu_ref(float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void geglu_ref(float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i) {
    const double x = gate[i];
    const double g = 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    gate[i] = static_cast<float>(g) * up[i];
  }
}

void rope_ref(float* x, int n_heads, int head_dim, int pos, RopeStyle style, const float* inv_freq) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int i = 0; i < half; ++i) {
      float angle = static_cast<float>(pos) * inv_freq[i];
      float c = std::cos(angle), s = std::sin(angle);
      int a = style == RopeStyle::Halves ? i : 2 * i;
      int b = style == RopeStyle::Halves ? i + half : 2 * i + 1;
      float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

void attention_ref(const float* q, const uint16_t* k, const uint16_t* v, int n_ctx, int head_dim, int64_t stride,
               float scale, float* scratch, float* out) {
  for (int t = 0; t < n_ctx; ++t) {
    double dot = 0.0;
    for (int i = 0; i < head_dim; ++i) dot += static_cast<double>(q[i]) * f16_to_f32(k[t * stride + i]);
    scratch[t] = static_cast<float>(dot) * scale;
  }
  softmax_ref(scratch, n_ctx);
  for (int i = 0; i < head_dim; ++i) out[i] = 0.0f;
  for (int t = 0; t < n_ctx; ++t)
    for (int i = 0; i < head_dim; ++i) out[i] += scratch[t] * f16_to_f32(v[t * stride + i]);
}

// Each query on its own, by the single-query reference above.
void attention_heads_ref(const AttentionQueries& qs, const uint16_t* k, const uint16_t* v, int head_dim, float scale,
                         float* scratch) {
  for (int j = 0; j < qs.n; ++j) {
    const size_t first = static_cast<size_t>(qs.first[j]) * head_dim;
    attention_ref(qs.q[j], k + first, v + first, qs.n_ctx[j] - qs.first[j], head_dim, head_dim, scale, scratch,
                  qs.out[j]);
  }
}

// The twin of attention_ref for a quantized cache (q8, q4): each row's
// scale applied to its dot product (keys) or to its softmax weight
// (values). code(row, t, i) reads element i of row t as stored.
template <class Rows, class Code>
void softmax_values_ref(float* scores, int n_ctx, Rows v, int head_dim, float* out, Code code) {
  softmax_ref(scores, n_ctx);
  for (int i = 0; i < head_dim; ++i) out[i] = 0.0f;
  for (int t = 0; t < n_ctx; ++t) {
    const float p = scores[t] * v.scale[t];
    for (int i = 0; i < head_dim; ++i) out[i] += p * static_cast<float>(code(v, t, i));
  }
}

template <class Rows, class Code>
void attention_scaled_ref(const float* q, Rows k, Rows v, int n_ctx, int head_dim, float scale, float* scratch,
                          float* out, Code code) {
  for (int t = 0; t < n_ctx; ++t) {
    double dot = 0.0;
    for (int i = 0; i < head_dim; ++i) dot += static_cast<double>(q[i]) * code(k, t, i);
    scratch[t] = static_cast<float>(dot * k.scale[t]) * scale;
  }
  softmax_values_ref(scratch, n_ctx, v, head_dim, out, code);
}

// The q8 cache's scores are integer dot products with the query quantized
// as a cache row is (kernels.h): the same bits on every level.
void attention_heads_q8_ref(const AttentionQueries& qs, Q8Rows k, Q8Rows v, int head_dim, float scale, float* scratch) {
  auto code = [head_dim](Q8Rows r, int t, int i) { return r.q[static_cast<size_t>(t) * head_dim + i]; };
  std::vector<int8_t> q_code(head_dim);
  for (int j = 0; j < qs.n; ++j) {
    float q_scale;
    quantize_row_q8(qs.q[j], q_code.data(), &q_scale, head_dim);
    const float q_factor = q_scale * scale;
    const int n_ctx = qs.n_ctx[j] - qs.first[j];
    const int8_t* kj = k.q + static_cast<size_t>(qs.first[j]) * head_dim;
    for (int t = 0; t < n_ctx; ++t) {
      int64_t dot = 0;
      for (int i = 0; i < head_dim; ++i) dot += q_code[i] * kj[static_cast<size_t>(t) * head_dim + i];
      scratch[t] = static_cast<float>(dot) * q_factor * k.scale[qs.first[j] + t];
    }
    softmax_values_ref(scratch, n_ctx, Q8Rows{v.q + static_cast<size_t>(qs.first[j]) * head_dim, v.scale + qs.first[j]},
                       head_dim, qs.out[j], code);
  }
}

void attention_heads_q4_ref(const AttentionQueries& qs, Q4Rows k, Q4Rows v, int head_dim, float scale, float* scratch) {
  const size_t row = static_cast<size_t>(head_dim) / 2;
  auto code = [head_dim, row](Q4Rows r, int t, int i) { return q4_code(r.q + t * row, i, head_dim); };
  for (int j = 0; j < qs.n; ++j) {
    const size_t first = static_cast<size_t>(qs.first[j]);
    attention_scaled_ref(qs.q[j], Q4Rows{k.q + first * row, k.scale + first}, Q4Rows{v.q + first * row, v.scale + first},
                         qs.n_ctx[j] - qs.first[j], head_dim, scale, scratch, qs.out[j], code);
  }
}

void f32_to_f16_row_ref(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_f16(x[i]);
}

void f16_to_f32_row_ref(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(x[i]);
}

}  // namespace

void install_scalar(KernelTable& t) {
  // Every type, including those no SIMD level implements (Q2_K, Q3_K,
  // Q8_K): they run here, correct but slow.
  for (auto& e : t.matmul) e = MatmulEntry{matmul_ref, false, 1};
  t.rmsnorm = rmsnorm_ref;
  t.softmax = softmax_ref;
  t.swiglu = swiglu_ref;
  t.geglu = geglu_ref;
  t.rope = rope_ref;
  t.attention_heads = attention_heads_ref;
  t.attention_heads_q8 = attention_heads_q8_ref;
  t.attention_heads_q4 = attention_heads_q4_ref;
  t.quantize_act_rows = quantize_act_rows;
  t.f32_to_f16_row = f32_to_f16_row_ref;
  t.f16_to_f32_row = f16_to_f32_row_ref;
}

}  // namespace pocket::kernels
