// pocket train-head: trains a decision head on a frozen model's features.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "heads/head_file.h"
#include "heads/train_head.h"
#include "heads_cli.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace pocket::cli {

namespace {

struct TrainHeadArgs {
  ModelOptions model;
  heads::DataOptions data;
  std::string train, val, test, out, train_where, val_where, test_where, pooling = "mean", features = "hidden";
  std::string cache_dir, name = "default";
  heads::TrainHeadOptions opt;
  int64_t max_train = 0, max_val = 0, max_test = 0;
  bool no_cache = false, json = false, quiet = false, no_class_weights = false;
};

nlohmann::json split_json(const heads::SplitMetrics& s) {
  nlohmann::json j = {{"split", s.split},          {"examples", s.m.n},    {"accuracy", s.m.accuracy},
                      {"macro_f1", s.m.macro_f1},  {"ece", s.m.ece},       {"nll", s.m.nll}};
  if (s.has_oos) {
    j["oos_examples"] = s.oos_examples;
    j["routed_in_scope_accuracy"] = s.in_scope_accuracy;
    j["oos_recall"] = s.oos_recall;
  }
  return j;
}

std::vector<heads::Example> load(const std::string& path, heads::DataOptions d, const std::string& where, int64_t max,
                                 uint64_t seed) {
  d.where = where;
  return heads::subsample(heads::load_examples(path, d), max, seed);
}

int run_train_head(TrainHeadArgs& a) {
  heads::TrainHeadOptions& o = a.opt;
  o.name = a.name;
  o.spec.pooling = heads::parse_pooling(a.pooling);
  o.spec.kind = a.features == "tokens" ? heads::FeatureSpec::Kind::Tokens : heads::FeatureSpec::Kind::Hidden;
  o.train.class_weights = !a.no_class_weights;
  LoadedModel m = a.model.load();
  const int threads = a.model.resolve_threads();
  if (o.spec.kind == heads::FeatureSpec::Kind::Tokens && o.spec.buckets <= 0)
    o.spec.buckets = std::min<int>(m.tokenizer->vocab_size(), 2048);
  const uint64_t seed = o.train.seed;
  std::vector<heads::Example> train = load(a.train, a.data, a.train_where, a.max_train, seed);
  std::vector<heads::Example> val, test;
  if (!a.val.empty() || !a.val_where.empty()) {
    val = load(a.val.empty() ? a.train : a.val, a.data, a.val_where, a.max_val, seed + 1);
  } else {  // hold out a tenth of the training set
    const size_t n_val = std::max<size_t>(1, train.size() / 10);
    if (train.size() < 20) fail(a.train, ": ", train.size(), " examples; give --val or at least 20 examples");
    val.assign(train.end() - static_cast<std::ptrdiff_t>(n_val), train.end());
    train.resize(train.size() - n_val);
  }
  if (!a.test.empty() || !a.test_where.empty())
    test = load(a.test.empty() ? a.train : a.test, a.data, a.test_where, a.max_test, seed + 2);
  if (!a.quiet)
    std::fprintf(stderr, "train-head: %zu train, %zu val, %zu test examples\n", train.size(), val.size(), test.size());

  o.extract.threads = threads;
  o.extract.progress = !a.quiet;
  const std::string hash = content_hash(m, threads);
  o.extract.model_hash = hash;
  if (!a.no_cache) o.extract.cache_dir = a.cache_dir.empty() ? default_feature_cache() : a.cache_dir;
  ThreadPool pool(threads);
  heads::TrainHeadResult r = heads::train_head(m.model, *m.tokenizer, hash, train, val, test, o, &pool);
  heads::save_head(r.head, a.out);

  nlohmann::json j = {{"head", a.out},
                      {"name", r.head.name},
                      {"base_hash", hash},
                      {"features", a.features},
                      {"pooling", a.pooling},
                      {"layer", o.spec.layer},
                      {"classes", r.head.classes()},
                      {"feature_dim", r.head.feature_dim()},
                      {"hidden", r.head.net.hidden},
                      {"parameters", r.head.net.parameter_count()},
                      {"head_bytes", heads::head_file_bytes(r.head)},
                      {"epochs", r.train.epochs},
                      {"best_epoch", r.train.best_epoch},
                      {"temperature", r.head.temperature},
                      {"threshold", r.head.threshold},
                      {"feature_seconds", r.feature_seconds},
                      {"train_seconds", r.train_seconds},
                      {"threads", threads}};
  for (const auto& s : r.splits) j["splits"].push_back(split_json(s));
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("head '%s': %d classes, %d features -> %s, %zu parameters, T = %.3f%s\n", r.head.name.c_str(),
              r.head.classes(), r.head.feature_dim(),
              r.head.net.hidden ? ("MLP " + std::to_string(r.head.net.hidden)).c_str() : "linear",
              r.head.net.parameter_count(), r.head.temperature,
              o.oos_label.empty() ? "" : (", threshold " + std::to_string(r.head.threshold)).c_str());
  for (const auto& s : r.splits) {
    std::printf("  %-5s n=%-6lld accuracy %.4f  macro-F1 %.4f  ECE %.4f", s.split.c_str(), static_cast<long long>(s.m.n),
                s.m.accuracy, s.m.macro_f1, s.m.ece);
    if (s.has_oos)
      std::printf("  | routed: in-scope accuracy %.4f, oos recall %.4f (%lld oos)", s.in_scope_accuracy, s.oos_recall,
                  static_cast<long long>(s.oos_examples));
    std::printf("\n");
  }
  std::printf("features %.1f s, training %.2f s (%d epochs, best %d); wrote %s\n", r.feature_seconds, r.train_seconds,
              r.train.epochs, r.train.best_epoch, a.out.c_str());
  return 0;
}

}  // namespace

