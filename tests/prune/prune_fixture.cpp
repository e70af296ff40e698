#include "prune/prune_fixture.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/test_util.h"
#include "prune/prune.h"
#include "tokenizer/hf_json.h"
#include "util/mapped_file.h"

namespace pocket::test {

std::string corpus_dir() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    const fs::path root = fs::path(test_data_dir()).parent_path().parent_path();
    const fs::path built = root / "build" / "corpus";
    if (fs::exists(built / "heldout_zh.txt") && fs::exists(built / "train_en.txt")) return built.string();
    static TempDir tmp;
    const std::string cmd = "python3 " + (root / "tools/corpus/make_corpus.py").string() + " --shared " +
                            shared_dir() + " --out " + tmp.path() + " > /dev/null";
    if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "failed: " << cmd;
    return tmp.path();
  }();
  return dir;
}

const PrunedQwen3& pruned_qwen3() {
  static const PrunedQwen3 p = [] {
    PrunedQwen3 r;
    r.before = qwen3_tokenizer();
    r.keep = 24000;
    std::vector<prune::Corpus> corpora;
    corpora.push_back(prune::Corpus::read(corpus_file("train_en")));
    // An eighth of the Chinese training text keeps the test quick.
    std::string zh = read_text_file(corpus_file("train_zh"));
    zh.resize(zh.find('\n', zh.size() / 8) + 1);
    corpora.push_back(prune::Corpus::from_text(std::move(zh), "train_zh (1/8)"));
    r.counts = prune::count_tokens(*r.before, corpora, 2);
    prune::SelectOptions so;
    so.keep = r.keep;
    std::string jinja;
    vocab_from_hf_json(qwen3_tokenizer_dir() + "/tokenizer.json", qwen3_tokenizer_dir() + "/tokenizer_config.json",
                       &jinja);
    so.must_keep = prune::chat_template_tokens(*r.before, jinja);
    const Vocab& v = r.before->vocab();
    r.selection = prune::select_tokens(v, prune::bpe_parents(v), r.counts, so);
    r.pruned = prune::apply_selection(v, r.selection.kept);
    r.after = Tokenizer::create(r.pruned.vocab);
    return r;
  }();
  return p;
}

}  // namespace pocket::test
