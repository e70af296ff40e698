// The vocabulary as the matcher sees it: every token's bytes in a trie laid
// out in preorder (one byte per node, the end of each node's subtree), so a
// mask is one linear pass that skips whole subtrees the grammar rejects.
// Control tokens never appear in the trie; end-of-sequence ids are allowed
// separately, where the grammar accepts.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pocket {
class Tokenizer;
}

namespace pocket::constrain {

class FrameCache;
class MaskPool;

struct VocabIndex {
  int32_t vocab_size = 0;
  std::vector<int32_t> eos_ids;
  std::vector<std::string> bytes;   // per token id; empty for excluded tokens
  std::vector<uint8_t> excluded;    // 1: control token (or empty), never allowed by the trie
  // Preorder trie (the root is implicit).
  std::vector<uint8_t> node_byte;
  std::vector<uint16_t> node_depth;  // 1 for children of the root
  std::vector<int32_t> node_skip;    // index just past the node's subtree
  std::vector<int32_t> node_tok;     // tokens ending at node i: tok_ids[node_tok[i] .. node_tok[i+1])
  std::vector<int32_t> tok_ids;
  std::vector<int32_t> node_parent;  // -1 for children of the root
  // The nodes whose byte is b, in preorder: byte_nodes[byte_start[b] .. byte_start[b + 1]).
  std::vector<int32_t> byte_nodes, byte_start;
  std::vector<int32_t> root_child;  // per byte: the root's child with that byte (-1: none)
  int max_depth = 0;
  // Frame walks shared by every matcher on this vocabulary (frame_cache.h).
  std::shared_ptr<FrameCache> frame_cache;
  // Mask buffers reused by the matchers on this vocabulary (mask_pool.h).
  std::shared_ptr<MaskPool> mask_pool;

  // From a tokenizer: token_bytes of every id, control tokens excluded.
  static std::shared_ptr<const VocabIndex> build(const Tokenizer& tok);
  // From explicit byte strings (tests); `excluded` may be empty.
  static std::shared_ptr<const VocabIndex> build(std::vector<std::string> bytes, std::vector<uint8_t> excluded,
                                                 std::vector<int32_t> eos_ids);
  size_t mask_words() const { return (static_cast<size_t>(vocab_size) + 63) / 64; }
};

}  // namespace pocket::constrain
