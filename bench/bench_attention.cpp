// Attention kernel benchmark: one KV head's multi-query attention
// (kernels::attention_heads*) on one thread, as the forward pass calls it:
// 16 queries (prefill: 8 tokens x 2 query heads, causal) or 2 (decode: one
// token), head_dim 128, over a span of cached positions, for each KV cache
// type. Prints the fastest of 9 runs (the machine is shared; the minimum is
// the least disturbed figure) as ns per query and position, and GFLOP/s
// (4 * head_dim flops per query and position: scores and values).
//   bench_attention [SPAN...]      (default 512 4096; POCKET_ISA selects the level)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "util/half.h"

namespace {

using namespace pocket;
using Clock = std::chrono::steady_clock;

uint64_t state = 0x9E3779B97F4A7C15ull;
float uniform() {
  state ^= state << 13, state ^= state >> 7, state ^= state << 17;
  return static_cast<float>(state >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
}

struct Cache {
  int hd, span;
  std::vector<uint16_t> k16, v16;
  std::vector<int8_t> k8, v8;
  std::vector<uint8_t> k4, v4;
  std::vector<float> ks8, vs8, ks4, vs4;
  Cache(int hd_, int span_) : hd(hd_), span(span_) {
    const size_t n = static_cast<size_t>(hd) * span;
    k16.resize(n), v16.resize(n), k8.resize(n), v8.resize(n), k4.resize(n / 2), v4.resize(n / 2);
    ks8.resize(span), vs8.resize(span), ks4.resize(span), vs4.resize(span);
    std::vector<float> row(hd);
    for (int t = 0; t < span; ++t)
      for (int kv = 0; kv < 2; ++kv) {
        for (auto& x : row) x = uniform();
        const size_t at = static_cast<size_t>(t) * hd;
        for (int d = 0; d < hd; ++d) (kv ? v16 : k16)[at + d] = f32_to_f16(row[d]);
        kernels::quantize_row_q8(row.data(), (kv ? v8 : k8).data() + at, &(kv ? vs8 : ks8)[t], hd);
        kernels::quantize_row_q4(row.data(), (kv ? v4 : k4).data() + at / 2, &(kv ? vs4 : ks4)[t], hd);
      }
  }
};

double fastest_seconds(int runs, const auto& fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const auto s = Clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - s).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> spans;
  for (int i = 1; i < argc; ++i) spans.push_back(std::atoi(argv[i]));
  if (spans.empty()) spans = {512, 4096};
  const int hd = 128;
  std::printf("kernel level %s, head_dim %d, one thread, fastest of 9 runs\n",
              kernels::active_isa(), hd);
  std::printf("%-6s %-4s %8s %12s %10s\n", "span", "kv", "queries", "ns/(q*pos)", "GFLOP/s");
  for (int span : spans) {
    if (span < 8) continue;
    Cache c(hd, span);
    for (int n_q : {16, 2}) {
      std::vector<float> q(static_cast<size_t>(n_q) * hd), out(q.size()), scratch(static_cast<size_t>(n_q) * span);
      for (auto& x : q) x = uniform();
      kernels::AttentionQueries qs;
      qs.n = n_q;
      double positions = 0;
      for (int j = 0; j < n_q; ++j) {
        qs.q[j] = q.data() + static_cast<size_t>(j) * hd;
        qs.out[j] = out.data() + static_cast<size_t>(j) * hd;
        qs.n_ctx[j] = span - (n_q - 1 - j) / 2;  // two query heads per token, causal
        positions += qs.n_ctx[j];
      }
      for (const char* kv : {"f16", "q8", "q4"}) {
        const std::string type = kv;
        const double s = fastest_seconds(9, [&] {
          if (type == "f16")
            kernels::attention_heads(qs, c.k16.data(), c.v16.data(), hd, 0.088f, scratch.data());
          else if (type == "q8")
            kernels::attention_heads_q8(qs, {c.k8.data(), c.ks8.data()}, {c.v8.data(), c.vs8.data()}, hd, 0.088f,
                                        scratch.data());
          else
            kernels::attention_heads_q4(qs, {c.k4.data(), c.ks4.data()}, {c.v4.data(), c.vs4.data()}, hd, 0.088f,
                                        scratch.data());
        });
        std::printf("%-6d %-4s %8d %12.3f %10.2f\n", span, kv, n_q, s / positions * 1e9,
                    4.0 * hd * positions / s / 1e9);
      }
    }
  }
  return 0;
}
