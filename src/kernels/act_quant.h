// Activations quantized to int8 in blocks of 32 for the integer-dot matmul
// kernels: x[k] ~= d[b] * q[k] with b = k / 32, d = max|x| / 127 per block,
// or (scale_block = 256, for the K-quant kernels) one d shared by the eight
// blocks of each 256 columns, d = max|x| / 127 over those 256: the kernels
// can then sum a super-block's integer dots before converting. d and s
// stay per block of 32 either way (equal d within a super-block), so every
// reader of d[b] and s[b] is correct for both.
// K-quant activations (scale_block 256) also keep the integer sum of each
// 16 columns, h: the x86 Q6_K kernel dots unsigned codes 0..63 and takes
// 32 * (scales . h) off once per super-block instead of signing every code.
// Rows are zero-padded to `kpad` so kernels can run over whole padded
// weight groups: padded activations are exactly 0 and contribute nothing.
#pragma once
#include <cstdint>
#include <vector>

namespace pocket::kernels {

constexpr int kActBlock = 32;

// Adding and subtracting 1.5 * 2^23 rounds |v| < 2^22 to the nearest
// integer, ties to even, in the default rounding mode: how every level
// rounds a scaled value to its code.
inline constexpr float kActRoundMagic = 12582912.0f;

struct ActBlocks {
  int n = 0;         // tokens
  int64_t kpad = 0;  // padded row length (multiple of kActBlock)
  int64_t nb = 0;    // blocks per row = kpad / kActBlock
  int scale_block = kActBlock;  // columns sharing one d: 32, or 256 (kpad a multiple of it)
  std::vector<int8_t> q;  // n * kpad
  std::vector<float> d;   // n * nb: block scale
  std::vector<float> s;   // n * nb: d * sum(q), the block's dequantized sum
  std::vector<int16_t> h;  // n * kpad / 16 when scale_block is 256: sum(q) of each 16 columns, else empty

  // Always inlined: the ISA kernel files call them, and an out-of-line copy
  // there would be a weak symbol compiled for that level, which the linker
  // may keep for baseline callers too (scripts/check_isa_isolation.py; clang
  // at -O1, as the sanitizer builds compile, emitted such copies).
  [[gnu::always_inline]] const int8_t* row(int t) const { return q.data() + t * kpad; }
  [[gnu::always_inline]] const float* scales(int t) const { return d.data() + t * nb; }
  [[gnu::always_inline]] const float* sums(int t) const { return s.data() + t * nb; }
  [[gnu::always_inline]] const int16_t* sums16(int t) const { return h.data() + t * (kpad / 16); }
};

// Quantize n rows of `cols` floats, padding each to `kpad` (>= cols, a
// multiple of kActBlock), into `out`, reusing its memory: a decode step
// calls this ~100 times and must not allocate each time. Deterministic and
// ISA-independent (round to nearest even, as std::nearbyint). `scale_block`
// is 32 or 256; with 256, kpad must be a multiple of 256.
void quantize_acts(const float* x, int n, int64_t cols, int64_t kpad, ActBlocks& out, int scale_block = kActBlock);

// quantize_acts in two steps, so the rows can be split across threads:
// size `out` for n rows (the checks above), then quantize rows [t0, t1) of x
// into it (each row independent: the result is the same however split).
void prepare_acts(int n, int64_t kpad, ActBlocks& out, int scale_block = kActBlock);
void quantize_act_rows(const float* x, int t0, int t1, int64_t cols, ActBlocks& out);

// Row t's blocks from b_begin on (a multiple of scale_block / kActBlock),
// xr being the row's first value: the portable code, which SIMD levels'
// quantize_act_rows (KernelTable) call for the blocks they leave, the
// partial and padding ones. The same result as quantize_act_rows.
void quantize_act_row_blocks(const float* xr, int t, int64_t b_begin, int64_t cols, ActBlocks& out);

}  // namespace pocket::kernels
