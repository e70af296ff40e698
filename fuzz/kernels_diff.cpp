// fuzz_kernels_diff: differential fuzzing of the matmul kernels. The input
// chooses a weight type, a shape (odd row counts, partial PQ groups, 1..20
// tokens), the weight's codes and the activations (magnitudes spread over
// 2^-8..2^8, constant blocks, zero blocks); every level this CPU runs
// (supported_isas(): scalar, AVX2, AVX-512/VNNI or NEON, dotprod, i8mm) then
// computes Y = X W^T and is compared with a reference written from the
// definition (tests/kernels/weight_builders.h encodes the weight from the
// format descriptions and records the exact values and codes):
//  - levels with int8 activations: the integer-exact reference of
//    tests/kernels/exact_reference.h on the kernel's own quantized
//    activations, tolerating float rounding only;
//  - float-activation kernels (the scalar level, F32/F16/BF16 on every level):
//    the double dot product of the encoded values, within the sequential
//    rounding bound (cols + 10) * FLT_EPSILON * sum|w x|.
// K-quants (Q4_K/Q5_K/Q6_K) take their super-block fields (d, dmin, sub-block
// scales and mins, codes) from the input and are checked against
// tests/kernels/kquant_reference.h (int8 levels) or the double dot of the
// values the format defines (float levels).
// Any difference beyond the bound is a finding (the input is saved). Runs
// each level on the same input, so a kernel that reads past a row or a tile
// is an ASan report.
#include <cfloat>
#include <cmath>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_util.h"
#include "kernels/exact_reference.h"
#include "kernels/kquant_reference.h"
#include "kernels/table.h"
#include "kernels/weight_builders.h"

namespace {

using namespace pocket;
using namespace pocket::kernels;

constexpr DType kTypes[] = {DType::F32,  DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                            DType::Q5_1, DType::PQ4, DType::PQ5,  DType::PQ8,  DType::Q4_K, DType::Q5_K, DType::Q6_K};

bool is_kquant(DType t) { return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K; }

// The range of codes build_weight accepts for `t` (weight_builders.h).
void code_range(DType t, int& lo, int& hi) {
  switch (t) {
    case DType::Q8_0: lo = -128, hi = 127; return;
    case DType::PQ8: lo = -127, hi = 127; return;
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::PQ5: lo = 0, hi = 31; return;
    default: lo = 0, hi = 15; return;
  }
}

using Stream = fuzz::Stream;

std::vector<float> activations(Stream& in, int n, int64_t cols, uint8_t mode) {
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (int t = 0; t < n; ++t)
    for (int64_t b = 0; b < cols; b += 32) {
      const uint8_t kind = static_cast<uint8_t>((mode + t + b / 32) % 5);
      const int e = static_cast<int>(in.next() % 17) - 8;  // block magnitude 2^-8..2^8
      for (int64_t k = b; k < std::min(cols, b + 32); ++k) {
        float v;
        switch (kind) {
          case 0: v = 0.0f; break;                                              // an all-zero block
          case 1: v = (k % 2 ? -1.0f : 1.0f) * std::ldexp(0.75f, e); break;     // every code +-127
          case 2: v = std::ldexp(static_cast<float>(in.next()) / 64.0f, e); break;  // mostly positive: large sum(x)
          default: v = std::ldexp(static_cast<float>(static_cast<int8_t>(in.next())) / 64.0f, e); break;
        }
        x[static_cast<size_t>(t * cols + k)] = v;
      }
    }
  return x;
}

// The double dot of the weight's defined values (value(r, k)) and the sum of
// the terms' magnitudes: the float levels' reference, the same for every
// level, so computed once per input.
struct FloatRef {
  std::vector<double> y, mag;  // n * rows
};
template <class ValueFn>
FloatRef float_reference(ValueFn value, int64_t rows, int64_t cols, const std::vector<float>& x, int n) {
  // Each weight value once, not once per token: a K-quant's value decodes
  // its block's fields on every call, which took ~40% of this target's time.
  std::vector<double> w(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) w[static_cast<size_t>(r * cols + k)] = value(r, k);
  FloatRef ref;
  ref.y.assign(static_cast<size_t>(n * rows), 0.0);
  ref.mag.assign(ref.y.size(), 0.0);
  for (int t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0, mag = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const double p = w[static_cast<size_t>(r * cols + k)] * x[t * cols + k];
        sum += p;
        mag += std::fabs(p);
      }
      ref.y[static_cast<size_t>(t * rows + r)] = sum;
      ref.mag[static_cast<size_t>(t * rows + r)] = mag;
    }
  return ref;
}

