// 16-lane vector traits for the x86 kernels: Avx512 maps a lane group to one
// zmm register, Avx2 to a pair of ymm registers. The kernel templates in
// x86_kernels.h are written once against these traits.
//
// Included only by *_avx2.cpp / *_avxvnni.cpp / *_avx512.cpp. Everything is in an unnamed
// namespace so each translation unit keeps its own copy, compiled with its
// own ISA flags (no ODR merging of differently-compiled inline functions).
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace pocket::kernels {
namespace {

inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float half_to_float(const uint8_t* p) { return _cvtsh_ss(static_cast<uint16_t>(p[0] | p[1] << 8)); }

// An accumulator the compiler must hold as it is after each add. GCC
// reassociates a chain of integer adds (acc += p0; acc += p1; ...) into a
// tree: every product of a block is computed first and spilled, then summed
// (56 ymm spills and 56 reloads per 32-column block of the AVX2 4-token PQ4
// tile). The empty asm emits nothing; it only stops that rewrite.
template <class R>
inline R chained(R v) {
  asm("" : "+x"(v));
  return v;
}

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
struct Avx512 {
  static constexpr int kFloatRows = 4;  // float_kernels.h: 4 rows x 4 tokens of accumulators
  using I = __m512i;  // 16 x int32 (or 64 x int8)
  using F = __m512;   // 16 x float
  // u8 x s8 dot of 8-bit weights needs w + 128 (xor): correct by 128 * sum(x).
  static constexpr int kS8Bias = 128;
  static constexpr bool kInt16Sums = false;  // one vpdpbusd per dot: nothing to save
  // pq_tile's token tile: 3 x 8 accumulators fit the 32 registers.
  static constexpr int kPqTokTile = 8;

  static I zero_i() { return _mm512_setzero_si512(); }
  static F zero_f() { return _mm512_setzero_ps(); }
  static I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static I low_nibbles(I v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0f)); }
  static I high_nibbles(I v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0f)); }
  static I bcast4(const int8_t* x) { return _mm512_set1_epi32(load_i32(x)); }
  // nib | (bit S of each plane byte moved to bit 4): a PQ5 code
  // (core/pq_format.h). One 16-bit shift, then nib | (shifted & 0x10) in one
  // ternary-logic op (0xF8 = A | (B & C)); bits shifted in from the
  // neighbouring byte never reach bit 4 of the mask.
  template <int S>
  static I with_bit(I nib, I plane) {
    I moved = plane;
    if constexpr (S > 4) moved = _mm512_srli_epi16(plane, S - 4);
    if constexpr (S < 4) moved = _mm512_slli_epi16(plane, 4 - S);
    return _mm512_ternarylogic_epi32(nib, moved, _mm512_set1_epi8(0x10), 0xF8);
  }
  // acc += sum over each 4-byte lane of u[i] * s[i], u unsigned (< 128 here), s signed.
  static I dot_u8s8(I acc, I u, I s) { return _mm512_dpbusd_epi32(acc, u, s); }
  static I dot_s8s8(I acc, I w, I x) { return _mm512_dpbusd_epi32(acc, _mm512_xor_si512(w, _mm512_set1_epi8(-128)), x); }
  static F to_f(I v) { return _mm512_cvtepi32_ps(v); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F load_f16(const void* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p))); }
  static F load_bf16(const void* p) {
    __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  }
  static float half(const uint8_t* p) { return half_to_float(p); }
  static F load_f32(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static float hsum(F v) { return _mm512_reduce_add_ps(v); }

  // 8-lane (one 32-byte GGUF block) operations.
  static __m256i dot8_u8s8(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
  static __m256i dot8_s8s8(__m256i w, __m256i x) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_xor_si256(w, _mm256_set1_epi8(-128)), x);
  }
  // acc + pairwise int16 products of p and s summed into int32 lanes.
  static __m256i madd_acc(__m256i acc, __m256i p, __m256i s) { return _mm256_dpwssd_epi32(acc, p, s); }
};
#endif

