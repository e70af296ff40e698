// Scalar dequantization of llama.cpp's GGUF block types beyond Q8_0/Q4_0:
// Q4_1, Q5_0, Q5_1 (blocks of 32) and the K-quants Q2_K..Q8_K
// (super-blocks of 256). Layouts follow ggml's block structs; offsets are
// spelled out here so no struct padding or host endianness is involved.
//
// Every value here is the exact real value of the format's formula rounded
// once to f32: fp16 scales have 11 significant bits, so d * sc * q needs at
// most 11 + 7 + 5 = 23 bits (Q6_K: |sc| <= 128, |q| <= 32; Q5_K: 11 + 6 + 5)
// and is exact in f32 in either order; only the final "+ m" (or Q8_K's
// f32 d * q) rounds. That makes the result the
// same whether or not the compiler fuses a * b + c, on every platform, and
// lets the golden tests (tests/data/formats/gguf_kquants_golden.json,
// written by tools/gguf_kquants_reference.py) compare exactly.
#include <cstring>

#include "kernels/dequant.h"
#include "kernels/gguf_layout.h"
#include "util/half.h"

namespace pocket::kernels {

namespace {

float half_at(const uint8_t* p) { return f16_to_f32(static_cast<uint16_t>(p[0] | p[1] << 8)); }

float f32_at(const uint8_t* p) {
  uint32_t u = gguf_u32(p);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// q * d + m; q * d is exact (see the top of the file).
float affine(float d, int q, float m) { return d * static_cast<float>(q) + m; }

// --- blocks of 32: low nibble of byte j is element j, high nibble j + 16 ---

void block_q4_1(const uint8_t* b, float* y) {  // d, m, qs[16]
  const float d = half_at(b), m = half_at(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = affine(d, qs[j] & 0x0f, m);
    y[j + 16] = affine(d, qs[j] >> 4, m);
  }
}

// Q5: bit j of the little-endian u32 `qh` is the fifth bit of element j.
int q5_code(const uint8_t* qs, uint32_t qh, int j) {
  const int lo = j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
  return lo | static_cast<int>((qh >> j) & 1) << 4;
}

void block_q5_0(const uint8_t* b, float* y) {  // d, qh[4], qs[16]
  const float d = half_at(b);
  const uint32_t qh = gguf_u32(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(q5_code(b + 6, qh, j) - 16);
}

void block_q5_1(const uint8_t* b, float* y) {  // d, m, qh[4], qs[16]
  const float d = half_at(b), m = half_at(b + 2);
  const uint32_t qh = gguf_u32(b + 4);
  for (int j = 0; j < 32; ++j) y[j] = affine(d, q5_code(b + 8, qh, j), m);
}

// --- K-quants: 256 elements per super-block --------------------------------

// Q2_K: scales[16] (low nibble scale, high nibble min, one byte per 16
// elements), qs[64], d, dmin. Each half of 128 elements uses 32 bytes of qs
// four times, two bits at a time; within a pass, bytes 0-15 and 16-31 are
// two sub-blocks of 16.
void block_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const float d = half_at(b + 80), dmin = half_at(b + 82);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b + 16 + 32 * half;
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part) {
        const uint8_t sc = *scales++;
        const float dl = d * static_cast<float>(sc & 0x0f), ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = affine(dl, (q[16 * part + l] >> shift) & 3, -ml);
      }
    }
  }
}

