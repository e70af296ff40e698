// Overflow-safe size arithmetic for values read from untrusted files.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "util/error.h"

namespace pocket {

inline uint64_t checked_mul(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail(what, ": size overflows 64 bits");
  return r;
}

inline uint64_t checked_add(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail(what, ": size overflows 64 bits");
  return r;
}

// Round `v` up to a multiple of `align` (align > 0), failing on overflow.
inline uint64_t checked_align_up(uint64_t v, uint64_t align, std::string_view what) {
  if (align == 0) fail(what, ": alignment is zero");
  uint64_t rem = v % align;
  return rem == 0 ? v : checked_add(v, align - rem, what);
}

}  // namespace pocket
