// How many drafted tokens to verify next: the block length that maximises
// the expected tokens per second, from the measured time of each verify
// size and the measured acceptance rate. Zero (a plain decode step) when no
// block is expected to beat one-token decoding, so speculation falls back
// to plain decoding by itself when the drafts are poor or drafting itself
// costs more than it saves.
#pragma once
#include <vector>

namespace pocket {

// How a draft's cost grows with its length: one pass for any length (a
// block drafter such as DFlash, or lookup), or one forward per drafted
// token (a draft model).
enum class DraftCost { PerDraft, PerToken };

class BlockPlanner {
 public:
  // `draft_max`: the largest block to draft (1..32); `adaptive` false
  // always verifies every available draft token up to draft_max.
  BlockPlanner(int draft_max, bool adaptive, DraftCost draft_cost = DraftCost::PerDraft);

  // Draft length to verify when `available` tokens are drafted.
  int choose(int available) const { return choose(available, 1.0); }
  // A forward of `tokens` rows took `seconds`.
  void record_time(int tokens, double seconds);
  // A draft of `drafted` tokens took `seconds`, `missed` positions after
  // the previous draft (a drafter with per-position state catches up on
  // them first): a draft soon after the last one measures the draft's own
  // cost (per token for DraftCost::PerToken), one after a longer pause the
  // cost of catching up per missed position.
  void record_draft_time(double seconds, int missed = 0, int drafted = 1);
  // The drafter caught up on `positions` positions in `seconds` (the
  // prompt, before decoding): a first estimate of the catch-up cost.
  void record_catch_up(double seconds, int positions);
  // Before any draft is measured: a draft of `rows` tokens is expected to
  // cost `catch_ups` positions of the catch-up measured so far (Drafter::draft_cost_in_catch_ups),
  // so a drafter too costly to pay is known before it drafts (until a decode
  // step is measured, any such expectation counts as costly). The first
  // draft measured soon after another replaces it; one after a pause
  // measures the catch-up (the draft taken as the estimate).
  void expect_draft_cost(double catch_ups, int rows = 1);
  // The same from a draft timed before decoding (a draft model drafting
  // one token after the prompt's probe): `seconds` for `rows` tokens.
  void expect_draft_time(double seconds, int rows = 1);
  // Of `drafted` positions checked, the first `accepted` matched (accepted
  // < drafted means a mismatch was seen at position accepted + 1).
  void record_acceptance(int drafted, int accepted);

