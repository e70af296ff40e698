// The public C++ (pocket::Decider) and C (pocket_session_classify/rank)
// entry points give what the internal scorer gives, and fail cleanly.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "formats/content_hash.h"
#include "heads/head_file.h"
#include "heads/scorer.h"
#include "heads/train_head.h"
#include "pocket/pocket.h"
#include "pocket/pocket_c.h"
#include "runtime/loader.h"
#include "util/thread_pool.h"

namespace pocket {
namespace {

// A small head trained on stories260K features, saved to `path`.
heads::Head trained_head(const LoadedModel& m, const std::string& path) {
  std::vector<heads::Example> train_set, val_set;
  const char* a[] = {"The cat", "A dog", "The bird", "A frog"};
  const char* f[] = {"The cake", "An apple", "The soup", "A pie"};
  const char* t[] = {" was big.", " was red.", " was happy.", " was nice.", " was old."};
  for (int k = 0; k < 5; ++k)
    for (int i = 0; i < 4; ++i) {
      (k < 4 ? train_set : val_set).push_back({std::string(a[i]) + t[k], "animal", ""});
      (k < 4 ? train_set : val_set).push_back({std::string(f[i]) + t[k], "food", ""});
    }
  heads::TrainHeadOptions o;
  o.name = "topic";
  o.train.max_epochs = 10;
  ThreadPool pool(1);
  heads::TrainHeadResult r = heads::train_head(m.model, *m.tokenizer, model_content_hash(*m.file, m.tokenizer->vocab()),
                                               train_set, val_set, {}, o, &pool);
  heads::save_head(r.head, path);
  return r.head;
}

TEST(HeadsApi, DeciderAndCApiAgreeWithTheScorer) {
  test::TempDir dir;
  LoadedModel lm = load_model(test::stories_model());
  const heads::Head head = trained_head(lm, dir.file("topic.head"));
  heads::Scorer scorer(lm.model, lm.tokenizer, 1, 256);
  const std::string text = "The frog was little.";
  const heads::Prediction want = scorer.classify(head, text);
  const std::vector<std::string> cands = {"there was a girl", "purple quantum", "time"};
  const std::vector<heads::Ranked> want_rank = scorer.rank_loglik("Once upon a", cands);

  auto model = SharedModel::open(test::stories_model());
  DeciderOptions dopt;
  dopt.threads = 2;
  dopt.max_tokens = 256;
  auto d = Decider::create(model, dopt);
  EXPECT_EQ(d->add_head(dir.file("topic.head")), "topic");
  EXPECT_EQ(d->heads(), std::vector<std::string>{"topic"});
  Classification c = d->classify("topic", text);
  EXPECT_EQ(c.label, want.label);
  EXPECT_FLOAT_EQ(c.probability, want.probability);
  ASSERT_EQ(c.scores.size(), 2u);
  EXPECT_GE(c.scores[0].second, c.scores[1].second);
  auto r = d->rank("Once upon a", cands);
  ASSERT_EQ(r.size(), want_rank.size());
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].index, want_rank[i].index);
    EXPECT_NEAR(r[i].score, want_rank[i].score, 1e-9);
  }
  EXPECT_THROW(d->classify("nope", text), Error);
  EXPECT_EQ(d->route("topic", text, 1.1f).out_of_scope, true);  // no probability reaches 1.1

  // A head for another model is refused.
  heads::Head other = head;
  other.base_hash = "0000000000000000";
  heads::save_head(other, dir.file("other.head"));
  EXPECT_THROW(d->add_head(dir.file("other.head")), Error);

  // The C API.
  pocket_model* cm = nullptr;
  pocket_session* s = nullptr;
  ASSERT_EQ(pocket_model_open(test::stories_model().c_str(), nullptr, &cm), POCKET_OK) << pocket_last_error();
  pocket_session_options so;
  pocket_session_options_init(&so);
  so.threads = 1;
  so.context = 256;
  ASSERT_EQ(pocket_session_open(cm, &so, &s), POCKET_OK) << pocket_last_error();
  EXPECT_EQ(pocket_session_add_head(s, dir.file("topic.head").c_str()), POCKET_OK) << pocket_last_error();
  EXPECT_NE(pocket_session_add_head(s, dir.file("other.head").c_str()), POCKET_OK);
  EXPECT_NE(std::string(pocket_last_error()).find("content hash"), std::string::npos) << pocket_last_error();
  pocket_classification res{};
  res.struct_size = sizeof(res);
  char label[32];
  size_t len = 0;
  ASSERT_EQ(pocket_session_classify(s, "topic", text.c_str(), 0, &res, label, sizeof label, &len), POCKET_OK)
      << pocket_last_error();
  EXPECT_EQ(std::string(label), want.label);
  EXPECT_EQ(len, want.label.size());
  EXPECT_EQ(res.label_index, want.index);
  EXPECT_FLOAT_EQ(res.probability, want.probability);
  EXPECT_EQ(pocket_session_classify(s, "topic", text.c_str(), 0, &res, label, 2, &len), POCKET_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, want.label.size());
  EXPECT_NE(pocket_session_classify(s, "nope", text.c_str(), 0, &res, label, sizeof label, &len), POCKET_OK);
  EXPECT_EQ(pocket_session_classify(s, nullptr, text.c_str(), 0, &res, label, sizeof label, &len), POCKET_ERR_INVALID_ARGUMENT);
  const char* cc[] = {cands[0].c_str(), cands[1].c_str(), cands[2].c_str()};
  int32_t order[3];
  double scores[3];
  ASSERT_EQ(pocket_session_rank(s, nullptr, "Once upon a", cc, 3, order, scores), POCKET_OK) << pocket_last_error();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(order[i], want_rank[static_cast<size_t>(i)].index);
    EXPECT_NEAR(scores[i], want_rank[static_cast<size_t>(i)].score, 1e-9);
  }
  EXPECT_EQ(pocket_session_rank(s, nullptr, "q", cc, 0, order, scores), POCKET_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pocket_session_rank(nullptr, nullptr, "q", cc, 3, order, scores), POCKET_ERR_INVALID_HANDLE);
  EXPECT_EQ(pocket_session_close(s), POCKET_OK);
  EXPECT_EQ(pocket_model_close(cm), POCKET_OK);
}

}  // namespace
}  // namespace pocket