// The float path against float_reference, within the sequential rounding
// bound.
void check_float(const KernelTable& table, const TensorView& view, const FloatRef& ref, int64_t rows, int64_t cols,
                 const std::vector<float>& x, int n) {
  std::vector<float> y(static_cast<size_t>(n * rows), NAN);
  matmul_with(table, view, x.data(), n, y.data(), nullptr);
  for (int t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      const size_t i = static_cast<size_t>(t * rows + r);
      const double got = y[i];
      const double tol = (static_cast<double>(cols) + 10.0) * FLT_EPSILON * ref.mag[i];
      if (!(std::fabs(got - ref.y[i]) <= tol))
        fuzz::finding(std::string(isa_name(table.isa)) + " " + std::string(dtype_name(view.type)) +
                      " float path: t=" + std::to_string(t) + " r=" + std::to_string(r) + " got " +
                      std::to_string(got) + " want " + std::to_string(ref.y[i]) + " (tolerance " +
                      std::to_string(tol) + ")");
    }
}

// Each level's reference is computed from the activations as that level
// quantizes them, which depends only on its activation scale block: levels
// with the same block share one reference (computed on first use), instead
// of one per level (a deque: references handed out stay valid). With the
// comparison tracing kept out of this file (fuzz/CMakeLists.txt): 1,662 ->
// 7,527 runs in 30 s from the same grown corpus (Zen 4); the references
// were most of this target's time.
template <class Ref>
struct RefCache {
  std::deque<std::pair<int, Ref>> refs;
  template <class Make>
  const Ref& get(int act_scale_block, Make make) {
    for (const auto& [block, ref] : refs)
      if (block == act_scale_block) return ref;
    refs.emplace_back(act_scale_block, make());
    return refs.back().second;
  }
};

void check_int8(const KernelTable& table, const test::BuiltWeight& w, DType type, int64_t rows, int64_t cols,
                int group, const std::vector<float>& x, int n, RefCache<test_exact::ExactRef>& cache) {
  using namespace test_exact;
  const MatmulEntry& e = table.matmul[static_cast<int>(type)];
  const ExactRef& ref = cache.get(e.act_scale_block, [&] {
    ActBlocks a;
    quantize_acts(x.data(), n, cols, padded_cols(type, cols, group), a, e.act_scale_block);
    ExactRef r = exact_reference(w, type, rows, cols, a);
    if (!r.padding_zero) fuzz::finding("quantize_acts left non-zero padding");
    return r;
  });
  std::vector<float> y(static_cast<size_t>(n * rows), NAN);
  matmul_with(table, w.view, x.data(), n, y.data(), nullptr);
  for (int t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      const size_t i = static_cast<size_t>(t * rows + r);
      const double tol = rounding_tolerance(ref, i);
      if (!(std::fabs(y[i] - ref.y[i]) <= tol))
        fuzz::finding(std::string(isa_name(table.isa)) + " " + std::string(dtype_name(type)) +
                      " int8 path: t=" + std::to_string(t) + " r=" + std::to_string(r) + " got " +
                      std::to_string(y[i]) + " want " + std::to_string(ref.y[i]) + " (tolerance " +
                      std::to_string(tol) + ")");
    }
}

// A K-quant weight whose super-block fields come from the input: d and
// dmin from 2^-12..2^-5 (fp16-exact), scales/mins/codes anywhere in their
// ranges, with runs at the ends when the byte says so.
test_kquant::KWeight kquant_weight(DType t, int64_t rows, int64_t cols, Stream& in) {
  const int subs = 256 / test::sub_block_size(t), hi = test_kquant::max_code(t);
  auto pick = [&](int lo, int top) {
    const uint8_t b = in.next();
    if (b >= 248) return b % 2 ? top : lo;
    return lo + b % (top - lo + 1);
  };
  return test_kquant::build_kweight(t, rows, cols, [&](int64_t, int64_t, test::KBlock& b) {
    b.d = std::ldexp(1.0f + static_cast<float>(in.next() % 64) / 64.0f, -5 - in.next() % 8);
    b.dmin = std::ldexp(1.0f + static_cast<float>(in.next() % 64) / 64.0f, -5 - in.next() % 8);
    for (int s = 0; s < subs; ++s) {
      if (t == DType::Q6_K) {
        b.scales.push_back(pick(-128, 127));
      } else {
        b.scales.push_back(pick(0, 63));
        b.mins.push_back(pick(0, 63));
      }
    }
    for (int i = 0; i < 256; ++i) b.codes.push_back(pick(0, hi));
  });
}

