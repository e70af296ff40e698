// Turns generated token ids into text for streaming: only complete UTF-8 is
// emitted, and text that might be the start of a stop string is held back
// until it is known not to be one.
#pragma once
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pocket {

class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<std::string> stop_strings);

  // Adds one token; returns text that is safe to show now. Sets stopped()
  // when a stop string appeared (the stop string and anything after it are
  // not returned).
  std::string push(int32_t id);
  // Returns whatever is still held back (at the end of generation).
  std::string finish();
  bool stopped() const { return stopped_; }
  // The text continues after token `prev` (see StreamDecoder::continue_after).
  void continue_after(int32_t prev) { decoder_.continue_after(prev); }

 private:
  std::string release();

  StreamDecoder decoder_;
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace pocket
