// Byte-layout helpers of llama.cpp's GGUF block types shared by the scalar
// decoder (dequant_gguf.cpp) and the SIMD kernels (gguf_kernels.h). Plain
// integer code; unnamed namespace so every ISA translation unit keeps its
// own copy (see x86_vec.h).
#pragma once
#include <cstdint>

namespace pocket::kernels {
namespace {

// Q4_K/Q5_K: eight 6-bit (scale, min) pairs in 12 bytes. Pairs 0-3 are the
// low 6 bits of bytes 0-3 (scales) and 4-7 (mins); pairs 4-7 take their low
// 4 bits from the nibbles of bytes 8-11 and their top 2 bits from the spare
// top bits of bytes 0-3 (scales) and 4-7 (mins).
inline void scale_min_k4(const uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0x0f) | (s[j - 4] >> 6) << 4;
    m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
  }
}

}  // namespace
}  // namespace pocket::kernels
