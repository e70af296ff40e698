// llama.cpp's GGUF types Q4_1, Q5_0, Q5_1 and the K-quants Q2_K..Q8_K:
// sizes and ids, decoding against the independent Python reference
// (tests/data/formats/gguf_kquants_golden.json, exact), hand-built blocks
// whose values are worked out by hand, packed blocks with distinct
// sub-block scales, quantize/dequantize round trips, and the matmul of
// every kernel level against dequantize-then-dot.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/gguf_kquant_pack.h"
#include "common/test_util.h"
#include "formats/format_test_util.h"
#include "formats/gguf.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"
#include "kernels/table.h"
#include "util/thread_pool.h"

namespace pocket::test {
namespace {

struct TypeFacts {
  DType type;
  const char* name;
  uint32_t gguf_id;
  int block_elems, block_bytes;
};

// From ggml's block structs (ggml-common.h): sizeof(block_*) and QK*.
constexpr TypeFacts kFacts[] = {
    {DType::Q4_1, "Q4_1", 3, 32, 20},    {DType::Q5_0, "Q5_0", 6, 32, 22},    {DType::Q5_1, "Q5_1", 7, 32, 24},
    {DType::Q2_K, "Q2_K", 10, 256, 84},  {DType::Q3_K, "Q3_K", 11, 256, 110}, {DType::Q4_K, "Q4_K", 12, 256, 144},
    {DType::Q5_K, "Q5_K", 13, 256, 176}, {DType::Q6_K, "Q6_K", 14, 256, 210}, {DType::Q8_K, "Q8_K", 15, 256, 292},
};

std::string type_param_name(const ::testing::TestParamInfo<TypeFacts>& info) { return info.param.name; }

TensorView weight(DType t, int64_t rows, int64_t cols, const std::vector<uint8_t>& bytes) {
  TensorView w;
  w.name = "w";
  w.type = t;
  w.shape = {rows, cols};
  w.data = bytes.data();
  w.nbytes = bytes.size();
  return w;
}

std::vector<float> dequant_all(const TensorView& w) {
  std::vector<float> out(static_cast<size_t>(w.numel()));
  for (int64_t r = 0; r < w.rows(); ++r) kernels::dequant_row(w, r, out.data() + r * w.cols());
  return out;
}

class KQuantType : public ::testing::TestWithParam<TypeFacts> {};

TEST_P(KQuantType, SizesIdsAndNames) {
  const TypeFacts& f = GetParam();
  EXPECT_EQ(dtype_block_elems(f.type), f.block_elems);
  EXPECT_EQ(dtype_block_bytes(f.type), f.block_bytes);
  EXPECT_EQ(dtype_name(f.type), f.name);
  EXPECT_EQ(dtype_from_name(f.name), f.type);
  EXPECT_EQ(gguf_type_id(f.type), f.gguf_id);
  EXPECT_EQ(dtype_from_gguf(f.gguf_id), f.type);
  EXPECT_NE(gguf_supported_types().find(f.name), std::string::npos);
  EXPECT_EQ(tensor_nbytes(f.type, {3, 4LL * f.block_elems}, 0, "t"), 3u * 4 * f.block_bytes);
  // Rows must split into whole blocks.
  std::string msg = error_of([&] { tensor_nbytes(f.type, {2, f.block_elems + 16LL}, 0, "blk.0.attn_q.weight"); });
  EXPECT_NE(msg.find("blk.0.attn_q.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("block size " + std::to_string(f.block_elems)), std::string::npos) << msg;
  // A size that overflows 64 bits is an error, not a wrap-around.
  msg = error_of([&] { tensor_nbytes(f.type, {int64_t{1} << 40, int64_t{1} << 40}, 0, "huge"); });
  EXPECT_NE(msg.find("overflow"), std::string::npos) << msg;
}

// --- exact agreement with the Python reference ------------------------------

TEST(KQuantGolden, EveryTypeMatchesThePythonReferenceExactly) {
  std::ifstream in(pocket::test::test_data_dir() + "/formats/gguf_kquants_golden.json");
  ASSERT_TRUE(in) << "missing golden file; run tools/gguf_kquants_reference.py";
  const auto golden = nlohmann::json::parse(in);
  std::set<std::string> seen;
  for (const auto& c : golden.at("cases")) {
    const std::string name = c.at("type");
    SCOPED_TRACE(name);
    seen.insert(name);
    const auto type = dtype_from_gguf(c.at("gguf_type_id").get<uint32_t>());
    ASSERT_TRUE(type.has_value());
    ASSERT_EQ(dtype_name(*type), name);
    const std::string hex = c.at("data_hex");
    std::vector<uint8_t> bytes(hex.size() / 2);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    const int64_t rows = c.at("rows"), cols = c.at("cols");
    ASSERT_EQ(bytes.size(), tensor_nbytes(*type, {rows, cols}, 0, name));
    const auto want_bits = c.at("values_f32_bits").get<std::vector<uint32_t>>();
    ASSERT_EQ(want_bits.size(), static_cast<size_t>(rows * cols));
    const std::vector<float> got = dequant_all(weight(*type, rows, cols, bytes));
    // Tolerance 0: both sides round the exact value once to f32 (== treats
    // +0 and -0 alike, which is the only freedom allowed).
    int mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      float want;
      std::memcpy(&want, &want_bits[i], 4);
      if (got[i] != want && ++mismatches <= 5)
        ADD_FAILURE() << "element " << i << " (row " << i / cols << ", col " << i % cols << "): got " << got[i]
                      << ", reference " << want;
    }
    EXPECT_EQ(mismatches, 0);
  }
  for (const auto& f : kFacts) EXPECT_TRUE(seen.count(f.name)) << "golden file lacks " << f.name;
}

// --- hand-built blocks --------------------------------------------------------

std::vector<uint8_t> block_of(DType t) { return std::vector<uint8_t>(static_cast<size_t>(dtype_block_bytes(t)), 0); }
void set_u16(std::vector<uint8_t>& b, size_t off, uint16_t v) {
  b[off] = static_cast<uint8_t>(v & 0xff);
  b[off + 1] = static_cast<uint8_t>(v >> 8);
}
constexpr uint16_t kHalfOne = 0x3C00, kHalfTwo = 0x4000, kHalfHalf = 0x3800, kHalfMinusOne = 0xBC00;

std::vector<float> decode_block(DType t, const std::vector<uint8_t>& b) {
  return dequant_all(weight(t, 1, dtype_block_elems(t), b));
}

TEST(KQuantByHand, Q4_1) {  // d = 1, m = 0.5, every byte 0x93: low nibble 3, high nibble 9
  auto b = block_of(DType::Q4_1);
  set_u16(b, 0, kHalfOne), set_u16(b, 2, kHalfHalf);
  std::fill(b.begin() + 4, b.end(), 0x93);
  auto v = decode_block(DType::Q4_1, b);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(v[i], i < 16 ? 3.5f : 9.5f) << i;
}

TEST(KQuantByHand, Q5_0) {  // d = 1, fifth bit set for elements 0-15, nibbles 1 (low) and 2 (high)
  auto b = block_of(DType::Q5_0);
  set_u16(b, 0, kHalfOne);
  b[2] = b[3] = 0xff;  // qh = 0x0000ffff
  std::fill(b.begin() + 6, b.end(), 0x21);
  auto v = decode_block(DType::Q5_0, b);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(v[i], i < 16 ? 17 - 16 : 2 - 16) << i;
}

TEST(KQuantByHand, Q5_1) {  // d = 2, m = -1, fifth bit set for elements 16-31
  auto b = block_of(DType::Q5_1);
  set_u16(b, 0, kHalfTwo), set_u16(b, 2, kHalfMinusOne);
  b[6] = b[7] = 0xff;  // qh = 0xffff0000
  std::fill(b.begin() + 8, b.end(), 0x21);
  auto v = decode_block(DType::Q5_1, b);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(v[i], i < 16 ? 2 * 1 - 1 : 2 * 18 - 1) << i;
}

TEST(KQuantByHand, Q2_K) {  // scale 1, min 2 everywhere; byte 0xE4 holds codes 0,1,2,3 (bits 0-1 .. 6-7)
  auto b = block_of(DType::Q2_K);
  std::fill(b.begin(), b.begin() + 16, 0x21);
  std::fill(b.begin() + 16, b.begin() + 80, 0xE4);
  set_u16(b, 80, kHalfOne), set_u16(b, 82, kHalfOne);
  auto v = decode_block(DType::Q2_K, b);
  // Element i of each half of 128 reads bits 2 * ((i % 128) / 32): code (i % 128) / 32.
  for (int i = 0; i < 256; ++i) EXPECT_EQ(v[i], (i % 128) / 32 - 2) << i;
}

TEST(KQuantByHand, Q3_K) {
  auto b = block_of(DType::Q3_K);
  std::fill(b.begin(), b.begin() + 32, 0x0F);        // high bit set for the first half only
  std::fill(b.begin() + 32, b.begin() + 96, 0xE4);   // low codes 0,1,2,3 by pass
  std::fill(b.begin() + 96, b.begin() + 104, 0x11);  // scale low nibbles 1
  std::fill(b.begin() + 104, b.begin() + 108, 0xAA); // scale high bits 2: scale 33 - 32 = 1
  set_u16(b, 108, kHalfTwo);
  auto v = decode_block(DType::Q3_K, b);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(v[i], 2 * ((i % 128) / 32 - (i < 128 ? 0 : 4))) << i;
}

TEST(KQuantByHand, Q4_K) {  // d = dmin = 1; every sub-block scale 1, min 2; low nibble 3, high 5
  auto b = block_of(DType::Q4_K);
  set_u16(b, 0, kHalfOne), set_u16(b, 2, kHalfOne);
  const uint8_t scales[12] = {1, 1, 1, 1, 2, 2, 2, 2, 0x21, 0x21, 0x21, 0x21};
  std::memcpy(&b[4], scales, 12);
  std::fill(b.begin() + 16, b.end(), 0x53);
  auto v = decode_block(DType::Q4_K, b);
  // Sub-block j (32 elements) reads the low nibbles when j is even.
  for (int i = 0; i < 256; ++i) EXPECT_EQ(v[i], ((i / 32) % 2 == 0 ? 3 : 5) - 2) << i;
}

TEST(KQuantByHand, Q5_K) {  // as Q4_K, plus qh bytes 0x55: fifth bit for even sub-blocks
  auto b = block_of(DType::Q5_K);
  set_u16(b, 0, kHalfOne), set_u16(b, 2, kHalfOne);
  const uint8_t scales[12] = {1, 1, 1, 1, 2, 2, 2, 2, 0x21, 0x21, 0x21, 0x21};
  std::memcpy(&b[4], scales, 12);
  std::fill(b.begin() + 16, b.begin() + 48, 0x55);
  std::fill(b.begin() + 48, b.end(), 0x53);
  auto v = decode_block(DType::Q5_K, b);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(v[i], ((i / 32) % 2 == 0 ? 3 + 16 : 5) - 2) << i;
}

TEST(KQuantByHand, Q6_K) {  // ql 0x21, qh 0xE4 (bit pair k = k), scales 1, d = 1
  auto b = block_of(DType::Q6_K);
  std::fill(b.begin(), b.begin() + 128, 0x21);
  std::fill(b.begin() + 128, b.begin() + 192, 0xE4);
  std::fill(b.begin() + 192, b.begin() + 208, 1);
  set_u16(b, 208, kHalfOne);
  auto v = decode_block(DType::Q6_K, b);
  // Quarter k of each half: low nibble (k < 2) = 1 or high nibble = 2, high bits k.
  for (int i = 0; i < 256; ++i) {
    const int k = (i % 128) / 32, lo = k < 2 ? 1 : 2;
    EXPECT_EQ(v[i], (lo | k << 4) - 32) << i;
  }
}

TEST(KQuantByHand, Q8_K) {  // d = 0.5 (f32), codes -128..127
  auto b = block_of(DType::Q8_K);
  const float d = 0.5f;
  std::memcpy(b.data(), &d, 4);
  for (int j = 0; j < 256; ++j) b[4 + j] = static_cast<uint8_t>(j);
  auto v = decode_block(DType::Q8_K, b);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(v[j], 0.5f * static_cast<int8_t>(j)) << j;
}

// --- packed blocks: every sub-block with its own scale and min ---------------

TEST_P(KQuantType, PackedFieldsDecodeToTheFormula) {
  const DType t = GetParam().type;
  const int n = dtype_block_elems(t), ns = n / sub_block_size(t);
  KBlock k;
  k.d = t == DType::Q8_K ? 0.25f : 0.5f;
  k.dmin = 0.25f;
  const int smax = t == DType::Q2_K ? 15 : t == DType::Q6_K ? 127 : 63;
  const int levels = t == DType::Q2_K ? 4 : t == DType::Q3_K ? 8 : t == DType::Q6_K ? 64
                     : (t == DType::Q4_1 || t == DType::Q4_K) ? 16 : t == DType::Q8_K ? 256 : 32;
  for (int s = 0; s < ns; ++s) {
    k.scales.push_back(t == DType::Q6_K ? (s % 2 ? -(3 * s + 1) : 5 * s + 2) : (7 * s + 3) % (smax + 1));
    k.mins.push_back((5 * s + 1) % (smax + 1));
  }
  for (int i = 0; i < n; ++i) k.codes.push_back((i * 7 + i / 16) % levels - (t == DType::Q8_K ? 128 : 0));
  auto v = decode_block(t, pack_block(t, k));
  for (int i = 0; i < n; ++i) ASSERT_EQ(v[i], kblock_value(t, k, i)) << "element " << i;  // small dyadic values: exact
}

// Round trip through the test quantizer: a wrong bit position in either
// the packer or the decoder would give errors of the order of the values.
TEST_P(KQuantType, QuantizeThenDequantizeIsClose) {
  const DType t = GetParam().type;
  const int64_t rows = 3, cols = 2 * dtype_block_elems(t);
  Rng rng(41);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (auto& v : x) v = rng.uniform(-1.0f, 1.0f) + (rng.next() % 16 == 0 ? 3.0f : 0.0f);  // some outliers
  auto bytes = quantize_k(t, x.data(), rows, cols);
  auto y = dequant_all(weight(t, rows, cols, bytes));
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) err += (y[i] - x[i]) * (y[i] - x[i]), ref += x[i] * x[i];
  const double rel = std::sqrt(err / ref);
  // Round to nearest: about step / sqrt(12) per element, steps widened by
  // the outliers; a scrambled layout gives errors near 1.
  const double bound = t == DType::Q2_K ? 0.4 : t == DType::Q3_K ? 0.35 : t == DType::Q4_1 || t == DType::Q4_K ? 0.12
                       : t == DType::Q6_K ? 0.03 : t == DType::Q8_K ? 0.01 : 0.1;
  EXPECT_LT(rel, bound) << "relative RMS error";
  EXPECT_GT(rel, 0.0);
}

// Every kernel level: results equal a double-precision dot of the
// dequantized rows, on an odd number of rows, single- and multi-threaded.
// Levels with an int8 kernel for the type (Q4_K, Q5_K, Q6_K: gguf_kernels.h)
// quantize the activations to int8 first (one scale per 256 columns), which
// moves each product by at most |w| * d/2 (d = max|x| / 127 of those
// columns); the others
// run the scalar entry and differ only by rounding (1e-6 of sum |w x|).
// tests/kernels/test_matmul_kquant.cpp checks the int8 kernels exactly.
TEST_P(KQuantType, MatmulOnEveryIsaMatchesDequantizedDot) {
  const DType t = GetParam().type;
  const int64_t rows = 7, cols = 3 * dtype_block_elems(t);
  const int n = 3;
  Rng rng(5);
  std::vector<float> w(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(n * cols));
  for (auto& v : w) v = rng.uniform();
  for (auto& v : x) v = rng.uniform();
  auto bytes = quantize_k(t, w.data(), rows, cols);
  const TensorView tv = weight(t, rows, cols, bytes);
  const auto wd = dequant_all(tv);
  std::vector<double> want(static_cast<size_t>(n * rows)), scale(want.size());
  for (int k = 0; k < n; ++k)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        want[k * rows + r] += double{wd[r * cols + c]} * x[k * cols + c];
        scale[k * rows + r] += std::fabs(double{wd[r * cols + c]} * x[k * cols + c]);
      }
  // The activation error bound for activations sharing one scale per
  // `block` columns.
  auto act_err = [&](int block, int k, int64_t r) {
    double err = 0;
    for (int64_t b = 0; b < cols; b += block) {
      double amax = 0, wsum = 0;
      for (int64_t c = b; c < std::min(cols, b + block); ++c) {
        amax = std::max(amax, std::fabs(double{x[k * cols + c]}));
        wsum += std::fabs(double{wd[r * cols + c]});
      }
      err += amax / 127.0 / 2.0 * wsum;
    }
    return err;
  };
  ThreadPool pool(2);
  for (auto isa : kernels::supported_isas()) {
    SCOPED_TRACE(kernels::isa_name(isa));
    const auto& table = kernels::kernel_table(isa);
    const auto& entry = table.matmul[static_cast<int>(t)];
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> y(static_cast<size_t>(n * rows), NAN);
      kernels::matmul_with(table, tv, x.data(), n, y.data(), p);
      for (int k = 0; k < n; ++k)
        for (int64_t r = 0; r < rows; ++r) {
          const size_t i = static_cast<size_t>(k * rows + r);
          const double tol = entry.int8_acts ? act_err(entry.act_scale_block, k, r) + 2e-5 * scale[i]
                                             : 1e-6 * scale[i] + 1e-30;
          ASSERT_NEAR(y[i], want[i], tol) << "output " << i;
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, KQuantType, ::testing::ValuesIn(kFacts), type_param_name);

}  // namespace
}  // namespace pocket::test
