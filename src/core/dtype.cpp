#include "core/dtype.h"

#include "core/tensor.h"
#include "core/pq_format.h"
#include "util/checked.h"
#include "util/error.h"

namespace pocket {

namespace {
struct Info {
  DType type;
  std::string_view name;
};
constexpr Info kInfos[] = {
    {DType::F32, "F32"},   {DType::F16, "F16"}, {DType::BF16, "BF16"}, {DType::Q8_0, "Q8_0"},
    {DType::Q4_0, "Q4_0"}, {DType::PQ4, "PQ4"}, {DType::PQ8, "PQ8"},   {DType::Q4_1, "Q4_1"},
    {DType::Q5_0, "Q5_0"}, {DType::Q5_1, "Q5_1"}, {DType::Q2_K, "Q2_K"}, {DType::Q3_K, "Q3_K"},
    {DType::Q4_K, "Q4_K"}, {DType::Q5_K, "Q5_K"}, {DType::Q6_K, "Q6_K"}, {DType::Q8_K, "Q8_K"}, {DType::PQ5, "PQ5"},
};
}  // namespace

std::string_view dtype_name(DType t) {
  for (const auto& i : kInfos)
    if (i.type == t) return i.name;
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfos)
    if (i.name == name) return i.type;
  return std::nullopt;
}

int dtype_block_elems(DType t, int group) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return 1;
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
      return 32;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q8_K:
      return kQK_K;
    case DType::PQ4:
    case DType::PQ5:
    case DType::PQ8:
      return pq::valid_group(group) ? group : 0;
  }
  return 1;
}

int dtype_block_bytes(DType t, int group) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::Q8_0:
      return 2 + 32;
    case DType::Q4_0:
      return 2 + 16;
    case DType::Q4_1:
      return 2 + 2 + 16;
    case DType::Q5_0:
      return 2 + 4 + 16;
    case DType::Q5_1:
      return 2 + 2 + 4 + 16;
    case DType::Q2_K:  // scales, quants, d, dmin
      return 16 + 64 + 2 + 2;
    case DType::Q3_K:  // hmask, quants, scales, d
      return 32 + 64 + 12 + 2;
    case DType::Q4_K:  // d, dmin, scales, quants
      return 2 + 2 + 12 + 128;
    case DType::Q5_K:  // d, dmin, scales, high bits, quants
      return 2 + 2 + 12 + 32 + 128;
    case DType::Q6_K:  // low quants, high quants, scales, d
      return 128 + 64 + 16 + 2;
    case DType::Q8_K:  // d (f32), quants, block sums
      return 4 + 256 + 32;
    case DType::PQ4:  // per row: nibbles + fp16 scale + fp16 offset (see core/pq_format.h)
      return pq::valid_group(group) ? group / 2 + 4 : 0;
    case DType::PQ5:  // per row: nibbles + fifth bits + fp16 scale + fp16 offset
      return pq::valid_group(group) ? group / 2 + group / 8 + 4 : 0;
    case DType::PQ8:  // per row: int8 + fp16 scale
      return pq::valid_group(group) ? group + 2 : 0;
  }
  return 0;
}

uint64_t dtype_row_bytes(DType t, uint64_t n, int group) {
  int be = dtype_block_elems(t, group);
  if (be <= 0) fail("tensor type ", dtype_name(t), ": invalid group size ", group, " (PQ types take 32, 64 or 128)");
  uint64_t blocks = n / static_cast<uint64_t>(be);
  if (n % static_cast<uint64_t>(be) != 0) {
    if (is_pq(t)) {
      ++blocks;  // PQ types pad the tail group of each row
    } else {
      fail("row of ", n, " elements is not a multiple of the ", dtype_name(t), " block size ", be);
    }
  }
  return checked_mul(blocks, static_cast<uint64_t>(dtype_block_bytes(t, group)), "tensor row");
}

uint64_t tensor_nbytes(DType t, const std::vector<int64_t>& shape, int group, const std::string& what) {
  if (shape.empty()) fail(what, ": tensor has no dimensions");
  for (auto d : shape)
    if (d <= 0) fail(what, ": dimension ", d, " is not positive");
  uint64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows = checked_mul(rows, static_cast<uint64_t>(shape[i]), what);
  // PQ types store whole tiles of rows (see core/pq_format.h).
  if (is_pq(t)) rows = checked_add(rows, pq::kTileRows - 1, what) / pq::kTileRows * pq::kTileRows;
  uint64_t row_bytes;
  try {
    row_bytes = dtype_row_bytes(t, static_cast<uint64_t>(shape.back()), group);
  } catch (const Error& e) {
    fail(what, ": ", e.what());
  }
  return checked_mul(rows, row_bytes, what);
}

}  // namespace pocket
