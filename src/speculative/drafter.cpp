#include "speculative/drafter.h"

#include <algorithm>

#include "speculative/ngram_cache.h"
#include "util/error.h"

namespace pocket {

LookupDrafter::LookupDrafter(int ngram_min, int ngram_max, std::shared_ptr<const NgramCache> cache)
    : ngram_min_(ngram_min), ngram_max_(ngram_max), cache_(std::move(cache)) {
  if (ngram_min < 1 || ngram_max < ngram_min)
    fail_as(ErrorCode::InvalidArgument, "lookup n-gram sizes ", ngram_min, "..", ngram_max, " (need 1 <= min <= max)");
}

void LookupDrafter::draft(std::span<const int32_t> history, int max, std::vector<int32_t>& out) {
  out.clear();
  const int64_t len = static_cast<int64_t>(history.size());
  if (max <= 0) return;
  for (int n = std::min<int64_t>(ngram_max_, len - 1); n >= ngram_min_; --n) {
    const int32_t* key = history.data() + len - n;
    // Most recent earlier occurrence: the match ends before the suffix itself.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(key, key + n, history.data() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(max, len - from);
      out.assign(history.begin() + from, history.begin() + from + count);
      return;
    }
  }
  if (cache_) {
    const auto next = cache_->lookup(history, max);
    out.assign(next.begin(), next.end());
  }
}

void ReplayDrafter::draft(std::span<const int32_t> history, int max, std::vector<int32_t>& out) {
  out.clear();
  if (max <= 0 || history.size() >= seq_.size() || !std::equal(history.begin(), history.end(), seq_.begin())) return;
  const size_t count = std::min(seq_.size() - history.size(), static_cast<size_t>(max));
  out.assign(seq_.begin() + static_cast<ptrdiff_t>(history.size()),
             seq_.begin() + static_cast<ptrdiff_t>(history.size() + count));
}

}  // namespace pocket
