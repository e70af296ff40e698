// GrammarBuilder's building blocks: byte sets and their table.
#include <gtest/gtest.h>

#include "constrain/grammar.h"

namespace pocket::constrain {
namespace {

TEST(ConstrainGrammar, ByteSetRangeSetsExactlyItsBytes) {
  // Every range of bytes (and the empty ones, lo > hi) against a set made a byte at a time.
  for (int lo = 0; lo < 256; ++lo)
    for (int hi = lo - 1; hi < 256; ++hi) {
      ByteSet ranged, plain;
      ranged.set_range(lo, hi);
      for (int b = lo; b <= hi; ++b) plain.set(static_cast<uint8_t>(b));
      ASSERT_EQ(ranged, plain) << "range " << lo << ".." << hi;
    }
  ByteSet s;
  s.set(3);
  s.set_range(60, 70);  // adds to what is there, across a word boundary
  for (int b = 0; b < 256; ++b) EXPECT_EQ(s.test(static_cast<uint8_t>(b)), b == 3 || (b >= 60 && b <= 70)) << b;
}

TEST(ConstrainGrammar, EachDistinctByteSetIsStoredOnce) {
  GrammarBuilder g;
  ByteSet first;
  first.set_range('a', 'f');
  const Elem a = g.bytes(first);
  // Many other sets in between (a Unicode class makes hundreds), then the first again.
  for (int lo = 0x80; lo < 0xC0; ++lo)
    for (int hi = lo; hi < lo + 4 && hi < 0xC0; ++hi) {
      ByteSet other;
      other.set_range(lo, hi);
      g.bytes(other);
    }
  const Elem again = g.bytes(first);
  EXPECT_FALSE(again.is_ref);
  EXPECT_EQ(again.index, a.index);
  EXPECT_EQ(g.byte('x').index, g.byte('x').index);
  ByteSet x;
  x.set('x');
  EXPECT_EQ(g.bytes(x).index, g.byte('x').index);
  EXPECT_NE(g.bytes(x).index, a.index);
}

}  // namespace
}  // namespace pocket::constrain