void check_kquant_int8(const KernelTable& table, const test_kquant::KWeight& w, DType type, int64_t rows,
                       int64_t cols, const std::vector<float>& x, int n, RefCache<test_kquant::ExactRef>& cache) {
  const MatmulEntry& e = table.matmul[static_cast<int>(type)];
  const test_kquant::ExactRef& ref = cache.get(e.act_scale_block, [&] {
    ActBlocks a;
    quantize_acts(x.data(), n, cols, cols, a, e.act_scale_block);
    return test_kquant::exact_reference(type, w, rows, cols, a);
  });
  std::vector<float> y(static_cast<size_t>(n * rows), NAN);
  matmul_with(table, w.view, x.data(), n, y.data(), nullptr);
  for (int t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      const size_t i = static_cast<size_t>(t * rows + r);
      const double tol = test_kquant::rounding_tolerance(ref, cols, i);
      if (!(std::fabs(y[i] - ref.y[i]) <= tol))
        fuzz::finding(std::string(isa_name(table.isa)) + " " + std::string(dtype_name(type)) +
                      " int8 path: t=" + std::to_string(t) + " r=" + std::to_string(r) + " got " +
                      std::to_string(y[i]) + " want " + std::to_string(ref.y[i]) + " (tolerance " +
                      std::to_string(tol) + ")");
    }
}

void run_kquant(DType type, int64_t rows, int64_t cols, int n, uint8_t mode, Stream& in) {
  const test_kquant::KWeight w = kquant_weight(type, rows, cols, in);
  const std::vector<float> x = activations(in, n, cols, mode);
  RefCache<test_kquant::ExactRef> exact;
  std::optional<FloatRef> plain;
  for (Isa isa : supported_isas()) {
    const KernelTable& table = kernel_table(isa);
    if (table.matmul[static_cast<int>(type)].int8_acts) {
      check_kquant_int8(table, w, type, rows, cols, x, n, exact);
    } else {
      if (!plain)
        plain = float_reference([&](int64_t r, int64_t k) { return test_kquant::kweight_value(type, w, cols, r, k); },
                                rows, cols, x, n);
      check_float(table, w.view, *plain, rows, cols, x, n);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Bytes opts(data, size);
  const DType type = kTypes[opts.take_byte() % std::size(kTypes)];
  const bool pq = is_pq(type);
  const bool gguf_blocks = !pq && type != DType::F32 && type != DType::F16 && type != DType::BF16;
  const int64_t rows = 1 + opts.take_byte() % 48;
  const uint8_t c = opts.take_byte();
  const int64_t cols = is_kquant(type) ? 256 * (1 + c % 3) : gguf_blocks ? 32 * (1 + c % 12) : 1 + c % 400;
  const int group = pq ? 32 << (opts.take_byte() % 3) : 0;
  const int n = 1 + opts.take_byte() % 40;  // past 32: the GGUF kernels' token chunks (gguf_kernels.h)
  const uint64_t seed = opts.take_byte();
  const uint8_t mode = opts.take_byte();

  Stream in(opts.rest());
  if (is_kquant(type)) {
    run_kquant(type, rows, cols, n, mode, in);
    return 0;
  }
  int lo = 0, hi = 0;
  code_range(type, lo, hi);
  const int span = hi - lo + 1;
  // Codes from the input: mostly arbitrary, with runs at the ends of the
  // range (the largest integer sums) when the byte says so.
  test::CodeFn code = [&](int64_t, int64_t) {
    const uint8_t b = in.next();
    if (b >= 250) return b % 2 ? hi : lo;
    return lo + b % span;
  };
  const test::BuiltWeight w =
      test::build_weight(type, rows, cols, group, seed, gguf_blocks || pq ? code : test::CodeFn{});
  const std::vector<float> x = activations(in, n, cols, mode);

  RefCache<test_exact::ExactRef> exact;
  std::optional<FloatRef> plain;
  for (Isa isa : supported_isas()) {
    const KernelTable& table = kernel_table(isa);
    if (table.matmul[static_cast<int>(type)].int8_acts) {
      check_int8(table, w, type, rows, cols, group, x, n, exact);
    } else {
      if (!plain)
        plain = float_reference(
            [&](int64_t r, int64_t k) { return static_cast<double>(w.values[static_cast<size_t>(r * cols + k)]); }, rows,
            cols, x, n);
      check_float(table, w.view, *plain, rows, cols, x, n);
    }
  }
  return 0;
}
