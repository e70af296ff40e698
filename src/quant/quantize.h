// Weight quantizer: f32 row-major W[rows, cols] to the bytes of a tensor of
// the given type, laid out exactly as the kernels and model files use it.
#pragma once
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace pocket {

// `group` is the PQ4/PQ5/PQ8 group size (32, 64 or 128) and ignored otherwise.
// PQ4 and PQ5 pick each group's scale and offset to minimise the squared error
// (a few clipping ranges, each refined by closed-form least squares);
// Q4_0/Q8_0/PQ8 use round-to-nearest on the absolute maximum, as GGUF does.
// Fails with pocket::Error on bad sizes/groups or non-finite weights. Large
// tensors are split over hardware threads by 16-row tiles; the bytes do not
// depend on the split.
std::vector<uint8_t> quantize(const float* w, int64_t rows, int64_t cols, DType type, int group);

namespace quant {

// Scale and offset of one PQ4 (PQ5) group: value = s * q + m, q in 0..qmax
// (15 for PQ4, 31 for PQ5). The returned values are already rounded to
// fp16, as stored.
struct Pq4Params {
  float s, m;
};
// Error-minimising choice for x[0..n).
Pq4Params fit_pq4_group(const float* x, int n, int qmax = 15);
// The code of x under p (round to nearest, clamped to 0..qmax).
int pq4_code(float x, Pq4Params p, int qmax = 15);
// pq4_code for x[0..n) into codes[0..n).
void pq4_codes(const float* x, int n, Pq4Params p, uint8_t* codes, int qmax = 15);
// Plain min/max round-to-nearest choice (the baseline fit_pq4_group beats).
Pq4Params minmax_pq4_group(const float* x, int n, int qmax = 15);

}  // namespace quant
}  // namespace pocket
