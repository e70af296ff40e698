#include "kernels/act_quant.h"

#include <algorithm>
#include <cmath>

namespace pocket::kernels {

ActBlocks quantize_acts(const float* x, int n, int64_t cols, int64_t kpad) {
  ActBlocks a;
  a.n = n;
  a.kpad = kpad;
  a.nb = kpad / kActBlock;
  a.q.reset(new int8_t[static_cast<size_t>(n) * kpad]);
  a.d.reset(new float[static_cast<size_t>(n) * a.nb]);
  a.s.reset(new float[static_cast<size_t>(n) * a.nb]);
  for (int t = 0; t < n; ++t) {
    const float* xr = x + static_cast<int64_t>(t) * cols;
    int8_t* q = a.q.get() + static_cast<int64_t>(t) * kpad;
    for (int64_t b = 0; b < a.nb; ++b) {
      int64_t k0 = b * kActBlock, k1 = std::min<int64_t>(cols, k0 + kActBlock);
      float amax = 0.0f;
      for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(xr[k]));
      float d = amax / 127.0f;
      float inv = d > 0.0f ? 1.0f / d : 0.0f;
      int sum = 0;
      for (int64_t k = k0; k < k0 + kActBlock; ++k) {
        // fmax/fmin also map NaN (and inf * 0) to a finite value: no UB in the cast.
        float r = k < k1 ? std::nearbyint(xr[k] * inv) : 0.0f;
        int v = static_cast<int>(std::fmin(127.0f, std::fmax(-127.0f, r)));
        q[k] = static_cast<int8_t>(v);
        sum += v;
      }
      a.d[t * a.nb + b] = d;
      a.s[t * a.nb + b] = d * static_cast<float>(sum);
    }
  }
  return a;
}

}  // namespace pocket::kernels
