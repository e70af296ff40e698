#include "bench/constrained.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "constrain/json_frames.h"
#include "generate/session.h"
#include "runtime/loader.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace pocket::bench {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
template <class T>
double median(std::vector<T> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[v.size() / 2]);
}
double percentile(std::vector<float> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}
}  // namespace

ConstrainedBenchReport run_constrained_bench(const std::string& model_path, const ConstrainedBenchOptions& opt) {
  if (opt.constraints.empty()) fail_as(ErrorCode::InvalidArgument, "bench: no constraint given");
  if (opt.runs < 1 || opt.gen < 1) fail_as(ErrorCode::InvalidArgument, "bench: runs and tokens must be >= 1");
  ConstrainedBenchReport rep;
  rep.path = model_path;
  LoadedModel m = load_model(model_path);
  rep.vocab_size = m.tokenizer->vocab_size();
  auto t0 = std::chrono::steady_clock::now();
  auto vocab = constrain::VocabIndex::build(*m.tokenizer);
  // The common JSON frames with the index (once per vocabulary), not in the
  // first JSON schema's compile time.
  for (auto& [name, spec] : opt.constraints)
    if (spec.kind == constrain::ConstraintSpec::Kind::JsonSchema || spec.kind == constrain::ConstraintSpec::Kind::Json) {
      constrain::warm_json_frames(vocab);
      break;
    }
  rep.vocab_index_ms = ms_since(t0);
  Session session(m.model, m.tokenizer, opt.ctx, opt.threads);
  const auto prompt = m.tokenizer->encode(opt.prompt);
  std::vector<double> compile, free_rates, con_rates;
  for (auto& [name, spec] : opt.constraints) {
    ConstrainedResult res;
    res.name = name;
    t0 = std::chrono::steady_clock::now();
    auto c = constrain::compile_constraint(spec, vocab);
    res.compile_ms = ms_since(t0);
    compile.push_back(res.compile_ms);
    std::vector<double> fr, cr;
    for (int run = 0; run < opt.runs; ++run) {
      GenerateOptions co;
      co.max_tokens = opt.gen;
      co.sampling.seed = opt.seed + run;
      co.constraint = c;
      GenerateOptions fo = co;
      fo.constraint = nullptr;
      fo.stop_at_eos = false;
      auto constrained = [&] {
        session.reset();
        GenerateResult r = session.generate(prompt, co);
        rep.mask_us.insert(rep.mask_us.end(), r.mask_us.begin(), r.mask_us.end());
        rep.walks.emplace_back(res.name + "#" + std::to_string(run), r.tokens);
        res.tokens = static_cast<int>(r.tokens.size());
        res.complete = r.constraint_complete;
        if (r.decode_seconds > 0 && !r.tokens.empty()) cr.push_back(r.tokens.size() / r.decode_seconds);
      };
      auto free = [&] {
        fo.max_tokens = std::max(res.tokens, 8);
        session.reset();
        GenerateResult r = session.generate(prompt, fo);
        if (r.decode_seconds > 0 && !r.tokens.empty()) fr.push_back(r.tokens.size() / r.decode_seconds);
      };
      if (run == 0 || run % 2 == 1) {
        constrained();
        free();
      } else {
        free();
        constrained();
      }
    }
    res.free_tok_s = median(fr);
    res.constrained_tok_s = median(cr);
    free_rates.push_back(res.free_tok_s);
    con_rates.push_back(res.constrained_tok_s);
    rep.results.push_back(res);
  }
  rep.free_tok_s = median(free_rates);
  rep.constrained_tok_s = median(con_rates);
  std::vector<double> ratios;
  for (auto& r : rep.results)
    if (r.free_tok_s > 0) ratios.push_back(r.constrained_tok_s / r.free_tok_s);
  rep.ratio = median(ratios);
  rep.compile_median_ms = median(compile);
  rep.compile_max_ms = *std::max_element(compile.begin(), compile.end());
  return rep;
}

std::string format_constrained(const ConstrainedBenchReport& r) {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf, "model %s (vocabulary %d; vocabulary index built once in %.1f ms)\n", r.path.c_str(),
                r.vocab_size, r.vocab_index_ms);
  out += buf;
  std::snprintf(buf, sizeof buf, "%-28s %10s %10s %10s %7s %6s %9s\n", "constraint", "compile ms", "free tok/s",
                "cons tok/s", "ratio", "tokens", "complete");
  out += buf;
  for (auto& x : r.results) {
    std::snprintf(buf, sizeof buf, "%-28s %10.2f %10.1f %10.1f %6.1f%% %6d %9s\n", x.name.substr(0, 28).c_str(),
                  x.compile_ms, x.free_tok_s, x.constrained_tok_s,
                  x.free_tok_s > 0 ? 100.0 * x.constrained_tok_s / x.free_tok_s : 0.0, x.tokens, x.complete ? "yes" : "no");
    out += buf;
  }
  double mean = 0;
  for (float v : r.mask_us) mean += v;
  mean = r.mask_us.empty() ? 0 : mean / static_cast<double>(r.mask_us.size());
  std::snprintf(buf, sizeof buf,
                "overall: free %.1f tok/s, constrained %.1f tok/s (median ratio %.1f%%) | compile median %.2f ms, max %.2f ms\n"
                "mask time per token over %zu tokens: mean %.1f us, median %.1f, p90 %.1f, p99 %.1f, max %.1f\n",
                r.free_tok_s, r.constrained_tok_s, 100.0 * r.ratio, r.compile_median_ms, r.compile_max_ms, r.mask_us.size(),
                mean, percentile(r.mask_us, 0.5), percentile(r.mask_us, 0.9), percentile(r.mask_us, 0.99),
                percentile(r.mask_us, 1.0));
  out += buf;
  return out;
}

void write_constrained_walks(const ConstrainedBenchReport& r, const std::string& path) {
  write_file_atomically(path, [&](std::ostream& out) {
    out << "{";
    for (size_t i = 0; i < r.walks.size(); ++i) {
      out << (i ? ",\n" : "\n") << '"' << r.walks[i].first << "\": [";  // names are file names of a folder
      for (size_t k = 0; k < r.walks[i].second.size(); ++k) out << (k ? "," : "") << r.walks[i].second[k];
      out << "]";
    }
    out << "\n}\n";
  });
}

}  // namespace pocket::bench