  // Estimated chance that draft position i (0-based) is accepted when all
  // before it were: each position has its own decayed counts, since a
  // block draft's later positions are much weaker than its first.
  double acceptance_rate(int i = 0) const;
  // How many tokens to ask the drafter for, at most `room`: for a costly
  // drafter (costly_drafter()) one more than the block the planner would
  // choose from a full draft (so the next position keeps being measured),
  // at least 1; otherwise draft_max.
  int draft_request(int room) const;
  // A full draft (draft_max tokens) takes more than 5% of a decode step (a
  // model drafter, not lookup).
  bool costly_drafter() const {
    return draft_time_ > 0 && (time_[1] == 0 && draft_expected_ ? true : draft_cost(draft_max_) > 0.05 * cost(1));
  }
  // Estimated seconds of a forward over n tokens (n >= 1).
  double cost(int n) const;
  // Estimated seconds of drafting n tokens (0 before a draft is measured).
  double draft_cost(int n) const { return per_token_ ? draft_time_ * n : draft_time_; }
  int draft_max() const { return draft_max_; }
  // One decode-loop step end to end (drafting included): `drafted` when a
  // draft was made for it, giving `tokens` tokens in `seconds`. A drafted
  // step also adds to the running loss: its seconds minus what plain
  // decoding would have taken for its tokens (negative when it paid, but
  // not before a plain step is measured: a gain against an unmeasured
  // plain rate is not counted).
  void record_step(bool drafted, int tokens, double seconds);
  // Measured end to end, steps with drafting have given fewer tokens per
  // second than plain ones (both measured, a costly drafter; never when
  // not adaptive), or all drafting so far has lost more than `share` of the
  // decode time. Catches what the cost model misses: a drafter whose work
  // slows the target's next forward (caches, idle threads), noise in the
  // per-part times.
  bool speculation_loses(double share = kLossShare) const;
  // While drafting is paused (speculation measured as losing, or not
  // expected to pay), whether one more exploring draft, `missed` positions
  // after the last, fits the loss budget: the running loss of all drafted
  // steps plus the exploring step's expected cost (the draft's own, the
  // catch-up on the missed positions, and the verify's rows beyond a plain
  // step's) is at most `share` of the decode time so far plus the time of
  // the steps still expected: `room` tokens (what max_tokens and the
  // context leave), but no more than the run has generated so far or
  // kHorizonTokens, whichever is larger (a run that ends early at EOS then
  // loses at most about 2 x share). When every draft fails, exploring thus
  // costs at most about `share` of the run (beyond one draft made before
  // any cost is known: a drafter without an estimate); where catching up
  // costs more per position than `share` of a decode step, drafting stays
  // paused. Always true for a drafter that is not costly.
  bool may_explore(int missed, int room = 0, double share = kLossShare) const;
  static constexpr int kHorizonTokens = 64;
  // Seconds of the decode loop so far and the running loss (record_step).
  double elapsed() const { return elapsed_; }
  double loss() const { return loss_; }
  static constexpr double kLossShare = 0.02;
  // The first forwards after a prompt run 2-4x slower than later ones
  // (measured on pocket-mini's PQ4 file: 0.7-0.9, 0.33-0.41, then
  // 0.2-0.3 ms): until this many samples of a time are taken, its estimate
  // is the fastest of them, not an average the first one would dominate.
  static constexpr int kWarmSamples = 3;
  // How much slower than later ones the first forward after a prompt may
  // run: a draft that would pay at this many times its cost need not wait
  // for the warm-up's plain steps.
  static constexpr double kColdFactor = 4.0;
  // A plain step is due to (re)measure the plain rate: none measured yet;
  // fewer than kWarmSamples, unless drafting pays even with the draft
  // priced kColdFactor times higher (the plain steps measured so far may be
  // that much slower than they will be); or 32 steps with drafting since
  // the last one. Only for a costly drafter: a free one loses nothing by
  // drafting.
  bool wants_plain_step() const {
    if (!adaptive_ || !costly_drafter()) return false;
    if (plain_samples_ == 0) return true;
    if (plain_samples_ < kWarmSamples) return choose(draft_max_, kColdFactor) == 0;
    return drafted_since_plain_ >= 32;
  }

 private:
  int draft_max_;
  bool adaptive_;
  bool per_token_;  // DraftCost::PerToken: draft_time_ is seconds per drafted token
  std::vector<double> hits_, misses_;  // per draft position: decayed counts of outcomes
  std::vector<double> time_;          // EMA of seconds per forward size (0 = not measured)
  std::vector<int> time_samples_;     // samples taken per size
  double draft_time_ = 0;             // EMA of seconds per draft or drafted token (soon after the last draft)
  double catch_up_ = 0;               // EMA of seconds per missed position (drafts after a pause)
  struct StepRate {
    double tokens = 0, seconds = 0;  // EMAs per step
  } drafted_steps_;
  double plain_seconds_ = 0;  // a plain step's seconds (one token): update_warm's estimate
  int plain_samples_ = 0;     // plain steps measured
  int drafted_since_plain_ = 0;
  double plain_overhead_ = 0;       // EMA of a plain step's seconds per token beyond its forward's
  double elapsed_ = 0, loss_ = 0;  // decode seconds so far; drafted steps' seconds over plain's
  int tokens_ = 0;                 // tokens the recorded steps gave
  bool draft_expected_ = false;    // draft_time_ is expect_draft_cost()'s estimate, not a measurement
  double plain_token_seconds() const;
  // choose() with the draft's cost taken `draft_scale` times.
  int choose(int available, double draft_scale) const;
};

}  // namespace pocket