// Q3_K: hmask[32], qs[64], scales[12], d. Sixteen 6-bit scales (biased by
// 32): the low 4 bits of scale i are a nibble of bytes 0-7 (i < 8: low
// nibble of byte i, else high nibble of byte i - 8), the high 2 bits are the
// (i / 4)-th bit pair of byte 8 + i % 4. The low two bits of each quant are
// laid out as in Q2_K; a clear hmask bit subtracts 4 (codes -4..3).
void block_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* s = b + 96;
  const float d = half_at(b + 108);
  int scale[16];
  for (int i = 0; i < 16; ++i) {
    const int lo = i < 8 ? s[i] & 0x0f : s[i - 8] >> 4;
    const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    scale[i] = (lo | hi << 4) - 32;
  }
  int is = 0;
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b + 32 + 32 * half;
    for (int pass = 0; pass < 4; ++pass) {
      const int shift = 2 * pass;
      const uint8_t hbit = static_cast<uint8_t>(1u << (4 * half + pass));
      for (int part = 0; part < 2; ++part) {
        const float dl = d * static_cast<float>(scale[is++]);
        for (int l = 0; l < 16; ++l) {
          const int k = 16 * part + l;
          const int v = ((q[k] >> shift) & 3) - ((hmask[k] & hbit) ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
      }
    }
  }
}

// Q4_K: d, dmin, scales[12] (gguf_layout.h), qs[128]. Each 64 elements use
// 32 bytes: low nibbles are the first sub-block of 32, high nibbles the
// second.
// Q5_K adds qh[32] before qs: bit j of qh[l] is the fifth bit of element l
// of sub-block j.
template <bool kFive>
void block_q45_k(const uint8_t* b, float* y) {
  const float d = half_at(b), dmin = half_at(b + 2);
  uint64_t scales, mins;
  kquant_scales_mins(b + 4, scales, mins);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (kFive ? 48 : 16);
  for (int j = 0; j < 8; ++j) {  // sub-blocks of 32
    const int sc = static_cast<int>(scales >> (8 * j) & 0xff), m = static_cast<int>(mins >> (8 * j) & 0xff);
    const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> shift) & 0x0f;
      if constexpr (kFive) v |= ((qh[l] >> j) & 1) << 4;
      *y++ = affine(dl, v, -ml);
    }
  }
}

// Q6_K: ql[128], qh[64], scales[16] (int8), d. Each half of 128 elements
// uses 64 bytes of ql and 32 of qh: element 32 * k + l (k = 0..3) takes the
// low (k < 2) or high nibble of ql[l + 32 * (k % 2)] and bits 2k, 2k+1 of
// qh[l]; codes are biased by 32; one scale per 16 elements.
void block_q6_k(const uint8_t* b, float* y) {
  const float d = half_at(b + 208);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b + 64 * half;
    const uint8_t* qh = b + 128 + 32 * half;
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * half);
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const int lo = (ql[l + 32 * (k % 2)] >> (4 * (k / 2))) & 0x0f;
        const int hi = (qh[l] >> (2 * k)) & 3;
        const float dl = d * static_cast<float>(sc[2 * k + l / 16]);
        y[128 * half + 32 * k + l] = dl * static_cast<float>((lo | hi << 4) - 32);
      }
    }
  }
}

// Q8_K: d (f32), qs[256] (int8), bsums[16] (only used by ggml's dot products).
void block_q8_k(const uint8_t* b, float* y) {
  const float d = f32_at(b);
  for (int j = 0; j < 256; ++j) y[j] = d * static_cast<float>(static_cast<int8_t>(b[4 + j]));
}

}  // namespace

void dequant_gguf_row(DType t, const uint8_t* row, int64_t cols, float* out) {
  void (*block)(const uint8_t*, float*) = nullptr;
  switch (t) {
    case DType::Q4_1: block = block_q4_1; break;
    case DType::Q5_0: block = block_q5_0; break;
    case DType::Q5_1: block = block_q5_1; break;
    case DType::Q2_K: block = block_q2_k; break;
    case DType::Q3_K: block = block_q3_k; break;
    case DType::Q4_K: block = block_q45_k<false>; break;
    case DType::Q5_K: block = block_q45_k<true>; break;
    case DType::Q6_K: block = block_q6_k; break;
    case DType::Q8_K: block = block_q8_k; break;
    default: return;  // not one of these types: the caller's switch never gets here
  }
  const int64_t elems = dtype_block_elems(t), bytes = dtype_block_bytes(t);
  for (int64_t b = 0; b < cols / elems; ++b) block(row + b * bytes, out + b * elems);
}

}  // namespace pocket::kernels
