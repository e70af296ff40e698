// The speculative generate loop: the same contract as Session::generate
// (streaming, stop strings, EOS, max_tokens, cancellation, the same
// GenerateResult), with each step verifying a drafted block in one batched
// forward. Greedy output is token for token that of Session::generate.
#pragma once
#include <functional>
#include <string_view>

#include "generate/session.h"
#include "speculative/drafter.h"

namespace pocket {

struct SpeculativeOptions {
  int draft_max = 16;     // largest block of drafted tokens verified at once (1..32)
  bool adaptive = true;   // choose the block length from measured cost and acceptance
};

struct SpeculativeStats {
  int steps = 0;          // target forwards in the decode loop
  int verify_steps = 0;   // of those, with at least one drafted token
  int drafted = 0;        // drafted tokens verified
  int accepted = 0;       // of those, accepted
  double draft_seconds = 0, verify_seconds = 0;
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
