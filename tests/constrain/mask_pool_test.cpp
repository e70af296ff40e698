// Mask buffers reused across matchers (constrain/mask_pool.h) and masks read
// in place from a frame's bitsets: a buffer handed out again still holds the
// bits of the mask it had, so every mask of a matcher that gets such buffers
// must still equal the per-token reference (would_accept), and so must the
// masks near a counted repetition's bound (a frame's per-room bitsets).
#include <gtest/gtest.h>

#include <random>

#include "constrain/constraint.h"
#include "constrain/mask_pool.h"
#include "test_vocab.h"

namespace pocket::constrain {
namespace {

// Every bit of the current mask against would_accept (end-of-sequence:
// accepting()); returns the allowed tokens other than end-of-sequence.
std::vector<int32_t> check(Matcher& m, const VocabIndex& v, const std::string& what) {
  const auto mask = m.mask();
  std::vector<int32_t> allowed;
  for (int32_t t = 0; t < v.vocab_size; ++t) {
    const bool bit = (mask[t >> 6] >> (t & 63)) & 1;
    const bool eos = t == v.eos_ids[0];
    EXPECT_EQ(bit, eos ? m.accepting() : m.would_accept(t)) << what << " token " << t << " '" << v.bytes[t] << "'";
    if (bit && !eos) allowed.push_back(t);
  }
  return allowed;
}

std::shared_ptr<const Constraint> schema(const std::shared_ptr<const VocabIndex>& v, const std::string& text) {
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::JsonSchema;
  spec.text = text;
  return compile_constraint(spec, v);
}

// Random walks of `steps` allowed tokens, each mask checked.
void walk(const Constraint& c, const VocabIndex& v, std::mt19937& rng, int steps, const std::string& what) {
  Matcher m = c.matcher();
  for (int i = 0; i <= steps; ++i) {
    const auto allowed = check(m, v, what + " step " + std::to_string(i));
    if (::testing::Test::HasFailure() || allowed.empty()) return;
    ASSERT_TRUE(m.advance(allowed[rng() % allowed.size()]));
  }
}

TEST(ConstrainMaskPool, KeepsAtMostItsCapAndHandsBuffersOutAgain) {
  auto pool = std::make_shared<MaskPool>(4, 2);
  std::vector<MaskPool::Buffer> bufs;
  for (int i = 0; i < 3; ++i) bufs.push_back(pool->take());
  const uint64_t* first = bufs[0].get();
  pool->give_back(bufs);
  EXPECT_TRUE(bufs.empty());
  EXPECT_EQ(pool->free_buffers(), 2u);  // the third was freed
  {
    MaskStore store(pool, 4);
    const uint64_t* a = store.take();
    const uint64_t* b = store.take();
    EXPECT_TRUE(a == first || b == first);  // a kept buffer comes back
    EXPECT_EQ(pool->free_buffers(), 0u);
    store.take();  // a new one: the pool is empty
  }
  EXPECT_EQ(pool->free_buffers(), 2u);  // the store gave its three back, two kept
}

TEST(ConstrainMaskPool, ReusedBuffersGiveTheReferenceMasks) {
  std::mt19937 rng(11);
  const std::vector<std::string> units = {"{", "}", "\"", "a", "b", ":", ",", "\\", "\xE4\xB8\xAD", "1", "@", "."};
  auto v = test_vocab(units, 300, rng);
  // A wide schema fills buffers with many bits; the bounded strings, enum
  // and email after it get those buffers back (masks near and far from the
  // bounds, made in place or from a buffer).
  auto wide = schema(v, R"({"type":"object","additionalProperties":{"type":"string"}})");
  auto narrow = schema(v, R"({"type":"object","properties":{"a":{"type":"string","minLength":2,"maxLength":5},
      "b":{"type":"string","maxLength":20},"c":{"enum":["ab","b1"]},"d":{"type":"string","format":"email"}},
      "required":["a","b","c","d"],"additionalProperties":false})");
  for (int round = 0; round < 6; ++round) {
    walk(*wide, *v, rng, 24, "wide round " + std::to_string(round));
    ASSERT_GT(v->mask_pool->free_buffers(), 0u);
    walk(*narrow, *v, rng, 40, "narrow round " + std::to_string(round));
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(ConstrainMaskPool, EveryRoomNearABoundGivesTheReferenceMask) {
  // Strings of at most 1..17 characters: every room below the per-room
  // bitsets (16) and the first one past them, walked to their bounds.
  std::mt19937 rng(5);
  const std::vector<std::string> units = {"\"", "a", "b", "\\", "\xC3\xA9", "x"};
  auto v = test_vocab(units, 250, rng);
  for (int max = 1; max <= 17; ++max) {
    auto c = schema(v, R"({"type":"string","minLength":1,"maxLength":)" + std::to_string(max) + "}");
    for (int w = 0; w < 4; ++w) walk(*c, *v, rng, max + 4, "maxLength " + std::to_string(max));
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace pocket::constrain
