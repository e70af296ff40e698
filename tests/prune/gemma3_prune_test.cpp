// Issue 17 on the real model: Gemma 3 270M's 262,144-token SentencePiece
// vocabulary (byte fallback, 6,249 control and 165 user-defined pieces)
// pruned to 64,000 tokens counted on part of the training split, the same
// steps as `pocket prune-vocab` (src/prune/prune.cpp), checked for
// (1) round trips, (2) identical kept-only encodings on held-out text,
// (3) logits of kept tokens bit for bit (the Q8_0 embedding rows copied) and
// (4) the Gemma chat format and special ids. Skipped without the model.
#include <gtest/gtest.h>

#include <cstring>

#include "common/test_util.h"
#include "formats/gguf.h"
#include "formats/model_file.h"
#include "generate/chat.h"
#include "model/model.h"
#include "prune/corpus_stats.h"
#include "prune/prune.h"
#include "prune/prune_fixture.h"
#include "prune/prune_model.h"
#include "prune/vocab_prune.h"
#include "tokenizer/tokenizer.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace pocket {
namespace {

using test::mapped;

// The first `n` documents of a corpus file.
prune::Corpus head(const std::string& name, size_t n) {
  const auto all = prune::Corpus::read(test::corpus_file(name));
  std::string text;
  for (size_t i = 0; i < std::min(n, all.docs().size()); ++i) text.append(all.docs()[i]).push_back('\n');
  return prune::Corpus::from_text(std::move(text), name);
}

TEST(PruneGemma3, PrunedTo64kKeepsEveryGuarantee) {
  POCKET_NEED_GEMMA3(path);
  test::TempDir dir;
  const ModelFile f = open_model(path);
  const Vocab& v = f.vocab;
  ASSERT_EQ(v.kind, TokenizerKind::SentencePieceBPE);
  ASSERT_EQ(v.tokens.size(), 262144u);
  const auto before = Tokenizer::create(v);

  // Count on part of the training split (the command counts all of it).
  std::vector<prune::Corpus> corpus;
  corpus.push_back(head("train_zh", 8000));
  corpus.push_back(head("train_en", 4000));
  const auto counts = prune::count_tokens(*before, corpus, 2);
  prune::SelectOptions so;
  so.keep = 64000;
  for (int32_t id : prune::chat_template_tokens(*before, f.chat_template)) so.must_keep.push_back(id);
  for (int32_t id : prune::model_token_ids(path, v.tokens.size())) so.must_keep.push_back(id);
  const auto parents = prune::bpe_parents(v);
  const auto sel = prune::select_tokens(v, parents, counts, so);
  const auto p = prune::apply_selection(v, sel.kept);
  const auto after = Tokenizer::create(p.vocab);
  ASSERT_EQ(after->vocab_size(), 64000);

  // Every control, user-defined and byte piece is kept; ancestry is closed.
  int64_t control = 0, user = 0, bytes = 0;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    control += v.types[i] == TokenType::Control;
    user += v.types[i] == TokenType::UserDefined;
    bytes += v.types[i] == TokenType::Byte;
    if (v.types[i] != TokenType::Normal && v.types[i] != TokenType::Unused) {
      ASSERT_GE(p.old_to_new[i], 0) << v.tokens[i];
      ASSERT_EQ(after->token_id(v.tokens[i]), p.old_to_new[i]) << v.tokens[i];
    }
  }
  EXPECT_EQ(bytes, 256);
  EXPECT_GT(control + user, 6000);
  int64_t with_parents = 0;
  for (int32_t old : p.new_to_old)
    for (int32_t parent : parents[static_cast<size_t>(old)])
      if (parent >= 0) {
        ++with_parents;
        ASSERT_GE(p.old_to_new[static_cast<size_t>(parent)], 0) << v.tokens[old];
      }
  EXPECT_GT(with_parents, 40000);

  // (1) and (2) on held-out text.
  for (const char* name : {"heldout_zh", "heldout_en"}) {
    const auto s = prune::compare_tokenizers(*before, *after, p.old_to_new, head(name, 2500), 2);
    EXPECT_GT(s.docs_all_kept, s.docs / 10) << name;
    EXPECT_EQ(s.docs_all_kept_identical, s.docs_all_kept) << name;
    EXPECT_EQ(s.docs_round_trip, s.docs) << name;
  }