void add_train_head(CLI::App& app, int& rc) {
  auto a = std::make_shared<TrainHeadArgs>();
  CLI::App* sub = app.add_subcommand("train-head", "Train a decision head (classifier / router / ranker) on a frozen model");
  a->model.add_to(*sub);
  sub->add_option("--data", a->train, "Training data (JSONL, CSV or TSV)")->required();
  sub->add_option("--val", a->val, "Validation data (default: a tenth of --data held out)");
  sub->add_option("--test", a->test, "Test data, only reported");
  sub->add_option("-o,--output", a->out, "Head file to write")->required();
  add_data_options(*sub, a->data);
  sub->add_option("--where", a->train_where, "Keep training rows whose COL=VALUE (e.g. split=train)");
  sub->add_option("--val-where", a->val_where, "Validation rows COL=VALUE (from --val, else from --data)");
  sub->add_option("--test-where", a->test_where, "Test rows COL=VALUE (from --test, else from --data)");
  sub->add_option("--max-train", a->max_train, "Use a seeded sample of at most N training examples")->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  sub->add_option("--max-val", a->max_val, "At most N validation examples")->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  sub->add_option("--max-test", a->max_test, "At most N test examples")->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  sub->add_option("--name", a->name, "Head name (default 'default')");
  sub->add_option("--features", a->features, "hidden (the model's states; default) or tokens (bag-of-tokens baseline)")
      ->check(CLI::IsMember({"hidden", "tokens"}));
  sub->add_option("--buckets", a->opt.spec.buckets, "Bag-of-tokens buckets (default min(vocab, 2048))")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--pooling", a->pooling, "mean (default) or last")->check(CLI::IsMember({"mean", "last"}));
  sub->add_option("--layer", a->opt.spec.layer, "Read the residual stream after this layer (default: final normed states)")
      ->check(CLI::Range(0, 4095));
  sub->add_option("--template", a->opt.spec.prompt_template, "Prompt template with {text} (stored in the head)");
  sub->add_option("--max-tokens", a->opt.extract.max_tokens, "Tokens kept per input (default 256)")->check(CLI::Range(2, 1 << 16));
  sub->add_option("--hidden", a->opt.train.hidden, "Hidden units of a 1-hidden-layer MLP (default 0: logistic regression)")
      ->check(CLI::Range(0, 1 << 16));
  sub->add_option("--l2", a->opt.train.l2, "L2 penalty on the weights (default 1e-4)")->check(CLI::Range(0.0, 100.0));
  sub->add_option("--lr", a->opt.train.learning_rate, "Adam learning rate (default 3e-3)")->check(CLI::Range(1e-7, 10.0));
  sub->add_option("--epochs", a->opt.train.max_epochs, "Maximum epochs (default 60)")->check(CLI::Range(1, 100000));
  sub->add_option("--patience", a->opt.train.patience, "Early stopping: epochs without a better val loss (default 6)")->check(CLI::Range(1, 100000));
  sub->add_option("--batch", a->opt.train.batch_size, "Minibatch size (default 64)")->check(CLI::Range(1, 1 << 20));
  add_seed_option(*sub, a->opt.train.seed, "Seed for initialisation, shuffling and sampling (default 1)");
  sub->add_flag("--no-class-weights", a->no_class_weights, "Do not weight classes by inverse frequency");
  sub->add_option("--oos-label", a->opt.oos_label, "Label of out-of-scope examples (e.g. oos): tunes the route threshold on --val");
  sub->add_option("--threshold", a->opt.threshold, "Route threshold to store (default: tuned with --oos-label, else 0)")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--cache-dir", a->cache_dir, "Feature cache folder (default ~/.cache/pocket/features)");
  sub->add_flag("--no-cache", a->no_cache, "Do not read or write the feature cache");
  sub->add_flag("--json", a->json, "Print the report as JSON");
  sub->add_flag("-q,--quiet", a->quiet, "No progress on stderr");
  sub->footer(
      "Features are the frozen model's hidden states (one prefill per input, no decoding), pooled; they are\n"
      "cached on disk by model content hash + data hash. The head file names the model's content hash: using it\n"
      "with another model is an error. Results are deterministic for a seed, whatever the thread count.");
  sub->callback([a, &rc] { rc = run_train_head(*a); });
}

}  // namespace pocket::cli
