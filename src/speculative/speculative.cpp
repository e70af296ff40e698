#include "speculative/speculative.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <optional>

#include "generate/text_stream.h"
#include "speculative/planner.h"
#include "util/error.h"

namespace pocket {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Probability the sampler gives `id` among `cands` (their weights summed).
double probability(std::span<const std::pair<float, int32_t>> cands, int32_t id) {
  double total = 0, w = 0;
  for (const auto& c : cands) {
    total += c.first;
    if (c.second == id) w = c.first;
  }
  return total > 0 ? w / total : 0.0;
}

// Cuts `draft` before its first token the constraint rejects (and after an
// end-of-sequence token); the matcher ends where it started.
void trim_to_constraint(constrain::Matcher& m, const Tokenizer& tok, std::vector<int32_t>& draft) {
  size_t n = 0;
  while (n < draft.size() && m.advance(draft[n])) {
    if (tok.is_eos(draft[n++])) break;
  }
  m.rollback(static_cast<int>(n));
  draft.resize(n);
}

// Tree verification: the share by which a tree's verify may cost more than
// the chain the planner chose (measured cost curve), for its extra branches.
constexpr double kTreeExtraCost = 0.10;

}  // namespace

void check_speculative_options(const SpeculativeOptions& spec) {
  if (spec.draft_max < 1 || spec.draft_max > 32)
    fail_as(ErrorCode::InvalidArgument, "draft length ", spec.draft_max, " must be in 1..32");
  if (spec.tree_nodes != 0 && (spec.tree_nodes < 2 || spec.tree_nodes > Model::kMaxTreeNodes - 1))
    fail_as(ErrorCode::InvalidArgument, "draft tree of ", spec.tree_nodes, " nodes: use 0 (chains) or 2..",
            Model::kMaxTreeNodes - 1);
}

