#include "constrain/vocab_index.h"

#include <algorithm>
#include <numeric>

#include "constrain/frame_cache.h"
#include "constrain/mask_pool.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace pocket::constrain {

std::shared_ptr<const VocabIndex> VocabIndex::build(const Tokenizer& tok) {
  const int32_t n = tok.vocab_size();
  std::vector<std::string> bytes(n);
  std::vector<uint8_t> excluded(n, 0);
  std::vector<int32_t> eos;
  for (int32_t i = 0; i < n; ++i) {
    if (tok.is_eos(i)) eos.push_back(i);
    if (tok.is_control(i) || tok.is_eos(i)) {
      excluded[i] = 1;
      continue;
    }
    bytes[i] = tok.token_bytes(i);
  }
  return build(std::move(bytes), std::move(excluded), std::move(eos));
}

std::shared_ptr<const VocabIndex> VocabIndex::build(std::vector<std::string> bytes, std::vector<uint8_t> excluded,
                                                    std::vector<int32_t> eos_ids) {
  auto v = std::make_shared<VocabIndex>();
  v->frame_cache = std::make_shared<FrameCache>();
  const int32_t n = static_cast<int32_t>(bytes.size());
  v->vocab_size = n;
  // Up to 64 MiB of free buffers (at least 64 masks) kept for the next matchers.
  const size_t words = v->mask_words();
  v->mask_pool = std::make_shared<MaskPool>(words, std::max<size_t>(64, (size_t{64} << 20) / (8 * std::max<size_t>(words, 1))));
  excluded.resize(n, 0);
  for (int32_t i = 0; i < n; ++i)
    if (bytes[i].empty() || bytes[i].size() > 65535) excluded[i] = 1;
  for (int32_t e : eos_ids)
    if (e >= 0 && e < n) excluded[e] = 1;
  std::vector<int32_t> order;
  for (int32_t i = 0; i < n; ++i)
    if (!excluded[i]) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes[a] < bytes[b] || (bytes[a] == bytes[b] && a < b); });
  std::vector<int32_t> path;  // node index per depth-1
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = bytes[id];
    size_t lcp = 0;
    if (prev)
      while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
    if (prev && lcp == s.size() && s.size() == prev->size()) {  // same bytes as the previous token
      v->tok_ids.push_back(id);
      continue;
    }
    path.resize(lcp);
    for (size_t d = lcp; d < s.size(); ++d) {
      path.push_back(static_cast<int32_t>(v->node_byte.size()));
      v->node_byte.push_back(static_cast<uint8_t>(s[d]));
      v->node_depth.push_back(static_cast<uint16_t>(d + 1));
      v->node_tok.push_back(static_cast<int32_t>(v->tok_ids.size()));
    }
    v->tok_ids.push_back(id);
    v->max_depth = std::max<int>(v->max_depth, static_cast<int>(s.size()));
    prev = &s;
  }
  const int32_t nodes = static_cast<int32_t>(v->node_byte.size());
  v->node_tok.push_back(static_cast<int32_t>(v->tok_ids.size()));
  v->node_skip.assign(nodes, nodes);
  v->node_parent.assign(nodes, -1);
  std::vector<int32_t> open;
  for (int32_t i = 0; i < nodes; ++i) {
    while (!open.empty() && v->node_depth[open.back()] >= v->node_depth[i]) {
      v->node_skip[open.back()] = i;
      open.pop_back();
    }
    if (!open.empty()) v->node_parent[i] = open.back();
    open.push_back(i);
  }
  // Nodes by byte: a counting sort keeps each byte's list in preorder.
  v->byte_start.assign(257, 0);
  for (uint8_t b : v->node_byte) ++v->byte_start[b + 1];
  std::partial_sum(v->byte_start.begin(), v->byte_start.end(), v->byte_start.begin());
  v->byte_nodes.resize(nodes);
  std::vector<int32_t> fill(v->byte_start.begin(), v->byte_start.end() - 1);
  for (int32_t i = 0; i < nodes; ++i) v->byte_nodes[fill[v->node_byte[i]]++] = i;
  // The root's children come in byte order (the strings are sorted bytewise).
  v->root_child.assign(256, -1);
  for (int32_t i = 0, last = -1; i < nodes; i = v->node_skip[i]) {
    if (static_cast<int>(v->node_byte[i]) <= last) fail("vocabulary index: the trie's first bytes are out of order");
    last = v->node_byte[i];
    v->root_child[last] = i;
  }
  v->bytes = std::move(bytes);
  v->excluded = std::move(excluded);
  v->eos_ids = std::move(eos_ids);
  return v;
}

}  // namespace pocket::constrain
