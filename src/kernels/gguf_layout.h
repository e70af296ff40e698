// Byte-layout helpers of llama.cpp's GGUF block types shared by the scalar
// decoder (dequant_gguf.cpp) and the SIMD kernels (gguf_kernels.h). Plain
// integer code; unnamed namespace so every ISA translation unit keeps its
// own copy (see x86_vec.h).
#pragma once
#include <cstdint>

namespace pocket::kernels {
namespace {

inline uint32_t gguf_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

// Q4_K/Q5_K: eight 6-bit (scale, min) pairs in 12 bytes. Pairs 0-3 are the
// low 6 bits of bytes 0-3 (scales) and 4-7 (mins); pairs 4-7 take their low
// 4 bits from the nibbles of bytes 8-11 (scale low, min high) and their top
// 2 bits from the spare top bits of bytes 0-3 (scales) and 4-7 (mins).
// Unpacked four bytes at a time: byte j of `scales` / `mins` (little-endian)
// is pair j's scale / min.
inline void kquant_scales_mins(const uint8_t* s, uint64_t& scales, uint64_t& mins) {
  const uint32_t s0 = gguf_u32(s), s1 = gguf_u32(s + 4), s2 = gguf_u32(s + 8);
  // Per byte: (b >> 2) & 0x30 moves the top two bits to bits 4-5; the bits a
  // 32-bit shift brings in from the next byte land in bits 6-7 and are masked.
  const uint32_t sc_hi = (s2 & 0x0f0f0f0fu) | ((s0 >> 2) & 0x30303030u);
  const uint32_t m_hi = ((s2 >> 4) & 0x0f0f0f0fu) | ((s1 >> 2) & 0x30303030u);
  scales = (s0 & 0x3f3f3f3fu) | static_cast<uint64_t>(sc_hi) << 32;
  mins = (s1 & 0x3f3f3f3fu) | static_cast<uint64_t>(m_hi) << 32;
}

}  // namespace
}  // namespace pocket::kernels