GenerateResult generate_speculative(Session& session, Drafter& drafter, std::span<const int32_t> input,
                                    const GenerateOptions& opt, const SpeculativeOptions& spec,
                                    const std::function<bool(std::string_view)>& on_text, SpeculativeStats* stats) {
  if (opt.max_tokens < 0) fail_as(ErrorCode::InvalidArgument, "max tokens ", opt.max_tokens, " must be >= 0");
  check_speculative_options(spec);
  BlockPlanner planner(spec.draft_max, spec.adaptive, drafter.draft_cost_kind());
  const bool greedy = opt.sampling.temperature == 0.0f;
  Sampler sampler(opt.sampling);
  const Tokenizer& tok = session.tokenizer();
  const int V = session.model().config().vocab_size;
  SpeculativeStats st;
  GenerateResult r;
  r.prompt_tokens = static_cast<int>(input.size());
  {
    const auto& cached = session.cached_tokens();
    const size_t n = std::min(cached.size(), input.size());
    const size_t common = static_cast<size_t>(std::mismatch(cached.begin(), cached.begin() + n, input.begin()).first - cached.begin());
    r.reused_tokens = static_cast<int>(std::min(common, input.empty() ? 0 : input.size() - 1));
  }
  auto t0 = Clock::now();
  std::span<float> logits = session.prefill(input, opt.cancelled, opt.prefill_progress);
  r.prefill_seconds = seconds_since(t0);
  if (logits.empty()) {
    r.stop = GenerateResult::Stop::Cancelled;
    return r;
  }

  // The drafter's catch-up on the prompt: part of the prompt's time, not
  // planned as the cost of a draft, but the planner's first estimate of
  // catching up after a pause. A drafter whose draft's cost is known before
  // decoding catches up only on a probe of the prompt here; the rest waits
  // until drafting is expected to pay (then caught up at once, below) or an
  // exploring draft fits the loss budget, so a draft that cannot pay costs
  // next to nothing. DFlash estimates its draft in catch-ups (by
  // multiply-adds); a draft model, one forward per drafted token, drafts one
  // token after the probe, timed (its decode is bound by reading its
  // weights, which multiply-adds do not price).
  const bool per_token = drafter.draft_cost_kind() == DraftCost::PerToken;
  const bool estimates = per_token || drafter.draft_cost_in_catch_ups(1, 1) > 0;
  size_t drafted_at = estimates ? std::min(input.size(), kCatchUpProbe) : input.size();  // the history's length at the last catch-up
  {
    auto td = Clock::now();
    drafter.prepare(input.first(drafted_at));
    double dt = seconds_since(td);
    planner.record_catch_up(dt, static_cast<int>(drafted_at));
    planner.expect_draft_cost(drafter.draft_cost_in_catch_ups(spec.draft_max, static_cast<int>(input.size())), spec.draft_max);
    if (per_token) {
      std::vector<int32_t> probe;
      td = Clock::now();
      drafter.draft(input.first(drafted_at), 1, probe);
      const double dp = seconds_since(td);
      planner.expect_draft_time(dp, 1);
      dt += dp;
    }
    st.prompt_draft_seconds = dt;
    r.prefill_seconds += dt;
  }
  TextStream stream(tok, opt.stop_strings);
  std::vector<int32_t> history(input.begin(), input.end());
  // A constraint masks every distribution a token is chosen from (the
  // target's rows, for greedy and sampling alike), drafts are cut at the
  // first token it rejects, and the matcher moves only over taken tokens.
  std::optional<constrain::Matcher> matcher;
  if (opt.constraint) {
    matcher.emplace(opt.constraint->matcher());
    r.constraint_used = true;
    stream.continue_after(INT32_MAX);  // as Session::generate: the text is the bytes the matcher saw
  }
  // Picks a token from one row of logits as Session::generate would: masked,
  // then drawn from the sampler's candidates (skipping `exclude`).
  auto choose = [&](std::span<float> row, std::span<const std::pair<float, int32_t>> cands, int32_t exclude) {
    int32_t t = greedy ? cands[0].second : sampler.draw(cands, exclude);
    if (matcher && !matcher->would_accept(t)) t = argmax(row);
    return t;
  };
  // Takes one generated token as Session::generate does; false ends
  // generation (r.stop says why).
  auto take = [&](int32_t t) {
    if (matcher && !matcher->advance(t)) fail("constraint: no allowed token to sample");
    if ((opt.stop_at_eos || matcher) && tok.is_eos(t)) {
      r.stop = GenerateResult::Stop::Eos;
      r.eos_token = t;
      return false;
    }
    r.tokens.push_back(t);
    history.push_back(t);
    const std::string piece = stream.push(t);
    if (!piece.empty()) {
      r.text += piece;
      if (on_text && !on_text(piece)) {
        r.stop = GenerateResult::Stop::Callback;
        return false;
      }
    }
    if (stream.stopped()) {
      r.stop = GenerateResult::Stop::StopString;
      return false;
    }
    if (static_cast<int>(r.tokens.size()) == opt.max_tokens) {
      r.stop = GenerateResult::Stop::MaxTokens;
      return false;
    }
    return true;
  };

  t0 = Clock::now();
  double prompt_catch_up = 0;  // seconds of the loop's catch-ups spent on prompt positions
  std::vector<int32_t> draft, block;
  // Tree verification: the drafted tree, and the verified one with the
  // current token as its root (node 0).
  const bool use_tree = spec.tree_nodes > 0 && !matcher && session.tree_verifiable();
  DraftTree tree;
  std::vector<int32_t> tree_tokens;
  std::vector<int> tree_parents, path;
  std::vector<std::vector<int>> children;
  std::vector<std::pair<float, int32_t>> residual;
  constexpr int kMaxBackoff = 32;
  int backoff = 0, skip = 0;  // a free drafter's pause after a plain choice: steps left
  bool paused = false;        // a costly drafter's pause: drafts only within the planner's loss budget
  bool explore = false;  // the first draft after a pause may be verified even when speculation measures as losing
  int32_t next = -1;
  if (matcher && matcher->complete() && opt.max_tokens > 0) {
    r.stop = GenerateResult::Stop::ConstraintEnd;
  } else if (opt.max_tokens > 0) {
    if (matcher) r.mask_us.push_back(apply_constraint(*matcher, logits));
    next = sampler.sample(logits, history);
    if (matcher && !matcher->would_accept(next)) next = argmax(logits);
  }
  while (next >= 0 && take(next)) {
    const int cached = static_cast<int>(session.cached_tokens().size());
    if (cached >= session.context_size()) {
      r.stop = GenerateResult::Stop::ContextFull;
      break;
    }
    if (opt.cancelled && opt.cancelled()) {
      r.stop = GenerateResult::Stop::Cancelled;
      break;
    }
    if (matcher && matcher->complete()) {
      r.stop = GenerateResult::Stop::ConstraintEnd;
      break;
    }
    // Draft, then choose how much of it to verify: it must leave room for
    // the bonus token within max_tokens and fit the context.
    const int room = std::min(opt.max_tokens - static_cast<int>(r.tokens.size()) - 1, session.context_size() - cached - 1);
    // While the planner keeps choosing plain steps, a free drafter (lookup)
    // skips drafting for a growing number of steps (then tries again); a
    // costly one (a draft model) drafts again only while the loss of all its
    // drafting so far is within the planner's budget (2% of the decode
    // time, so far and expected: BlockPlanner::may_explore), so poor drafts
    // cost next to nothing; a drafter that estimates its cost before
    // drafting (DFlash) makes no draft at all where one cannot fit. A
    // paused step is a plain step: no draft, no catch-up of the drafter
    // (it catches up on the tokens it missed when it drafts again). The
    // planner's clock is wall time: reading the process's CPU clock instead
    // (a syscall) cost ~4% of pocket-mini's decode and doubled its context
    // switches.
    const auto t_step = Clock::now();
    double step_excluded = 0;  // seconds of the step that are not its cost (a committed catch-up)
    bool drafted_now = false;
    draft.clear();
    // A costly drafter pauses as soon as no block, even a full draft, is
    // expected to pay (before paying for the draft).
    if (skip == 0 && !paused && planner.costly_drafter() && (planner.choose(room) == 0 || planner.speculation_loses()))
      paused = explore = true;
    if (skip > 0) {
      --skip;
    } else if ((!paused || planner.may_explore(static_cast<int>(history.size() - drafted_at), room)) && !planner.wants_plain_step()) {
      drafted_now = true;
      // Drafting expected to pay (not paused): the positions not caught up
      // yet (the prompt's rest, after a drafter's probe) are caught up
      // first, as the prompt's catch-up would have been: timed apart and
      // not taken for the cost of this draft or step.
      if (!paused && estimates && history.size() - drafted_at > static_cast<size_t>(spec.draft_max) + 1) {
        const auto tc = Clock::now();
        const size_t run = history.size() - 1;  // the last token is the anchor, not run by the target yet
        drafter.prepare(std::span<const int32_t>(history).first(run));
        const double dc = seconds_since(tc);
        st.catch_up_seconds += dc;
        // The prompt's share of it is the prompt's work deferred: it counts
        // in the prompt's time, as a catch-up before decoding would have.
        const size_t prompt_rest = input.size() > drafted_at ? input.size() - drafted_at : 0;
        prompt_catch_up += dc * static_cast<double>(std::min(prompt_rest, run - drafted_at)) / static_cast<double>(run - drafted_at);
        planner.record_catch_up(dc, static_cast<int>(run - drafted_at));
        drafted_at = run;
        step_excluded = dc;
      }
      const auto td = Clock::now();
      if (use_tree) {
        drafter.draft_tree(history, planner.draft_request(room), spec.tree_nodes, tree);
        draft = tree.first_chain();
      } else {
        drafter.draft(history, planner.draft_request(room), draft);
      }
      const int drafted = static_cast<int>(draft.size());  // what the drafter ran, before a constraint cuts it
      if (matcher) trim_to_constraint(*matcher, tok, draft);
      const double dt = seconds_since(td);
      st.draft_seconds += dt;
      planner.record_draft_time(dt, static_cast<int>(history.size() - drafted_at), drafted);
      drafted_at = history.size();
    }
    int available = static_cast<int>(draft.size());
    if (use_tree && drafted_now)
      for (int d : tree.depths()) available = std::max(available, d);
    int k = planner.choose(std::min(available, room));
    // Steps with drafting measured slower per token than plain ones, end to
    // end: plain, but for one exploring block after each pause.
    if (k > 0 && !explore && planner.speculation_loses()) k = 0;
    if (drafted_now) explore = false;
    if (!draft.empty()) {
      backoff = k > 0 ? 0 : std::min(2 * backoff + 1, kMaxBackoff);
      paused = k == 0 && planner.costly_drafter();
      skip = k > 0 || paused ? 0 : backoff;
      explore = skip > 0 || paused;
    }
    if (use_tree && drafted_now && k > 0) {
      // The tree's depth is the planner's block; its size what that block's
      // verify costs plus kTreeExtraCost (adaptive: the measured cost curve,
      // so a tree adds rows only where rows are nearly free), at most
      // tree_nodes. The first nodes of a preorder are a tree, first chain first.
      tree.prune(k);
      int nodes = spec.tree_nodes;
      if (spec.adaptive) {
        const double limit = planner.cost(k + 1) * (1.0 + kTreeExtraCost);
        nodes = k;
        while (nodes < spec.tree_nodes && nodes + 2 <= planner.draft_max() + 1 && planner.cost(nodes + 2) <= limit) ++nodes;
      }
      tree.truncate(static_cast<size_t>(std::max(nodes, k)));
    }
    if (use_tree && drafted_now && k > 0 && tree.size() > tree.first_chain().size()) {
      const auto tv = Clock::now();
      tree_tokens.assign(1, next);
      tree_tokens.insert(tree_tokens.end(), tree.tokens.begin(), tree.tokens.end());
      tree_parents.assign(1, -1);
      for (int p : tree.parents) tree_parents.push_back(p + 1);
      std::span<float> rows = session.verify_tree(tree_tokens, tree_parents);
      const double dt = seconds_since(tv);
      st.verify_seconds += dt;
      planner.record_time(static_cast<int>(tree_tokens.size()), dt);  // a tree's rows cost what a block's do
      ++st.steps;
      children.assign(tree_tokens.size(), {});
      for (size_t i = 1; i < tree_tokens.size(); ++i) children[static_cast<size_t>(tree_parents[i])].push_back(static_cast<int>(i));
      // From the root, follow the child the target takes: greedy, the one
      // whose token is the argmax; sampling, the children are tried in turn
      // by the rejection rule, each against the distribution left after the
      // rejected ones (so the token taken is distributed as plain sampling's).
      path.assign(1, 0);
      int accepted = 0;
      bool stopped = false;
      next = -1;
      for (int u = 0; !stopped;) {
        std::span<float> row = rows.subspan(static_cast<size_t>(u) * V, V);
        auto cands = sampler.candidates(row, history);
        int taken = -1;
        if (greedy) {
          for (int ch : children[static_cast<size_t>(u)])
            if (tree_tokens[static_cast<size_t>(ch)] == cands[0].second) taken = ch;
        } else {
          residual.assign(cands.begin(), cands.end());
          for (int ch : children[static_cast<size_t>(u)]) {
            const int32_t d = tree_tokens[static_cast<size_t>(ch)];
            if (sampler.chance(probability(residual, d))) {
              taken = ch;
              break;
            }
            for (auto& c : residual)
              if (c.second == d) c.first = 0;
          }
        }
        if (taken < 0) {
          next = greedy ? cands[0].second : sampler.draw(residual, -1);
          if (next < 0) next = cands[0].second;  // rounding left no residual weight (the children held it all)
          break;
        }
        ++accepted;
        path.push_back(taken);
        u = taken;
        stopped = !take(tree_tokens[static_cast<size_t>(taken)]);
      }
      ++st.verify_steps;
      ++st.tree_steps;
      st.drafted += static_cast<int>(tree.size());
      st.accepted += accepted;
      planner.record_acceptance(k, accepted);
      planner.record_step(true, accepted + 1, seconds_since(t_step) - step_excluded);
      // Keep `next`'s row and the accepted path's (not a token that ended
      // generation: plain decoding would not have run it).
      path.resize(path.size() - (stopped ? 1 : 0));
      session.accept_tree(path);
      if (stopped) break;
      continue;
    }
    block.assign(1, next);
    block.insert(block.end(), draft.begin(), draft.begin() + k);

    const auto tv = Clock::now();
    std::span<float> rows = session.verify(block);
    const double dt = seconds_since(tv);
    st.verify_seconds += dt;
    planner.record_time(k + 1, dt);
    ++st.steps;
    const size_t base = static_cast<size_t>(cached);  // the cache before `next`

    // Accept drafts while the target agrees (greedy) or by the rejection
    // rule (sampling: accept d with probability p(d), else draw from p
    // without d), taking each accepted token as it is decided.
    int accepted = 0;
    bool stopped = false;
    next = -1;
    for (int i = 0; i <= k && !stopped; ++i) {
      std::span<float> row = rows.subspan(static_cast<size_t>(i) * V, V);
      if (matcher) r.mask_us.push_back(apply_constraint(*matcher, row));
      auto cands = sampler.candidates(row, history);
      if (i == k) {
        next = choose(row, cands, -1);
        break;
      }
      const int32_t d = draft[static_cast<size_t>(i)];
      const bool ok = greedy ? cands[0].second == d : sampler.chance(probability(cands, d));
      if (!ok) {
        next = choose(row, cands, d);
        break;
      }
      ++accepted;
      stopped = !take(d);
      if (!stopped && matcher && matcher->complete()) {  // Session::generate stops before its next step
        r.stop = GenerateResult::Stop::ConstraintEnd;
        stopped = true;
      }
    }
    if (k > 0) {
      ++st.verify_steps;
      st.drafted += k;
      st.accepted += accepted;
      planner.record_acceptance(k, accepted);
    } else if (!draft.empty()) {  // not verified: learn from the real token for free
      planner.record_acceptance(1, next == draft[0] ? 1 : 0);
    }
    planner.record_step(drafted_now && !draft.empty(), accepted + 1, seconds_since(t_step) - step_excluded);
    // Keep the rows of `next` and the accepted drafts; when a draft token
    // ended generation, keep what plain decoding would have run (not it).
    session.rollback(base + 1 + static_cast<size_t>(accepted) - (stopped ? 1 : 0));
    if (stopped) break;
  }
  const std::string tail = stream.finish();
  if (!tail.empty()) {
    r.text += tail;
    if (on_text) on_text(tail);
  }
  if (matcher) r.constraint_complete = matcher->accepting() && r.stop != GenerateResult::Stop::StopString;
  r.decode_seconds = seconds_since(t0) - prompt_catch_up;
  r.prefill_seconds += prompt_catch_up;
  if (stats) *stats = st;
  return r;
}

}  // namespace pocket
