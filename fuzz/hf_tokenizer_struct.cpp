// fuzz_hf_tokenizer_struct: the fuzz_hf_tokenizer target (tokenizer.json +
// tokenizer_config.json loaded as `pocket tokenize -m tokenizer.json` does,
// then encode/decode) with a JSON-aware mutator. Byte flips stop in the JSON
// parser almost always; this mutator parses either part and changes the
// meaning while keeping the JSON valid: vocabulary ids made hostile, repeated
// or missing, merges naming unknown or repeated pieces, added tokens whose ids
// collide with the vocabulary, model / normalizer / pre-tokenizer / decoder
// types swapped for other known ones, byte_fallback and the config's special
// tokens and template changed (json_mutator.h does the generic node changes).
// Half the mutations are plain byte mutations, so the JSON parser stays
// fuzzed too.
#include <random>

#include "hf_tokenizer.cpp"  // the target itself; this file adds only the mutator
#include "json_mutator.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using pocket::fuzz::Json;

const std::vector<std::string> kPool = {
    "BPE", "WordPiece", "Unigram", "WordLevel", "ByteLevel", "Metaspace", "Split", "Sequence", "NFC", "NFKC",
    "Replace", "Prepend", "ByteFallback", "Fuse", "Strip", "Digits", "Punctuation", "Whitespace",
    "<s>", "</s>", "<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "\xe2\x96\x81", "\xc4\xa0", "<0xFF>",
    "(?i:'s|'t)|\\p{L}+|\\p{N}", "[", "\\", "{{ messages[0]['content'] }}", "{% for m in messages %}"};

// The vocabulary object, when the document has one where tokenizer.json puts it.
Json* vocab_of(Json& j) {
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) return nullptr;
  Json& m = j["model"];
  return m.contains("vocab") ? &m["vocab"] : nullptr;
}

void mutate_tokenizer(Json& j, std::mt19937_64& rng) {
  using pocket::fuzz::hostile_int;
  Json* vocab = vocab_of(j);
  switch (rng() % 5) {
    case 0:  // a vocabulary id made hostile or equal to another's
      if (vocab && vocab->is_object() && !vocab->empty()) {
        auto it = vocab->begin();
        std::advance(it, static_cast<long>(rng() % vocab->size()));
        it.value() = rng() % 2 ? Json(hostile_int(rng, it.value().is_number_integer() ? it.value().get<int64_t>() : 0))
                               : Json(rng() % vocab->size());
        return;
      }
      break;
    case 1:  // a merge naming an unknown piece, or a merge repeated
      if (j.contains("model") && j["model"].is_object() && j["model"].contains("merges") &&
          j["model"]["merges"].is_array() && !j["model"]["merges"].empty()) {
        Json& merges = j["model"]["merges"];
        const Json m = merges[rng() % merges.size()];
        if (rng() % 2) merges.push_back(m);
        else merges[rng() % merges.size()] = m.is_string() ? Json(m.get<std::string>() + "\xc4\xa0") : Json::array({"x", "y"});
        return;
      }
      break;
    case 2:  // an added token whose id collides, overflows or is negative
      if (j.contains("added_tokens") && j["added_tokens"].is_array() && !j["added_tokens"].empty()) {
        Json& t = j["added_tokens"][rng() % j["added_tokens"].size()];
        if (t.is_object()) {
          t["id"] = hostile_int(rng, t.contains("id") && t["id"].is_number_integer() ? t["id"].get<int64_t>() : 0);
          if (rng() % 2) t["special"] = static_cast<bool>(rng() % 2);
          return;
        }
      }
      break;
    case 3:  // a component's type swapped
      for (const char* key : {"model", "normalizer", "pre_tokenizer", "decoder"}) {
        if (rng() % 2 && j.contains(key) && j[key].is_object()) {
          j[key]["type"] = kPool[rng() % 18];
          return;
        }
      }
      break;
    default:  // byte_fallback / unk_token / ignore_merges toggled
      if (j.contains("model") && j["model"].is_object()) {
        static const char* kFlags[] = {"byte_fallback", "ignore_merges", "fuse_unk"};
        if (rng() % 2) j["model"][kFlags[rng() % 3]] = static_cast<bool>(rng() % 2);
        else j["model"]["unk_token"] = kPool[18 + rng() % 9];
        return;
      }
      break;
  }
  pocket::fuzz::mutate_json(j, rng, kPool);
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  using namespace pocket::fuzz;
  std::mt19937_64 rng(seed);
  // Half the mutations are libFuzzer's own: a parse and a dump of a 50 KB
  // document cost several executions, so fewer structural ones reach more.
  if (rng() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
  const std::vector<std::string_view> parts = split_parts(data, size, 2);
  const size_t which = parts[1].empty() || rng() % 4 ? 0 : 1;  // tokenizer.json mostly, the config sometimes
  std::optional<Json> j = parse_json(parts[which]);
  if (!j) return LLVMFuzzerMutate(data, size, max_size);
  if (which == 0) mutate_tokenizer(*j, rng);
  else mutate_json(*j, rng, kPool);
  std::vector<std::string> out_parts{std::string(parts[0]), std::string(parts[1])};
  out_parts[which] = dump_json(*j);
  if (out_parts[1].empty()) out_parts.pop_back();
  const std::string out = join_parts(out_parts);
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