#if defined(__AVX512VBMI__)
// Avx512 with the high nibble and PQ5's fifth bit moved by vpmultishiftqb
// (any 8-bit field of a byte's qword) instead of 16-bit shifts: on Intel
// cores the shifts share port 0 with vpdpbusd, the byte permute runs on
// port 5, so the unpacking leaves the dots their port. The same bytes as
// Avx512's (results bit for bit).
struct Avx512Vbmi : Avx512 {
  // Control for vpmultishiftqb: byte j takes the 8 bits of its qword from
  // bit 8 j + O (mod 64).
  static constexpr long long field_ctrl(int o) {
    long long c = 0;
    for (int j = 0; j < 8; ++j) c |= static_cast<long long>((8 * j + o) & 63) << (8 * j);
    return c;
  }
  static I high_nibbles(I v) {
    return _mm512_and_si512(_mm512_multishift_epi64_epi8(_mm512_set1_epi64(field_ctrl(4)), v), _mm512_set1_epi8(0x0f));
  }
  template <int S>
  static I with_bit(I nib, I plane) {
    I moved = plane;
    if constexpr (S != 4) moved = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(field_ctrl(S - 4)), plane);
    return _mm512_ternarylogic_epi32(nib, moved, _mm512_set1_epi8(0x10), 0xF8);
  }
};
#endif

struct Avx2 {
  struct I {
    __m256i a, b;  // rows 0-7, rows 8-15
  };
  struct F {
    __m256 a, b;
  };
  // Signs move onto the activations (maddubs(|w|, sign(x, w))): no bias.
  static constexpr int kS8Bias = 0;

