// Measurements that size speculative decoding for a model on this machine:
// the cost of verifying k tokens in one forward as a multiple of one decode
// step, and the oracle ceiling (a drafter replaying the target's own greedy
// output, every draft accepted) at each block size; and the cost of
// verifying the same number of tokens as a tree (tree verification).
#pragma once
#include <atomic>
#include <string>
#include <vector>

namespace pocket::speculative_bench {

struct Options {
  std::vector<int> blocks = {2, 4, 8, 16, 32};
  int context = 256;  // tokens in the cache before the measured forwards
  int gen = 128;      // tokens generated for the oracle ceiling
  int threads = 2;
  int reps = 7;       // timed repetitions of each size (median)
  const std::atomic<bool>* stop = nullptr;
};

struct Row {
  int k = 0;
  double verify_ms = 0;   // median of one forward over k tokens (every row's logits)
  double cost = 0;        // verify_ms / decode_ms
  // The same number of rows as a tree (the root, then three chains from
  // it: Model::forward_tree); 0 where the model cannot verify trees.
  double tree_ms = 0, tree_cost = 0;
  double oracle_tok_s = 0, oracle_speedup = 0;  // greedy generation with the oracle at draft k - 1
};

struct Report {
  std::string path, isa;
  int threads = 0, context = 0, gen = 0;
  double decode_ms = 0;        // median of one-token forwards
  double plain_tok_s = 0;      // plain greedy generation
  std::vector<Row> rows;
};

Report run(const std::string& model_path, const Options& opt);
std::string format_table(const Report& r);

}  // namespace pocket::speculative_bench
