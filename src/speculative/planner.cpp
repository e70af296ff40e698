#include "speculative/planner.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace pocket {

namespace {
// Before a size is measured, its cost relative to a measured one follows
// this prior (about 2x a decode step at 8 tokens, the order measured on the
// PQ4 kernels); measured times replace it as they arrive.
double prior(int n) { return 1.0 + 0.14 * (n - 1); }
constexpr double kTimeDecay = 0.8;   // weight of the old value in the time EMA
constexpr double kCountDecay = 0.9;  // per observation, for the acceptance counts
// Wall time on a shared machine has outliers (a preempted step takes 5-10x
// as long): once an average exists, a sample counts as at most this many
// times it, so one outlier cannot flip the planner's decisions for long.
constexpr double kOutlier = 3.0;
void update_ema(double& avg, double sample) {
  avg = avg == 0 ? sample : kTimeDecay * avg + (1 - kTimeDecay) * std::min(sample, kOutlier * avg);
}
// update_ema, but the fastest sample while fewer than kWarmSamples are
// taken (counted in `samples`).
void update_warm(double& avg, int& samples, double sample) {
  if (samples++ < BlockPlanner::kWarmSamples)
    avg = avg == 0 ? sample : std::min(avg, sample);
  else
    update_ema(avg, sample);
}
}  // namespace

BlockPlanner::BlockPlanner(int draft_max, bool adaptive, DraftCost draft_cost)
    : draft_max_(draft_max),
      adaptive_(adaptive),
      per_token_(draft_cost == DraftCost::PerToken),
      time_(static_cast<size_t>(draft_max) + 2, 0.0),
      time_samples_(time_.size(), 0) {
  if (draft_max < 1 || draft_max > 32) fail_as(ErrorCode::InvalidArgument, "draft length ", draft_max, " must be in 1..32");
  hits_.assign(static_cast<size_t>(draft_max), 2.0);  // the prior: 2 hits, 1 miss
  misses_.assign(static_cast<size_t>(draft_max), 1.0);
}

double BlockPlanner::acceptance_rate(int i) const {
  const size_t p = static_cast<size_t>(std::clamp(i, 0, draft_max_ - 1));
  return (hits_[p] + 1.0) / (hits_[p] + misses_[p] + 2.0);
}

int BlockPlanner::draft_request(int room) const {
  if (room <= 0) return 0;
  if (!adaptive_ || !costly_drafter()) return std::min(room, draft_max_);
  return std::min({room, draft_max_, choose(draft_max_) + 1});
}

void BlockPlanner::record_time(int tokens, double seconds) {
  if (tokens < 1 || tokens >= static_cast<int>(time_.size()) || !(seconds > 0)) return;
  update_warm(time_[static_cast<size_t>(tokens)], time_samples_[static_cast<size_t>(tokens)], seconds);
}

void BlockPlanner::record_draft_time(double seconds, int missed, int drafted) {
  if (!(seconds >= 0)) return;
  drafted = std::max(drafted, 1);  // a draft that proposed nothing still ran once
  if (draft_expected_ && missed <= draft_max_ + 1) {  // a draft's own cost replaces the estimate
    draft_expected_ = false;
    draft_time_ = 0;
  }
  if (missed <= draft_max_ + 1 || draft_time_ == 0) {  // the most a verified block moves the history
    update_ema(draft_time_, per_token_ ? seconds / drafted : seconds);
    return;
  }
  record_catch_up(std::max(seconds - draft_cost(drafted), 0.0), missed);
}

void BlockPlanner::record_catch_up(double seconds, int positions) {
  if (positions > 0 && seconds >= 0) update_ema(catch_up_, seconds / positions);
}

void BlockPlanner::expect_draft_cost(double catch_ups, int rows) {
  if (catch_ups > 0 && catch_up_ > 0) expect_draft_time(catch_ups * catch_up_, rows);
}

void BlockPlanner::expect_draft_time(double seconds, int rows) {
  if (draft_time_ > 0 || !(seconds > 0)) return;
  draft_time_ = seconds / (per_token_ ? std::max(rows, 1) : 1);
  draft_expected_ = true;
}