  // (4) Special ids, and the Gemma chat format (turn markers, "user\n",
  // "model\n") encodes to the same sequence, mapped.
  for (auto [a, b] : {std::pair{v.bos_id, p.vocab.bos_id}, {v.eos_id, p.vocab.eos_id}, {v.pad_id, p.vocab.pad_id},
                      {v.unk_id, p.vocab.unk_id}}) {
    ASSERT_GE(a, 0);
    EXPECT_EQ(p.old_to_new[a], b);
  }
  EXPECT_EQ(mapped(v.eos_ids, p.old_to_new), p.vocab.eos_ids);
  const ChatTemplate tmpl(detect_chat_format(f.chat_template, *before));
  ASSERT_EQ(tmpl.format(), ChatFormat::Gemma);
  EXPECT_EQ(detect_chat_format(f.chat_template, *after), ChatFormat::Gemma);
  const std::vector<ChatMessage> convo = {
      {"system", "You are helpful."}, {"user", "Hello"}, {"assistant", "Hi! How can I help?"}, {"user", "你好"}};
  const auto pieces = tmpl.render(convo, ChatOptions{});
  const auto ids_before = encode_pieces(*before, pieces);
  for (int32_t id : ids_before) ASSERT_GE(p.old_to_new[static_cast<size_t>(id)], 0) << pieces_text(pieces);
  EXPECT_EQ(encode_pieces(*after, pieces), mapped(ids_before, p.old_to_new));
  for (const char* s : {"<start_of_turn>", "<end_of_turn>"})
    EXPECT_EQ(after->encode(s, {.allow_special = true}), mapped(before->encode(s, {.allow_special = true}), p.old_to_new));

  // (3) The pruned GGUF: token_embd holds the kept Q8_0 rows as they were,
  // every other tensor is byte-identical, and the logits of kept tokens are
  // the original's bit for bit.
  const std::string out = dir.file("gemma-64k.gguf");
  prune::write_pruned_gguf(path, out, p);
  auto fa = std::make_shared<const ModelFile>(open_model(path));
  auto fb = std::make_shared<const ModelFile>(open_model(out));
  EXPECT_EQ(fb->config.vocab_size, 64000);
  EXPECT_EQ(fb->vocab.tokens, p.vocab.tokens);
  EXPECT_EQ(fb->vocab.scores, p.vocab.scores);
  EXPECT_EQ(fb->vocab.types, p.vocab.types);
  ASSERT_EQ(fa->tensors.size(), fb->tensors.size());
  for (const auto& [name, ta] : fa->tensors) {
    const TensorView* tb = fb->find(name);
    ASSERT_NE(tb, nullptr) << name;
    EXPECT_EQ(tb->type, ta.type) << name;
    if (name != "token_embd.weight") {
      ASSERT_EQ(tb->nbytes, ta.nbytes) << name;
      EXPECT_EQ(std::memcmp(tb->data, ta.data, ta.nbytes), 0) << name;
      continue;
    }
    EXPECT_EQ(ta.type, DType::Q8_0);
    const size_t row = ta.nbytes / static_cast<size_t>(ta.rows());
    ASSERT_EQ(tb->nbytes, row * 64000);
    size_t differ = 0;
    for (size_t k = 0; k < 64000; ++k)
      differ += std::memcmp(static_cast<const uint8_t*>(tb->data) + k * row,
                            static_cast<const uint8_t*>(ta.data) + static_cast<size_t>(p.new_to_old[k]) * row, row) != 0;
    EXPECT_EQ(differ, 0u);
  }
  std::vector<int32_t> old_ids = {v.bos_id};
  for (int32_t id : before->encode("从前有一只小猫。Once upon a time")) old_ids.push_back(id);
  for (int32_t id : old_ids) ASSERT_GE(p.old_to_new[static_cast<size_t>(id)], 0);
  const auto new_ids = mapped(old_ids, p.old_to_new);
  auto logits = [&](const std::shared_ptr<const ModelFile>& m, const std::vector<int32_t>& ids) {
    Model model(m);
    ThreadPool pool(2);
    Context ctx(model.config(), 64);
    std::vector<float> all(ids.size() * static_cast<size_t>(model.config().vocab_size));
    model.forward(ids, ctx, pool, all.data(), /*all_logits=*/true);
    return all;
  };
  const auto la = logits(fa, old_ids), lb = logits(fb, new_ids);
  size_t differ = 0;
  for (size_t pos = 0; pos < old_ids.size(); ++pos)
    for (size_t k = 0; k < 64000; ++k)
      differ += std::memcmp(&la[pos * 262144 + static_cast<size_t>(p.new_to_old[k])], &lb[pos * 64000 + k], 4) != 0;
  EXPECT_EQ(differ, 0u) << "of " << old_ids.size() * 64000 << " logits";
}

}  // namespace
}  // namespace pocket
