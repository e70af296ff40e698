// Error type used across Pocket. Every failure on bad input becomes one
// pocket::Error whose message names the file/field at fault; the CLI prints
// it and exits non-zero.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "pocket/error.h"

namespace pocket {

// Concatenate any streamable values into one string.
template <class... Parts>
std::string cat(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  return os.str();
}

template <class... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  throw Error(cat(std::forward<Parts>(parts)...));
}

// The same with the kind of failure named (pocket::ErrorCode).
template <class... Parts>
[[noreturn]] void fail_as(ErrorCode code, Parts&&... parts) {
  throw Error(cat(std::forward<Parts>(parts)...), code);
}

}  // namespace pocket
