// Pocket's side of tools/constrain/peer_bench.py: compiles each JSON Schema of
// a folder for one tokenizer and replays given token walks through the
// matcher, timing the compile and each token mask, and (optionally) writing
// every mask so the script can compare it with xgrammar's and llguidance's.
//
//   bench_constrain_masks TOKENIZER.json SCHEMA_DIR WALKS.json OUT.json [MASK_DIR]
//
// WALKS.json: {"schema file name": [token ids], ...}; a name may end in
// "#run" (several walks of one schema, as `pocket bench --constraint-walks`
// writes them: each walk a fresh matcher). For each walk the
// masks of the start state and after each token are timed (steps =
// tokens + 1); a token the mask does not allow ends that walk there
// ("rejected_at" in OUT.json). MASK_DIR/<schema>.bits: the masks, one row
// of vocab_words() little-endian uint64 per step.
//
// POCKET_BENCH_COLD_FRAMES=1: a fresh vocabulary index (an empty frame cache,
// see constrain/frame_cache.h) for every schema, built outside the timing:
// each schema then pays its own frame walks, as the first schema compiled for
// a vocabulary does.
//
// The common JSON frames (constrain/json_frames.h) are walked right after
// each index is built, timed apart ("json_frames_ms"), as compile_constraint
// does on a vocabulary's first JSON constraint; POCKET_BENCH_NO_JSON_FRAMES=1
// leaves them out (each schema then walks them itself).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "constrain/constraint.h"
#include "constrain/frame_cache.h"
#include "constrain/json_frames.h"
#include "formats/external_vocab.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) pocket::fail("cannot read ", path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Printable ASCII as is, other bytes as \xNN (JSON output must be UTF-8).
std::string readable(std::string_view b) {
  std::string out;
  for (unsigned char c : b) {
    if (c >= 32 && c < 127) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// Minor page faults of this process so far (fresh memory touched).
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

double us_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

int run(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s TOKENIZER.json SCHEMA_DIR WALKS.json OUT.json [MASK_DIR]\n", argv[0]);
    return 2;
  }
  const std::string schema_dir = argv[2], mask_dir = argc > 5 ? argv[5] : "";
  auto tok = pocket::Tokenizer::create(pocket::load_tokenizer_file(argv[1], 0, nullptr));
  auto t0 = std::chrono::steady_clock::now();
  auto vocab = pocket::constrain::VocabIndex::build(*tok);
  nlohmann::json out;
  out["vocab_size"] = vocab->vocab_size;
  out["vocab_index_ms"] = us_since(t0) / 1000.0;
  const char* no_frames_env = std::getenv("POCKET_BENCH_NO_JSON_FRAMES");
  const bool json_frames = !(no_frames_env && std::string(no_frames_env) == "1");
  out["json_frames"] = json_frames;
  auto warm = [&] {
    if (!json_frames) {
      vocab->frame_cache->claim_json_frames();  // compile_constraint will not make the pass either
      return 0.0;
    }
    const auto w0 = std::chrono::steady_clock::now();
    pocket::constrain::warm_json_frames(vocab);
    return us_since(w0) / 1000.0;
  };
  out["json_frames_ms"] = warm();
  out["json_frames_bytes"] = vocab->frame_cache->bytes();
  const auto walks = nlohmann::json::parse(read_all(argv[3]));
  // POCKET_BENCH_EVICT_MB=N: before each mask, read N MiB (as a forward
  // pass streams its weights through the caches), outside the timing.
  const char* evict_env = std::getenv("POCKET_BENCH_EVICT_MB");
  std::vector<uint8_t> junk(evict_env ? static_cast<size_t>(std::atoll(evict_env)) << 20 : 0, 1);
  out["evict_mb"] = junk.size() >> 20;
  // POCKET_BENCH_EVICT_AT=advance: read them before each advance instead (the
  // mask computed right after the token that leads to it).
  const char* at_env = std::getenv("POCKET_BENCH_EVICT_AT");
  const bool evict_at_advance = at_env && std::string(at_env) == "advance";
  uint64_t junk_sum = 0;
  auto evict = [&] {
    for (size_t i = 0; i < junk.size(); i += 64) junk_sum += junk[i];
  };
  const char* cold_env = std::getenv("POCKET_BENCH_COLD_FRAMES");
  const bool cold = cold_env && std::string(cold_env) == "1";
  out["cold_frames"] = cold;
  for (auto& [name, ids] : walks.items()) {
    nlohmann::json r;
    if (cold) {
      vocab = pocket::constrain::VocabIndex::build(*tok);
      warm();
    }
    pocket::constrain::ConstraintSpec spec;
    spec.kind = pocket::constrain::ConstraintSpec::Kind::JsonSchema;
    spec.text = read_all(schema_dir + "/" + name.substr(0, name.find('#')));
    try {
      t0 = std::chrono::steady_clock::now();
      auto c = pocket::constrain::compile_constraint(spec, vocab);
      r["compile_ms"] = us_since(t0) / 1000.0;
      auto m = c->matcher();
      std::vector<double> mask_us;
      std::vector<int64_t> steps, walks, new_states, hits, kinds, faults;
      std::vector<std::string> text;  // per token: its bytes, readable
      std::ofstream bits;
      if (!mask_dir.empty()) bits.open(mask_dir + "/" + name + ".bits", std::ios::binary);
      r["rejected_at"] = -1;
      for (size_t i = 0; i <= ids.size(); ++i) {
        if (!evict_at_advance) evict();
        const long faults0 = minor_faults();
        t0 = std::chrono::steady_clock::now();
        const auto before = m.stats();
        auto mask = m.mask();
        mask_us.push_back(us_since(t0));
        faults.push_back(minor_faults() - faults0);
        const auto after = m.stats();
        steps.push_back(after.trie_steps - before.trie_steps);
        walks.push_back((after.frame_masks - after.frame_hits) - (before.frame_masks - before.frame_hits));
        new_states.push_back(after.states - before.states);
        hits.push_back(after.mask_hits - before.mask_hits);
        // 0 cached, 1 counted mask shared by another count, 2 counted made
        // far from the bound, 3 counted made near it, 4 another mask made.
        kinds.push_back(after.mask_hits > before.mask_hits           ? 0
                        : after.near_bound > before.near_bound       ? 3
                        : after.counted_made > before.counted_made   ? 2
                        : after.counted_shared > before.counted_shared ? 1
                                                                       : 4);
        if (bits) bits.write(reinterpret_cast<const char*>(mask.data()), static_cast<std::streamsize>(mask.size_bytes()));
        if (i == ids.size()) break;
        const int32_t id = ids[i].get<int32_t>();
        text.push_back(id >= 0 && id < vocab->vocab_size ? readable(vocab->bytes[id]) : "?");
        if (evict_at_advance) evict();
        if (!m.advance(ids[i].get<int32_t>())) {
          r["rejected_at"] = i;
          break;
        }
      }
      r["mask_us"] = mask_us;
      r["trie_steps"] = steps;    // per mask: trie nodes stepped through
      r["frame_walks_at"] = walks;  // per mask: frame walks done (not found in a cache)
      r["new_states"] = new_states;  // per mask: parser states made
      r["mask_hit"] = hits;          // per mask: 1 when it was cached
      r["mask_kind"] = kinds;        // per mask: see above
      r["page_faults"] = faults;     // per mask: minor page faults (fresh memory)
      r["tokens"] = text;
      const auto st = m.stats();
      r["frame_walks"] = st.frame_masks - st.frame_hits;
      r["shared_frames"] = st.shared_hits;
      r["states"] = st.states;
      r["stack_nodes"] = st.nodes;
      r["accepting"] = m.accepting();
    } catch (const std::exception& e) {
      r["error"] = e.what();
    }
    out["schemas"][name] = r;
  }
  out["frame_cache_bytes"] = vocab->frame_cache->bytes();  // at the end (the last index, when cold)
  out["evict_sum"] = junk_sum;  // keeps the reads
  std::ofstream(argv[4]) << out.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_constrain_masks: %s\n", e.what());
    return 1;
  }
}
