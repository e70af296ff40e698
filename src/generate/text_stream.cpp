#include "generate/text_stream.h"

#include <algorithm>

namespace pocket {

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stop_strings)
    : decoder_(tok), stops_(std::move(stop_strings)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string TextStream::push(int32_t id) {
  if (stopped_) return {};
  pending_ += decoder_.push(id);
  return release();
}

std::string TextStream::finish() {
  if (stopped_) return {};
  pending_ += decoder_.flush();
  std::string out = release();
  if (!stopped_) {
    out += pending_;
    pending_.clear();
  }
  return out;
}

std::string TextStream::release() {
  // A complete stop string: emit what precedes the earliest one and stop.
  size_t cut = std::string::npos;
  for (const auto& s : stops_) cut = std::min(cut, pending_.find(s));
  if (cut != std::string::npos) {
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    stopped_ = true;
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

}  // namespace pocket
