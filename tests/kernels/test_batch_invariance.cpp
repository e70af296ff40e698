// Batch invariance of the kernels, on every level this CPU runs: a row's
// matmul output and a query's attention output must not depend on which
// other rows or queries share the call (decode = 1, speculative verify and
// prefill = many). The whole-model version is tests/model/test_batch_invariance.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "kernels/table.h"
#include "kernels/weight_builders.h"
#include "util/half.h"

namespace pocket::kernels {
namespace {

using test::Rng;

std::vector<float> random_values(size_t n, uint64_t seed, float range) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (auto& v : x) v = rng.uniform(-range, range);
  return x;
}

TEST(BatchInvariance, MatmulRowsDoNotDependOnTheBatch) {
  const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::PQ4, DType::PQ5, DType::PQ8};
  const int64_t rows = 48;
  const int n = 33;
  // 2624 columns: past the AMX level's 2048-column pieces (kernels_amx.cpp),
  // whose sums carry over from one piece to the next; PQ types on the SIMD
  // levels only, and a few tokens of each tile (the emulated test stage
  // runs this on the scalar-heavy levels too).
  for (int64_t cols : {256, 2624}) {
    const bool wide = cols > 256;
    for (Isa isa : supported_isas())
      for (DType type : types) {
        if (wide && (!is_pq(type) || isa == Isa::Scalar)) continue;
        SCOPED_TRACE(testing::Message() << isa_name(isa) << " " << dtype_name(type) << " cols " << cols);
        auto w = test::build_weight(type, rows, cols, 64, 17);
        auto x = random_values(static_cast<size_t>(n * cols), 5, 2.0f);
        std::vector<float> all(static_cast<size_t>(n * rows)), one(rows);
        matmul_with(kernel_table(isa), w.view, x.data(), n, all.data(), nullptr);
        for (int t = 0; t < n; ++t) {
          if (wide && t != 0 && t != 15 && t != 16 && t != n - 1) continue;
          matmul_with(kernel_table(isa), w.view, x.data() + t * cols, 1, one.data(), nullptr);
          if (std::memcmp(one.data(), all.data() + t * rows, rows * sizeof(float)) != 0) {
            int d = 0;
            while (one[d] == all[t * rows + d]) ++d;
            ADD_FAILURE() << "row " << t << " differs at " << d << ": " << one[d] << " vs " << all[t * rows + d];
            break;
          }
        }
      }
  }
}

TEST(BatchInvariance, AttentionQueryDoesNotDependOnItsCompanions) {
  // Several head sizes and context lengths across the 64-position blocks;
  // the companions of query j are queries of the same and later tokens
  // (longer contexts), as in a verify block. 16 queries fill the AVX-512
  // q8 lanes; 7 leave some empty and take every grouping of values().
  // 256: the driver widens blocks of 16 rows, not 32. Under emulation (20 s
  // otherwise) one SIMD and one fallback head size, contexts across a block.
  const bool emulated = test::emulated();
  const std::vector<int> head_dims = emulated ? std::vector<int>{64, 24} : std::vector<int>{64, 128, 24, 256};
  const std::vector<int> bases = emulated ? std::vector<int>{7, 130} : std::vector<int>{1, 7, 63, 64, 130};
  for (Isa isa : supported_isas())
    for (int hd : head_dims)
      for (int base : bases)
        for (int n_q : {16, 7}) {
          SCOPED_TRACE(testing::Message() << isa_name(isa) << " head_dim " << hd << " context " << base << " queries "
                                          << n_q);
          const int max_ctx = base + n_q;
          std::vector<uint16_t> k(static_cast<size_t>(max_ctx) * hd), v(k.size());
          Rng rng(hd + base);
          for (auto& e : k) e = f32_to_f16(rng.uniform(-2.0f, 2.0f));
          for (auto& e : v) e = f32_to_f16(rng.uniform(-1.0f, 1.0f));
          auto q = random_values(static_cast<size_t>(n_q) * hd, 9, 2.0f);
          std::vector<float> out_all(q.size()), out_one(hd), scratch(static_cast<size_t>(n_q) * max_ctx);
          AttentionQueries all;
          all.n = n_q;
          for (int j = 0; j < n_q; ++j) {
            all.q[j] = q.data() + j * hd;
            all.out[j] = out_all.data() + j * hd;
            all.n_ctx[j] = base + j / 2;  // two query heads per token
          }
          // The same rows as an int8 cache (--kv q8).
          std::vector<int8_t> k8(k.size()), v8(v.size());
          std::vector<float> ks(max_ctx), vs(max_ctx), row(hd);
          for (int t = 0; t < max_ctx; ++t) {
            for (int d = 0; d < hd; ++d) row[d] = f16_to_f32(k[t * hd + d]);
            quantize_row_q8(row.data(), &k8[t * hd], &ks[t], hd);
            for (int d = 0; d < hd; ++d) row[d] = f16_to_f32(v[t * hd + d]);
            quantize_row_q8(row.data(), &v8[t * hd], &vs[t], hd);
          }
          // And as a 4-bit cache (--kv q4).
          std::vector<uint8_t> k4(k.size() / 2), v4(v.size() / 2);
          std::vector<float> ks4(max_ctx), vs4(max_ctx);
          for (int t = 0; t < max_ctx; ++t) {
            for (int d = 0; d < hd; ++d) row[d] = f16_to_f32(k[t * hd + d]);
            quantize_row_q4(row.data(), &k4[t * hd / 2], &ks4[t], hd);
            for (int d = 0; d < hd; ++d) row[d] = f16_to_f32(v[t * hd + d]);
            quantize_row_q4(row.data(), &v4[t * hd / 2], &vs4[t], hd);
          }
          for (const std::string kv : {"f16", "q8", "q4"}) {
            SCOPED_TRACE(kv);
            auto run = [&](const AttentionQueries& qs) {
              if (kv == "q8")
                kernel_table(isa).attention_heads_q8(qs, {k8.data(), ks.data()}, {v8.data(), vs.data()}, hd, 0.1f,
                                                     scratch.data());
              else if (kv == "q4")
                kernel_table(isa).attention_heads_q4(qs, {k4.data(), ks4.data()}, {v4.data(), vs4.data()}, hd, 0.1f,
                                                     scratch.data());
              else
                kernel_table(isa).attention_heads(qs, k.data(), v.data(), hd, 0.1f, scratch.data());
            };
            run(all);
            for (int j = 0; j < n_q; ++j) {
              AttentionQueries one;
              one.n = 1;
              one.q[0] = all.q[j];
              one.out[0] = out_one.data();
              one.n_ctx[0] = all.n_ctx[j];
              run(one);
              if (std::memcmp(out_one.data(), all.out[j], hd * sizeof(float)) != 0) {
                int d = 0;
                while (out_one[d] == all.out[j][d]) ++d;
                ADD_FAILURE() << "query " << j << " differs at " << d << ": " << out_one[d] << " vs " << all.out[j][d];
                break;
              }
            }
          }
        }
}

}  // namespace
}  // namespace pocket::kernels
