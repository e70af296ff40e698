#include "speculative/dflash2.h"

#include <algorithm>

#include "kernels/kernels.h"

namespace pocket {

namespace {

// sum a[i] * b[i] in 8 interleaved partial sums (vectorizable; the order is
// fixed, so the result does not depend on the ISA).
float dot(const float* a, const float* b, int n) {
  float part[8] = {};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += a[i + j] * b[i + j];
  for (; i < n; ++i) part[0] += a[i] * b[i];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

}  // namespace

void dflash2_conv(const Dflash2Conv& conv, int kernel, int group_size, int side, const float* dyn, const float* x,
                  int n, int hidden, float* y) {
  const int groups = hidden / group_size;
  const size_t dyn_row = static_cast<size_t>(2) * kernel * groups;
  for (int i = 0; i < n; ++i) {
    float* yi = y + static_cast<size_t>(i) * hidden;
    std::fill(yi, yi + hidden, 0.0f);
    for (int t = 0; t < kernel && t <= i; ++t) {
      const float* base = &conv.base[(static_cast<size_t>(side) * kernel + t) * hidden];
      const float* coef = dyn + static_cast<size_t>(i) * dyn_row + (static_cast<size_t>(side) * kernel + t) * groups;
      const float* xs = x + static_cast<size_t>(i - t) * hidden;
      for (int g = 0; g < groups; ++g)
        for (int c = g * group_size; c < (g + 1) * group_size; ++c) yi[c] += (base[c] + coef[g]) * xs[c];
    }
  }
}

void dflash2_select(const Dflash2Selector& s, int top_k, int32_t anchor, std::span<const float> logits, int rows,
                    int width, std::span<const int32_t> ids, std::span<const float> proj, int rank,
                    std::vector<int32_t>& out) {
  out.clear();
  const size_t k = static_cast<size_t>(std::min(top_k, width));
  std::vector<int> cols;  // the row's top k columns, best first
  cols.reserve(k + 1);
  std::vector<float> cond(static_cast<size_t>(rank)), succ(static_cast<size_t>(rank));
  int32_t prev = anchor;
  for (int i = 0; i < rows; ++i) {
    const float* row = logits.data() + static_cast<size_t>(i) * width;
    // One pass keeping the k best (a column joins only when strictly
    // better than the k-th, so equal logits keep the lower column first).
    cols.clear();
    bool full = false;
    float kth = 0;  // the k-th best logit once k are held
    for (int col = 0; col < width; ++col) {
      if (full) {  // skip to the next column that beats the k-th (a tight loop: most do not)
        while (col < width && !(row[col] > kth)) ++col;
        if (col == width) break;
      }
      const float v = row[col];
      auto at = std::upper_bound(cols.begin(), cols.end(), v, [&](float x, int c) { return x > row[c]; });
      cols.insert(at, col);
      if (cols.size() > k) cols.pop_back();
      if (cols.size() == k) full = true, kth = row[cols.back()];
    }
    // cond = predecessor[prev] * proj: the bilinear form's left side.
    kernels::dequant_row(*s.predecessor, prev, cond.data());
    const float* p = proj.data() + static_cast<size_t>(i) * rank;
    for (int r = 0; r < rank; ++r) cond[static_cast<size_t>(r)] *= p[r];
    int best = -1;
    float best_score = 0;
    for (size_t j = 0; j < k; ++j) {
      const int col = cols[j];
      const int32_t tok = ids.empty() ? col : ids[static_cast<size_t>(col)];
      kernels::dequant_row(*s.successor, tok, succ.data());
      float score = row[col] + dot(cond.data(), succ.data(), rank);
      if (best < 0 || score > best_score) best = static_cast<int>(j), best_score = score;
    }
    prev = ids.empty() ? cols[static_cast<size_t>(best)] : ids[static_cast<size_t>(cols[static_cast<size_t>(best)])];
    out.push_back(prev);
  }
}

}  // namespace pocket