  static I zero_i() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
  static F zero_f() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static I load(const uint8_t* p) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32))};
  }
  static __m256i nib(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0f)); }
  static I low_nibbles(I v) { return {nib(v.a), nib(v.b)}; }
  static I high_nibbles(I v) { return {nib(_mm256_srli_epi16(v.a, 4)), nib(_mm256_srli_epi16(v.b, 4))}; }
  // nib | (bit S of each plane byte moved to bit 4): a PQ5 code (see Avx512).
  template <int S>
  static __m256i with_bit8(__m256i nib, __m256i plane) {
    __m256i moved = plane;
    if constexpr (S > 4) moved = _mm256_srli_epi16(plane, S - 4);
    if constexpr (S < 4) moved = _mm256_slli_epi16(plane, 4 - S);
    return _mm256_or_si256(nib, _mm256_and_si256(moved, _mm256_set1_epi8(0x10)));
  }
  template <int S>
  static I with_bit(I nib, I plane) {
    return {with_bit8<S>(nib.a, plane.a), with_bit8<S>(nib.b, plane.b)};
  }
  static I bcast4(const int8_t* x) {
    __m256i v = _mm256_set1_epi32(load_i32(x));
    return {v, v};
  }
  // maddubs saturates at int16: fine for nibbles (2 * 15 * 127 < 32767).
  static __m256i dot8_u8s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
  // |w| <= 127 (codes are symmetric), so 2 * 127 * 127 fits too.
  static __m256i dot8_s8s8(__m256i w, __m256i x) { return dot8_u8s8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)); }
  static __m256i madd_acc(__m256i acc, __m256i p, __m256i s) { return chained(_mm256_add_epi32(acc, _mm256_madd_epi16(p, s))); }
  static I dot_u8s8(I acc, I u, I s) {
    return {chained(_mm256_add_epi32(acc.a, dot8_u8s8(u.a, s.a))), chained(_mm256_add_epi32(acc.b, dot8_u8s8(u.b, s.b)))};
  }
  // 4-bit codes (u <= 15) times int8 (|s| <= 128): a maddubs pair is at most
  // 3,840 in magnitude, so eight of them (a 32-column block of PQ4) add up
  // exactly in int16 (30,720 < 32,767) before one madd widens them: 80
  // instead of 128 multiply uops per block of a 4-token tile, the same
  // integers (tiled_kernels.h).
  static constexpr bool kInt16Sums = true;
  static I add16_u8s8(I acc, I u, I s) {
    return {chained(_mm256_add_epi16(acc.a, _mm256_maddubs_epi16(u.a, s.a))),
            chained(_mm256_add_epi16(acc.b, _mm256_maddubs_epi16(u.b, s.b)))};
  }
  static I widen16(I acc, I sums) {
    const __m256i one = _mm256_set1_epi16(1);
    return {_mm256_add_epi32(acc.a, _mm256_madd_epi16(sums.a, one)), _mm256_add_epi32(acc.b, _mm256_madd_epi16(sums.b, one))};
  }
  static I dot_s8s8(I acc, I w, I x) {
    return {chained(_mm256_add_epi32(acc.a, dot8_s8s8(w.a, x.a))), chained(_mm256_add_epi32(acc.b, dot8_s8s8(w.b, x.b)))};
  }
  static F to_f(I v) { return {_mm256_cvtepi32_ps(v.a), _mm256_cvtepi32_ps(v.b)}; }
  static F set1(float v) { return {_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
  static F fma(F a, F b, F c) { return {_mm256_fmadd_ps(a.a, b.a, c.a), _mm256_fmadd_ps(a.b, b.b, c.b)}; }
  static F add(F a, F b) { return {_mm256_add_ps(a.a, b.a), _mm256_add_ps(a.b, b.b)}; }
  static F mul(F a, F b) { return {_mm256_mul_ps(a.a, b.a), _mm256_mul_ps(a.b, b.b)}; }
  static F load_f16(const void* p) {
    const auto* q = static_cast<const __m128i*>(p);
    return {_mm256_cvtph_ps(_mm_loadu_si128(q)), _mm256_cvtph_ps(_mm_loadu_si128(q + 1))};
  }
  static __m256 bf16x8(const void* p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  static F load_bf16(const void* p) { return {bf16x8(p), bf16x8(static_cast<const uint8_t*>(p) + 16)}; }
  static float half(const uint8_t* p) { return half_to_float(p); }
  static F load_f32(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static void store(float* p, F v) {
    _mm256_storeu_ps(p, v.a);
    _mm256_storeu_ps(p + 8, v.b);
  }
  static float hsum(F v) {
    __m256 s = _mm256_add_ps(v.a, v.b);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
  }
};

#if defined(__AVXVNNI__)
// AVX2 plus AVX-VNNI: the Avx2 layout (a ymm pair per 16 lanes) with the
// VEX-encoded vpdpbusd / vpdpwssd, so a u8 x s8 dot is one instruction
// instead of maddubs + madd + add, and signed 8-bit weights take the
// Avx512 level's +128 bias instead of the sign trick. Unsigned codes (4-bit,
// K-quant) give the same integer sums as Avx2 (maddubs never saturates on
// them), so those results are Avx2's bit for bit.
struct AvxVnni : Avx2 {
  static constexpr int kS8Bias = 128;
  static constexpr bool kInt16Sums = false;  // vpdpbusd widens in the same instruction
  static __m256i flip(__m256i w) { return _mm256_xor_si256(w, _mm256_set1_epi8(-128)); }
  static __m256i dot8_u8s8(__m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s); }
  static __m256i dot8_s8s8(__m256i w, __m256i x) { return dot8_u8s8(flip(w), x); }
  static __m256i madd_acc(__m256i acc, __m256i p, __m256i s) { return _mm256_dpwssd_avx_epi32(acc, p, s); }
  static I dot_u8s8(I acc, I u, I s) {
    return {_mm256_dpbusd_avx_epi32(acc.a, u.a, s.a), _mm256_dpbusd_avx_epi32(acc.b, u.b, s.b)};
  }
  static I dot_s8s8(I acc, I w, I x) { return dot_u8s8(acc, {flip(w.a), flip(w.b)}, x); }
};
#endif

// 32-element block traits for the GGUF kernels (gguf_kernels.h), one ymm
// per block on both levels; V supplies the unsigned and signed 8-bit dots
// (vpdpbusd on AVX-512 VNNI, maddubs on AVX2).
template <class V>
struct X86Blocks {
  using W = __m256i;
  using D = __m256i;
  using A = __m256;
  static constexpr int kS8Bias = V::kS8Bias;

  static __m256i bytes(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }
  static float half(const uint8_t* p) { return half_to_float(p); }
  static W load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static W nibbles16(const uint8_t* p) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
  }
  // Byte j gets byte j / 8 of the word (in-lane shuffle of a broadcast),
  // tests bit j % 8 and becomes 0x10 or 0.
  static W bits32_to_16(const uint8_t* p) {
    uint32_t m;
    std::memcpy(&m, p, 4);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(m)),
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), bytes(0x10));
  }
  static W low4(W v) { return _mm256_and_si256(v, bytes(0x0f)); }
  static W high4(W v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), bytes(0x0f)); }
  // Bits S.. moved to bit 4 by a 16-bit shift; the mask keeps only bits
  // that came from the same byte.
  template <int S>
  static W move_to_4(W v) {
    if constexpr (S > 4) return _mm256_srli_epi16(v, S - 4);
    if constexpr (S < 4) return _mm256_slli_epi16(v, 4 - S);
    return v;
  }
  template <int S>
  static W bit_to_16(W qh) { return _mm256_and_si256(move_to_4<S>(qh), bytes(0x10)); }
  template <int S>
  static W pair_to_48(W qh) { return _mm256_and_si256(move_to_4<S>(qh), bytes(0x30)); }
  static W or_(W a, W b) { return _mm256_or_si256(a, b); }
  static W minus32(W v) { return _mm256_sub_epi8(v, bytes(32)); }
  static __m256i x32(const int8_t* q) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)); }
  static D dot_u(W w, const int8_t* q) { return V::dot8_u8s8(w, x32(q)); }
  static D dot_s8(W w, const int8_t* q) { return V::dot8_s8s8(w, x32(q)); }
  // Integer sub-block scales: maddubs gives pair sums in int16 (codes
  // <= 63: <= 2 * 63 * 127), one multiply-add with the scale sums them into
  // int32 (V::madd_acc: vpmaddwd + add, or vpdpwssd).
  // A super-block's 8 scale bytes widened to int16 once, in both 128-bit
  // lanes; scale16<j> spreads scale j over every lane with one byte shuffle.
  static __m256i k_scales(uint64_t b) {
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(b))));
  }
  template <int J>
  static __m256i scale16(__m256i s) {
    return _mm256_shuffle_epi8(s, _mm256_set1_epi16(static_cast<int16_t>((2 * J + 1) << 8 | 2 * J)));
  }
  static D dot_u_acc(D acc, W w, const int8_t* q, __m256i s) {
    return V::madd_acc(acc, _mm256_maddubs_epi16(w, x32(q)), s);
  }
  // The 8 scales as int16, in both 128-bit lanes; scale16_pair<k> then
  // spreads scale 2k over the low lane and 2k + 1 over the high one with
  // one in-lane byte shuffle.
  static __m256i q6_scales(const int8_t* sc) {
    int64_t v;
    std::memcpy(&v, sc, 8);
    return _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_cvtsi64_si128(v)));
  }
  template <int K>
  static __m256i scale16_pair(__m256i s) {
    const char lo0 = static_cast<char>(4 * K), lo1 = static_cast<char>(4 * K + 1);
    const char hi0 = static_cast<char>(4 * K + 2), hi1 = static_cast<char>(4 * K + 3);
    const __m256i pick = _mm256_setr_epi8(lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0, lo1, lo0,
                                          lo1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1, hi0, hi1,
                                          hi0, hi1);
    return _mm256_shuffle_epi8(s, pick);
  }
  // Q6_K as unsigned codes 0..63 through dot_u_acc: maddubs pair sums
  // <= 2 * 63 * 127 < 32767, so no sign instructions per token; the bias
  // of 32 comes off per super-block with one vpmaddwd of the 16 scales and
  // the 16 activation sums (|sc * h| pairs <= 2 * 128 * 2032: int32).
  static constexpr bool kQ6Unsigned = true;
  static __m256i q6_all_scales(const int8_t* sc) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
  }
  static D q6_bias(__m256i all, const int16_t* h) {
    const __m256i dot = _mm256_madd_epi16(all, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(dot, 5));
  }
  // Signs onto the activations, |code| <= 32: pair sums <= 2 * 32 * 127.
  static D dot_s16_acc(D acc, W w, const int8_t* q, __m256i s) {
    return V::madd_acc(acc, _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x32(q), w)), s);
  }
  static D dzero() { return _mm256_setzero_si256(); }
  static D dadd(D a, D b) { return _mm256_add_epi32(a, b); }
  static A zero() { return _mm256_setzero_ps(); }
  static A fma(D d, float s, A acc) { return _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_set1_ps(s), acc); }
  static A add(A a, A b) { return _mm256_add_ps(a, b); }

  using F8 = __m256;
  static F8 bytes_to_f8(uint64_t b, float s) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(b)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(s));
  }
  static F8 load8(const float* p) { return _mm256_loadu_ps(p); }
  static F8 fma8(F8 a, F8 b, F8 c) { return _mm256_fmadd_ps(a, b, c); }
  static F8 zero8() { return _mm256_setzero_ps(); }
  static float hsum8(F8 v) { return hsum(v); }
  static float hsum(A v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
  }
};

}  // namespace
}  // namespace pocket::kernels
