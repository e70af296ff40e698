// Conversion of GGUF weights into Pocket's PQ formats that keeps the
// source's own grid instead of re-fitting it from dequantized floats: for
// `pocket quantize --weights source`, and at load, where Model runs GGUF
// Q4_0, Q5_0, Q5_1 and Q8_0 (and, unless exact_kquants, Q4_K and Q5_K)
// matrices as PQ copies on the tiled kernels. Blocks of 32 map onto PQ groups of 32 one for one:
//   Q4_0  value d (q - 8)          -> PQ4 s = d,      m = -8d       exact
//   Q4_1  value d q + m            -> PQ4 s = d,      m = m         exact
//   Q4_K  value d sc q - dmin mn   -> PQ4 s = d*sc,   m = -dmin*mn  codes exact;
//         s and m are stored in fp16, so each is rounded once (relative error
//         <= 2^-11, or 2^-25 absolute below fp16's normal range): a value is
//         off by at most 15 |ds| + |dm|, see pq_grid_error_bound().
//   Q5_K  the same with 5-bit codes -> PQ5                          codes exact,
//         off by at most 31 |ds| + |dm|.
//   Q5_0  value d (q - 16)         -> PQ5 s = d,      m = -16d      exact
//   Q5_1  value d q + m            -> PQ5 s = d,      m = m         exact
//   Q8_0  value d q                -> PQ8 s = d, code q              exact
// Every other type (Q6_K, Q2_K, Q3_K, f16, ...) has no exact PQ form;
// source_grid_type() sends it to PQ8, quantized from its values.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace pocket::quant {

// The PQ type (group 32) that holds a weight of type `t` without going
// below it: PQ4 for the 4-bit types, PQ5 for Q5_0 / Q5_1 / Q5_K, PQ8 for
// everything wider.
DType source_grid_type(DType t);

// True when `w` (2-D, columns a multiple of 32; Q4_K, Q5_K: of 256) has a
// block-for-block PQ form and every scale and offset of it is finite in
// fp16. Otherwise the caller quantizes the weight's values instead.
bool can_repack_to_pq(const TensorView& w);

// The PQ bytes (group 32, type source_grid_type(w.type)) of rows
// [row0, row0 + n) of `w`, row0 a multiple of 16: whole 16-row tiles, the
// rows past the tensor's end zero. Nullopt when can_repack_to_pq would say
// no for these rows: one pass over the source, for the load-time repack.
std::optional<std::vector<uint8_t>> try_repack_rows_to_pq(const TensorView& w, int64_t row0, int64_t n);
// The same into `out` (repacked_bytes(w, n) bytes, any contents: every byte
// is written, padding rows zero); false, with `out` partly written, when the
// rows have no PQ form. Lets the load repack a large tensor in pieces into
// one buffer, giving back each piece's source pages as it goes.
bool try_repack_rows_into(const TensorView& w, int64_t row0, int64_t n, uint8_t* out);
// Bytes of the PQ form of `n` rows of `w` (whole 16-row tiles), 0 when `w`
// has no block-for-block PQ form.
int64_t repacked_bytes(const TensorView& w, int64_t n);
// The same; an Error when the rows have no PQ form.
std::vector<uint8_t> repack_rows_to_pq(const TensorView& w, int64_t row0, int64_t n);

// Largest |PQ value - source value| the repack of a Q4_K (qmax 15) or Q5_K
// (qmax 31) block with these fields can give: the fp16 rounding of
// s = d*sc times the largest code plus that of m = dmin*mn (the other
// types' s and m are already fp16 values, so their repack is exact).
double pq_grid_error_bound(double s, double m, int qmax = 15);

}  // namespace pocket::quant
