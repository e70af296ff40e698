// Pocket's one hasher (util/hash64.h) and model hasher
// (formats/content_hash.h): streaming equals one-shot however the bytes are
// split, and the values head files store did not change when the sessions'
// fingerprint moved onto the same hasher.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "formats/content_hash.h"
#include "formats/model_file.h"
#include "util/hash64.h"

namespace pocket {
namespace {

TEST(ModelHash, ValuesAreThoseHeadFilesStore) {
  // Recorded with the heads' hasher before the two hashers became one.
  const char s[] = "The quick brown fox jumps over the lazy dog, twice over: 0123456789";
  const std::pair<size_t, uint64_t> known[] = {{0, 0xf33bc4a50396ee37ull},  {1, 0xda3e5d4cb2ab0641ull},
                                               {31, 0x021d75123cba3bc0ull}, {32, 0xaf1b81ea4bd61fe7ull},
                                               {33, 0x6f19c65de7bdca6cull}, {67, 0x60d3d5d8c1f6694cull}};
  for (const auto& [n, h] : known) EXPECT_EQ(hash64(s, n, 5), h) << n << " bytes";
  const ModelFile f = open_model(test::stories_model());
  EXPECT_EQ(model_content_hash(f, f.vocab), "759fd2d5e7f18ea6");
}

TEST(ModelHash, StreamingEqualsOneShotForAnySplit) {
  std::mt19937_64 rng(11);
  std::vector<uint8_t> bytes(1000);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = rng() % bytes.size();
    Hash64 h(trial);
    for (size_t at = 0; at < n;) {
      const size_t piece = std::min<size_t>(n - at, rng() % 70);
      h.update(bytes.data() + at, piece);
      at += piece;
    }
    ASSERT_EQ(h.digest(), hash64(bytes.data(), n, trial)) << n << " bytes, trial " << trial;
  }
  // And it tells inputs apart: one flipped bit, or the same bytes one longer.
  EXPECT_NE(hash64(bytes.data(), 100), hash64(bytes.data(), 101));
  auto flipped = bytes;
  flipped[57] ^= 4;
  EXPECT_NE(hash64(bytes.data(), 100), hash64(flipped.data(), 100));
}

TEST(ModelHash, SampledAndFullAreDifferentKeys) {
  const ModelFile f = open_model(test::stories_model());
  const uint64_t sampled = model_hash(f, f.vocab, HashDepth::Sampled), full = model_hash(f, f.vocab, HashDepth::Full);
  EXPECT_NE(sampled, full);
  EXPECT_EQ(sampled, model_hash(f, f.vocab, HashDepth::Sampled));
  Vocab other = f.vocab;
  other.tokens[3] += "x";
  EXPECT_NE(model_hash(f, other, HashDepth::Sampled), sampled);
  EXPECT_NE(model_hash(f, other, HashDepth::Full), full);
}

}  // namespace
}  // namespace pocket
