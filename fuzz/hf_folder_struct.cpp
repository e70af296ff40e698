// fuzz_hf_folder_struct: the fuzz_hf_folder target (a whole Hugging Face
// folder in six parts, opened as `pocket info DIR` does) with a mutator for
// its two JSON files. config.json and model.safetensors.index.json are JSON:
// byte flips mostly stop in the JSON parser or the part separators. This
// mutator parses config.json (two times in three) or the index, and changes
// their meaning with the JSON kept valid: a model size field (hidden size,
// layers, heads, KV heads, head_dim, vocabulary, context, sliding window)
// made hostile, zero, negative or a string, the architecture or model type
// swapped, tie_word_embeddings flipped, rope_scaling / rope_theta / eps made
// odd; in the index a weight_map entry sent to the other shard, a missing
// shard, a path outside the folder, or dropped, an unknown tensor added,
// total_size made hostile; or any node (json_mutator.h). The other parts are
// kept byte for byte. One mutation in four is libFuzzer's own.
#include <random>

#include "hf_folder.cpp"  // the target itself; this file adds only the mutator
#include "json_mutator.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using pocket::fuzz::Json;

const std::vector<std::string> kSizeKeys = {"hidden_size", "intermediate_size", "num_hidden_layers",
                                            "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
                                            "max_position_embeddings", "sliding_window", "max_window_layers"};
const std::vector<std::string> kPool = {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                                        "Gemma3ForCausalLM", "MistralForCausalLM", "llama", "qwen2", "qwen3",
                                        "gemma3_text", "bfloat16", "float16", "float32",
                                        "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                        "model-00003-of-00002.safetensors", "../config.json", "/etc/passwd",
                                        "model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"};

void mutate_config(Json& c, std::mt19937_64& rng) {
  using pocket::fuzz::hostile_int;
  switch (rng() % 6) {
    case 0:
    case 1: {
      const std::string& k = kSizeKeys[rng() % kSizeKeys.size()];
      const int64_t v = c.contains(k) && c[k].is_number_integer() ? c[k].get<int64_t>() : 64;
      switch (rng() % 4) {
        case 0: c[k] = Json(std::to_string(v)); break;    // a string where a number belongs
        case 1: c[k] = Json(static_cast<double>(v) + 0.5); break;
        default: c[k] = hostile_int(rng, v); break;
      }
      return;
    }
    case 2:
      if (rng() % 2) c["architectures"] = Json::array({kPool[rng() % 5]});
      else c["model_type"] = kPool[5 + rng() % 4];
      return;
    case 3:
      c["tie_word_embeddings"] = !(c.contains("tie_word_embeddings") && c["tie_word_embeddings"].is_boolean() &&
                                   c["tie_word_embeddings"].get<bool>());
      return;
    case 4: {
      static const double kOdd[] = {0.0, -1.0, 1e-300, 1e300, 5e-324};
      if (rng() % 2) c["rope_theta"] = kOdd[rng() % 5];
      else c["rms_norm_eps"] = kOdd[rng() % 5];
      return;
    }
    default:
      c["rope_scaling"] = rng() % 2 ? Json(nullptr)
                                    : Json{{"rope_type", rng() % 2 ? "linear" : "yarn"}, {"factor", hostile_int(rng, 4)}};
      return;
  }
}

void mutate_index(Json& j, std::mt19937_64& rng) {
  if (!j.contains("weight_map") || !j["weight_map"].is_object() || j["weight_map"].empty() || rng() % 5 == 0) {
    if (!j.contains("metadata") || !j["metadata"].is_object()) j["metadata"] = Json::object();
    j["metadata"]["total_size"] = pocket::fuzz::hostile_int(rng, 4096);
    return;
  }
  Json& map = j["weight_map"];
  auto it = map.begin();
  std::advance(it, static_cast<long>(rng() % map.size()));
  const std::string name = it.key();
  switch (rng() % 4) {
    case 0: map.erase(name); return;
    case 1: map[kPool[17 + rng() % 3] + (rng() % 2 ? ".x" : "")] = *it; return;  // an unknown or repeated tensor
    default: map[name] = kPool[12 + rng() % 5]; return;                          // another shard, missing, outside
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  using namespace pocket::fuzz;
  std::mt19937_64 rng(seed);
  if (rng() % 4 == 0) return LLVMFuzzerMutate(data, size, max_size);
  std::vector<std::string_view> parts = split_parts(data, size, 6);
  const size_t which = rng() % 3 == 2 && !parts[1].empty() ? 1 : 0;
  std::optional<Json> j = parse_json(parts[which]);
  if (!j || !j->is_object()) return LLVMFuzzerMutate(data, size, max_size);
  if (rng() % 4 == 0) mutate_json(*j, rng, kPool);
  else if (which == 0) mutate_config(*j, rng);
  else mutate_index(*j, rng);
  const std::string text = dump_json(*j);
  std::vector<std::string> out_parts(parts.begin(), parts.end());
  out_parts[which] = text;
  // Trailing empty parts need no separators (split_parts fills them in).
  while (out_parts.size() > 1 && out_parts.back().empty()) out_parts.pop_back();
  const std::string out = join_parts(out_parts);
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
