#include "generate/constrained_sample.h"

#include <chrono>

#include "generate/session.h"
#include "util/error.h"

namespace pocket {

int32_t sample_constrained(Sampler& sampler, constrain::Matcher& m, std::span<float> logits,
                           std::span<const int32_t> history, float* mask_us) {
  float us = apply_constraint(m, logits);  // masked before sampling truncation
  int32_t next = sampler.sample(logits, history);
  // Sampling never picks a masked token (probability 0); greedy over the
  // masked logits is the fallback should rounding ever leave one.
  if (!m.would_accept(next)) next = argmax(logits);
  if (!m.advance(next)) fail("constraint: no allowed token to sample");
  // The next step's mask now, while the walk that just reached its state is
  // still in the caches: after the next forward pass (which streams the
  // weights through them) the same mask costs several times more. Counted
  // in this step's mask time.
  if (!m.complete()) {
    const auto t0 = std::chrono::steady_clock::now();
    m.mask();
    us += std::chrono::duration<float, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  if (mask_us) *mask_us = us;
  return next;
}

}  // namespace pocket
