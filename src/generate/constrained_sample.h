// One constrained sampling step, shared by Session::generate and the
// server's slots: mask the logits with the matcher's constraint, sample,
// advance the matcher by the token.
#pragma once
#include <cstdint>
#include <span>

#include "constrain/matcher.h"
#include "generate/sampler.h"

namespace pocket {

// Returns the token; `mask_us` (if given) gets the time spent on masks: this
// step's (usually ready) and the next one's, computed after the advance.
// Throws when the constraint allows no token.
int32_t sample_constrained(Sampler& sampler, constrain::Matcher& m, std::span<float> logits,
                           std::span<const int32_t> history, float* mask_us = nullptr);

}  // namespace pocket
