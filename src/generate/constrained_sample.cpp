#include "generate/constrained_sample.h"

#include "generate/session.h"
#include "util/error.h"

namespace pocket {

int32_t sample_constrained(Sampler& sampler, constrain::Matcher& m, std::span<float> logits,
                           std::span<const int32_t> history, float* mask_us) {
  const float us = apply_constraint(m, logits);  // masked before sampling truncation
  if (mask_us) *mask_us = us;
  int32_t next = sampler.sample(logits, history);
  // Sampling never picks a masked token (probability 0); greedy over the
  // masked logits is the fallback should rounding ever leave one.
  if (!m.would_accept(next)) next = argmax(logits);
  if (!m.advance(next)) fail("constraint: no allowed token to sample");
  return next;
}

}  // namespace pocket