void BlockPlanner::record_acceptance(int drafted, int accepted) {
  for (int i = 0; i < drafted && i <= accepted && i < draft_max_; ++i) {
    const size_t p = static_cast<size_t>(i);
    hits_[p] *= kCountDecay;
    misses_[p] *= kCountDecay;
    (i < accepted ? hits_[p] : misses_[p]) += 1.0;
  }
}

void BlockPlanner::record_step(bool drafted, int tokens, double seconds) {
  if (tokens < 1 || !(seconds > 0)) return;
  elapsed_ += seconds;
  tokens_ += tokens;
  drafted_since_plain_ = drafted ? drafted_since_plain_ + 1 : 0;
  if (drafted) {
    const double l = seconds - tokens * plain_token_seconds();
    loss_ += plain_samples_ > 0 ? l : std::max(l, 0.0);
    StepRate& r = drafted_steps_;
    r.tokens = r.seconds == 0 ? tokens : kTimeDecay * r.tokens + (1 - kTimeDecay) * tokens;
    update_ema(r.seconds, seconds);
    return;
  }
  // A plain step (one token): its time beyond the forward's, then its
  // seconds, which warm up as a forward's do.
  const double s = seconds / tokens;
  if (time_[1] > 0) {
    const double over = std::max(s - time_[1], 0.0);
    plain_overhead_ = plain_samples_ == 0 ? over : kTimeDecay * plain_overhead_ + (1 - kTimeDecay) * over;
  }
  update_warm(plain_seconds_, plain_samples_, s);
}

bool BlockPlanner::speculation_loses(double share) const {
  if (!adaptive_ || !costly_drafter() || drafted_steps_.seconds == 0 || plain_samples_ == 0) return false;
  return drafted_steps_.seconds / drafted_steps_.tokens > plain_token_seconds() || loss_ > share * elapsed_;
}

// What plain decoding takes per token now: one forward (cost(1), which
// every step's verify updates) plus what plain steps measured beyond their
// forward (sampling, the loop's own work), but no more than the plain
// steps' own average. That average moves only on plain steps, rare while a
// drafter explores, so a slow early one (caches cold after the prompt)
// would otherwise price plain decoding high for the rest of the run and
// make every exploring draft look free (measured: pocket-mini's PQ4 file
// with itself as the draft, 26 exploring drafts at ~0.2 ms over a 0.28 ms
// plain step each counted as a loss of ~0.01 ms).
double BlockPlanner::plain_token_seconds() const {
  if (plain_samples_ == 0) return cost(1);
  return std::min(plain_seconds_, cost(1) + plain_overhead_);
}

bool BlockPlanner::may_explore(int missed, int room, double share) const {
  if (!adaptive_ || !costly_drafter()) return true;
  const int block = choose(draft_max_);
  const double verify_extra = block > 0 ? std::max(cost(block + 1) - cost(1), 0.0) : 0.0;
  const int ahead = std::min(std::max(room, 0), std::max(tokens_, kHorizonTokens));
  const double budget = share * (elapsed_ + ahead * plain_token_seconds());
  return loss_ + draft_cost(std::min(block + 1, draft_max_)) + catch_up_ * missed + verify_extra <= budget;
}

double BlockPlanner::cost(int n) const {
  if (time_[static_cast<size_t>(n)] > 0) return time_[static_cast<size_t>(n)];
  // Scale from the nearest measured size by the prior.
  for (int d = 1; d < static_cast<int>(time_.size()); ++d)
    for (int m : {n - d, n + d})
      if (m >= 1 && m < static_cast<int>(time_.size()) && time_[static_cast<size_t>(m)] > 0)
        return time_[static_cast<size_t>(m)] * prior(n) / prior(m);
  return prior(n);
}

int BlockPlanner::choose(int available, double draft_scale) const {
  const int most = std::min(available, draft_max_);
  if (most <= 0) return 0;
  if (!adaptive_) return most;
  // Expected tokens from a block of k drafts: the bonus token plus
  // a0 + a0 a1 + ... + a0 ... a(k-1) (each draft accepted only after all
  // before it).
  int best = 0;
  double best_rate = 1.0 / cost(1), expected = 1.0, ak = 1.0;
  for (int k = 1; k <= most; ++k) {
    ak *= acceptance_rate(k - 1);
    expected += ak;
    const double rate = expected / (draft_scale * draft_cost(k) + cost(k + 1));
    if (rate > best_rate) best = k, best_rate = rate;
  }
  return best;
}

}  // namespace pocket
