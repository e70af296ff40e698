// The speculative generate loop: the same contract as Session::generate
// (streaming, stop strings, EOS, max_tokens, cancellation, the same
// GenerateResult), with each step verifying a drafted block in one batched
// forward (or, with tree_nodes, a drafted tree: greedy follows the
// target's choice down the tree, sampling tries each node's children in
// turn by the rejection rule). Greedy output is token for token that of
// Session::generate.
#pragma once
#include <functional>
#include <string_view>

#include "generate/session.h"
#include "speculative/drafter.h"

namespace pocket {

struct SpeculativeOptions {
  int draft_max = 16;     // largest block of drafted tokens verified at once (1..32)
  bool adaptive = true;   // choose the block length from measured cost and acceptance
  // Tree verification: 0 verifies one drafted chain per step; N (2..64)
  // lets the drafter propose up to N candidate tokens as a tree (several
  // continuations sharing prefixes; Drafter::draft_tree) verified in one
  // pass (Session::verify_tree), the planner's block length bounding its
  // depth (and its size from below: the chosen block always fits; adaptive,
  // nodes past it only while the measured verify cost stays within 10%). Used where the session allows it (no sliding-window layers, no
  // DFlash taps) and without a constraint; elsewhere chains.
  int tree_nodes = 0;
};
// Checks SpeculativeOptions (draft_max 1..32, tree_nodes 0 or 2..64).
void check_speculative_options(const SpeculativeOptions& spec);

// Prompt positions a drafter that estimates its own cost (Drafter::
// draft_cost_in_catch_ups) catches up on before decoding: enough to measure
// its catch-up rate; the rest when drafting is expected to pay.
constexpr size_t kCatchUpProbe = 64;

struct SpeculativeStats {
  int steps = 0;          // target forwards in the decode loop
  int verify_steps = 0;   // of those, with at least one drafted token
  int drafted = 0;        // drafted tokens verified
  int accepted = 0;       // of those, accepted
  int tree_steps = 0;     // verify steps that verified a tree with branches
  double draft_seconds = 0, verify_seconds = 0;  // in the decode loop
  double prompt_draft_seconds = 0;  // the drafter's catch-up on the prompt (counted in the prompt's time)
  double catch_up_seconds = 0;      // its catch-up on the rest of the prompt once drafting is expected to pay
  // Accepted tokens per verify step with a draft (the bonus token not counted).
  double mean_accepted() const { return verify_steps ? static_cast<double>(accepted) / verify_steps : 0.0; }
};

// Generates as session.generate(input, opt, on_text) would. Greedy decoding
// (temperature 0) verifies drafts; with sampling the drafts are accepted by
// the rejection rule, so the output distribution is that of plain sampling.
GenerateResult generate_speculative(Session& session, Drafter& drafter, std::span<const int32_t> input,
                                    const GenerateOptions& opt, const SpeculativeOptions& spec,
                                    const std::function<bool(std::string_view)>& on_text = {},
                                    SpeculativeStats* stats = nullptr);

}  // namespace pocket
