// pocket classify / pocket route: labels with calibrated probabilities from a
// trained head (or zero-shot from label verbalisations), one prefill per input.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "heads/scorer.h"
#include "heads/trainer.h"
#include "heads_cli.h"
#include "util/error.h"

namespace pocket::cli {

namespace {

struct ClassifyArgs {
  ModelOptions model;
  heads::DataOptions data;
  std::string head, file, zero_shot, tmpl = "{text}\nTopic:";
  std::vector<std::string> texts;
  float threshold = -1.0f;
  int top = 3, max_tokens = 512;
  bool json = false, route = false;
};

nlohmann::json prediction_json(const heads::Prediction& p, const std::vector<std::string>& labels, int top) {
  std::vector<int> order(p.probs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p.probs[a] > p.probs[b]; });
  nlohmann::json alts = nlohmann::json::array();
  for (int k = 0; k < std::min<int>(top, static_cast<int>(order.size())); ++k)
    alts.push_back({{"label", labels[order[k]]}, {"probability", p.probs[order[k]]}});
  nlohmann::json j = {{"label", p.label}, {"probability", p.probability}, {"top", alts}, {"tokens", p.tokens}};
  if (p.out_of_scope) j["out_of_scope"] = true;
  return j;
}

int run_classify(ClassifyArgs& a) {
  if (!a.head.empty() && !a.zero_shot.empty()) fail("give --head HEAD or --zero-shot LABELS, not both");
  if (a.texts.empty() == a.file.empty()) fail("give the text to classify, or -f FILE (one of them)");
  std::string model_path;
  LoadedModel m = a.model.load(&model_path);
  if (a.head.empty() && a.zero_shot.empty()) {  // the heads stored in the model file
    if (m.file->format != "pocket" && m.file->format != "gguf")
      fail("give --head HEAD or --zero-shot LABEL,LABEL,... (", model_path, " carries no heads)");
    a.head = model_path;
  }
  const int threads = a.model.resolve_threads();
  heads::Head head;
  std::vector<std::string> labels;
  if (!a.head.empty()) {
    head = load_checked_head(a.head, m, threads);
    labels = head.labels;
  } else {
    labels = split_commas(a.zero_shot);
  }
  heads::Scorer scorer(m.model, m.tokenizer, threads, a.max_tokens);
  auto decide = [&](const std::string& text) {
    if (!a.head.empty()) return a.route ? scorer.route(head, text, a.threshold) : scorer.classify(head, text);
    return scorer.zero_shot(text, labels, a.tmpl);
  };
  std::vector<heads::Example> rows;
  bool labelled = false;
  if (!a.file.empty()) {
    heads::DataOptions d = a.data;
    d.require_label = false;
    rows = heads::load_examples(a.file, d);
    labelled = !rows.empty() && std::all_of(rows.begin(), rows.end(), [](const heads::Example& e) { return !e.label.empty(); });
  } else {
    for (const std::string& t : a.texts) rows.push_back({t, "", ""});
  }
  // Over a labelled file: accuracy, macro-F1, confusions.
  heads::Matrix probs;
  probs.cols = static_cast<int>(labels.size());
  std::vector<std::string> predicted;
  int64_t routed_out = 0;
  for (const heads::Example& e : rows) {
    const heads::Prediction p = decide(e.text);
    if (labelled) {
      probs.data.insert(probs.data.end(), p.probs.begin(), p.probs.end());
      ++probs.rows;
      predicted.push_back(p.label);
      routed_out += p.out_of_scope;
      continue;
    }
    if (a.json) {
      nlohmann::json j = prediction_json(p, labels, a.top);
      j["text"] = e.text;
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%s\t%.4f%s\t%s\n", p.label.c_str(), p.probability, p.out_of_scope ? " (out of scope)" : "",
                  e.text.c_str());
    }
    std::fflush(stdout);
  }
  if (!labelled) return 0;
  const std::vector<int> y = heads::label_indices(rows, labels);
  const heads::Metrics mt = heads::evaluate(probs, y, static_cast<int>(labels.size()));
  // With routing, accuracy counts the routed answer (other_label for rejected rows).
  int64_t routed_right = 0;
  for (size_t i = 0; i < rows.size(); ++i) routed_right += predicted[i] == rows[i].label;
  std::map<std::pair<std::string, std::string>, int64_t> confusions;
  for (size_t i = 0; i < rows.size(); ++i)
    if (predicted[i] != rows[i].label) ++confusions[{rows[i].label, predicted[i]}];
  std::vector<std::pair<int64_t, std::pair<std::string, std::string>>> worst;
  for (const auto& [k, v] : confusions) worst.push_back({v, k});
  std::stable_sort(worst.begin(), worst.end(), [](const auto& x, const auto& z) { return x.first > z.first; });
  if (worst.size() > 10) worst.resize(10);
  const double n = static_cast<double>(rows.size());
  if (a.json) {
    nlohmann::json j = {{"examples", rows.size()}, {"accuracy", mt.accuracy},   {"macro_f1", mt.macro_f1},
                        {"ece", mt.ece},            {"unknown_labels", std::count(y.begin(), y.end(), -1)}};
    if (a.route) j["routed_accuracy"] = routed_right / n, j["routed_out"] = routed_out;
    for (const auto& [c, k] : worst) j["confusions"].push_back({{"truth", k.first}, {"predicted", k.second}, {"count", c}});
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%zu examples: accuracy %.4f, macro-F1 %.4f, ECE %.4f\n", rows.size(), mt.accuracy, mt.macro_f1, mt.ece);
  const auto unknown = std::count(y.begin(), y.end(), -1);
  if (unknown) std::printf("%lld examples have labels the head does not know (counted as wrong)\n", static_cast<long long>(unknown));
  if (a.route)
    std::printf("routed: accuracy %.4f with '%s' as an answer, %lld routed out of scope\n", routed_right / n,
                head.other_label.c_str(), static_cast<long long>(routed_out));
  if (!worst.empty()) std::printf("most frequent confusions (truth -> predicted):\n");
  for (const auto& [c, k] : worst) std::printf("  %6lld  %s -> %s\n", static_cast<long long>(c), k.first.c_str(), k.second.c_str());
  return 0;
}

CLI::App* add_common(CLI::App& app, const char* name, const char* help, std::shared_ptr<ClassifyArgs> a) {
  CLI::App* sub = app.add_subcommand(name, help);
  a->model.add_to(*sub);
  sub->add_option("text", a->texts, "Text(s) to classify");
  sub->add_option("-f,--file", a->file, "Inputs from a JSONL/CSV/TSV file; with labels, prints accuracy, macro-F1 and confusions");
  add_data_options(*sub, a->data);
  sub->add_option("--head", a->head, "Head file, or Pocket file[#name] carrying heads (default: the model's own head)");
  sub->add_option("--max-tokens", a->max_tokens, "Tokens kept per input (default 512)")->check(CLI::Range(2, 1 << 20));
  sub->add_option("--top", a->top, "Alternatives listed with --json (default 3)")->check(CLI::Range(1, 1 << 16));
  sub->add_flag("--json", a->json, "JSON lines (one per input) or a JSON summary over a labelled file");
  return sub;
}

}  // namespace

void add_classify(CLI::App& app, int& rc) {
  auto a = std::make_shared<ClassifyArgs>();
  CLI::App* sub = add_common(app, "classify", "Classify text with a trained head, or zero-shot by label log-likelihood", a);
  sub->add_option("--zero-shot", a->zero_shot, "Zero-shot: comma-separated labels, each scored by the mean log-probability of ' LABEL' after the prompt");
  sub->add_option("--template", a->tmpl, "Zero-shot prompt template with {text} (default \"{text}\\nTopic:\")");
  sub->callback([a, &rc] { rc = run_classify(*a); });
  auto r = std::make_shared<ClassifyArgs>();
  r->route = true;
  CLI::App* route = add_common(app, "route", "Route text: classify with the head's out-of-scope threshold ('not mine' below it)", r);
  route->add_option("--threshold", r->threshold, "Override the head's threshold (top probability below it = out of scope)")
      ->check(CLI::Range(0.0, 1.0));
  route->callback([r, &rc] { rc = run_classify(*r); });
}

}  // namespace pocket::cli
