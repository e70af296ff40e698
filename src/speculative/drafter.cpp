#include "speculative/drafter.h"

#include <algorithm>

#include "core/tensor.h"
#include "kernels/kernels.h"
#include "speculative/ngram_cache.h"
#include "util/error.h"

namespace pocket {

void draft_matmul(const TensorView& w, const float* x, int n, float* y, ThreadPool& pool) {
  const bool big = static_cast<int64_t>(n) * w.rows() * w.cols() >= (int64_t{2} << 20);
  kernels::matmul(w, x, n, y, big ? &pool : nullptr);
}

LookupDrafter::LookupDrafter(int ngram_min, int ngram_max, std::shared_ptr<const NgramCache> cache)
    : ngram_min_(ngram_min), ngram_max_(ngram_max), cache_(std::move(cache)) {
  if (ngram_min < 1 || ngram_max < ngram_min)
    fail_as(ErrorCode::InvalidArgument, "lookup n-gram sizes ", ngram_min, "..", ngram_max, " (need 1 <= min <= max)");
}

namespace {

// The tokens after an occurrence of the history's last n tokens at `start`,
// up to max: what followed it, and past the end of the history the same
// again (the text since the occurrence repeating, period len - n - start),
// so a loop is drafted in full rather than cut where the history ends.
void continuation(std::span<const int32_t> history, int64_t start, int n, int max, std::vector<int32_t>& out) {
  const int64_t len = static_cast<int64_t>(history.size()), from = start + n, period = len - from;
  out.assign(history.begin() + from, history.begin() + from + std::min<int64_t>(max, period));
  while (static_cast<int64_t>(out.size()) < max) out.push_back(out[out.size() - static_cast<size_t>(period)]);
}

}  // namespace

void LookupDrafter::draft(std::span<const int32_t> history, int max, std::vector<int32_t>& out) {
  out.clear();
  const int64_t len = static_cast<int64_t>(history.size());
  if (max <= 0) return;
  for (int n = std::min<int64_t>(ngram_max_, len - 1); n >= ngram_min_; --n) {
    const int32_t* key = history.data() + len - n;
    // Most recent earlier occurrence: the match ends before the suffix itself.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(key, key + n, history.data() + start)) continue;
      continuation(history, start, n, max, out);
      return;
    }
  }
  if (cache_) {
    const auto next = cache_->lookup(history, max);
    out.assign(next.begin(), next.end());
  }
}

void DraftTree::assign(std::span<const std::vector<int32_t>> branches, int max_nodes) {
  // A trie with children in order of appearance, then written in preorder.
  struct Node {
    int32_t token;
    std::vector<int> children;
  };
  std::vector<Node> trie(1, Node{-1, {}});
  for (const auto& b : branches) {
    int at = 0;
    for (int32_t t : b) {
      int next = -1;
      for (int c : trie[static_cast<size_t>(at)].children)
        if (trie[static_cast<size_t>(c)].token == t) next = c;
      if (next < 0) {
        if (static_cast<int>(trie.size()) > max_nodes) break;
        next = static_cast<int>(trie.size());
        trie.push_back(Node{t, {}});
        trie[static_cast<size_t>(at)].children.push_back(next);
      }
      at = next;
    }
  }
  clear();
  std::vector<std::pair<int, int>> stack;  // (trie node, its index in the output)
  for (auto it = trie[0].children.rbegin(); it != trie[0].children.rend(); ++it) stack.push_back({*it, -1});
  while (!stack.empty()) {
    const auto [node, parent] = stack.back();
    stack.pop_back();
    const int at = static_cast<int>(tokens.size());
    tokens.push_back(trie[static_cast<size_t>(node)].token);
    parents.push_back(parent);
    const auto& ch = trie[static_cast<size_t>(node)].children;
    for (auto it = ch.rbegin(); it != ch.rend(); ++it) stack.push_back({*it, at});
  }
}

std::vector<int> DraftTree::depths() const {
  std::vector<int> d(size());
  for (size_t i = 0; i < size(); ++i) d[i] = parents[i] < 0 ? 1 : d[static_cast<size_t>(parents[i])] + 1;
  return d;
}

std::vector<int32_t> DraftTree::first_chain() const {
  std::vector<int32_t> out;
  for (size_t i = 0; i < size() && parents[i] == static_cast<int>(i) - 1; ++i) out.push_back(tokens[i]);
  return out;
}

void DraftTree::prune(int max_depth) {
  const std::vector<int> d = depths();
  std::vector<int> index(size(), -1);
  size_t m = 0;
  for (size_t i = 0; i < size(); ++i) {
    if (d[i] > max_depth) continue;
    index[i] = static_cast<int>(m);
    tokens[m] = tokens[i];
    parents[m] = parents[i] < 0 ? -1 : index[static_cast<size_t>(parents[i])];
    ++m;
  }
  tokens.resize(m);
  parents.resize(m);
}

void Drafter::draft_tree(std::span<const int32_t> history, int max_depth, int max_nodes, DraftTree& out) {
  std::vector<int32_t> chain;
  draft(history, std::min(max_depth, max_nodes), chain);
  out.assign(std::span<const std::vector<int32_t>>(&chain, 1), max_nodes);
}

void LookupDrafter::draft_tree(std::span<const int32_t> history, int max_depth, int max_nodes, DraftTree& out) {
  out.clear();
  const int64_t len = static_cast<int64_t>(history.size());
  if (max_depth <= 0 || max_nodes <= 0) return;
  std::vector<std::vector<int32_t>> branches;
  // Each distinct branch adds a node at least: 2 x max_nodes occurrences
  // are plenty (repeats of one continuation merge in the tree).
  const size_t most = 2 * static_cast<size_t>(max_nodes);
  for (int n = std::min<int64_t>(ngram_max_, len - 1); n >= ngram_min_ && branches.size() < most; --n) {
    const int32_t* key = history.data() + len - n;
    for (int64_t start = len - n - 1; start >= 0 && branches.size() < most; --start) {
      if (!std::equal(key, key + n, history.data() + start)) continue;
      branches.emplace_back();
      continuation(history, start, n, max_depth, branches.back());
    }
  }
  if (branches.empty() && cache_) {
    const auto next = cache_->lookup(history, max_depth);
    if (!next.empty()) branches.emplace_back(next.begin(), next.end());
  }
  out.assign(branches, max_nodes);
}

void ReplayDrafter::draft(std::span<const int32_t> history, int max, std::vector<int32_t>& out) {
  out.clear();
  if (max <= 0 || history.size() >= seq_.size() || !std::equal(history.begin(), history.end(), seq_.begin())) return;
  const size_t count = std::min(seq_.size() - history.size(), static_cast<size_t>(max));
  out.assign(seq_.begin() + static_cast<ptrdiff_t>(history.size()),
             seq_.begin() + static_cast<ptrdiff_t>(history.size() + count));
}

}  // namespace pocket
