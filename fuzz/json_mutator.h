// A JSON-aware mutation for the structure-aware fuzz targets whose inputs
// hold a JSON document (safetensors headers, tokenizer.json). Byte flips
// rarely keep JSON well formed, so most of them stop in the JSON parser; this
// parses the document, changes one to three nodes and writes it out again,
// so the loader behind the parser sees documents that are valid JSON but
// hostile in meaning: a size of 2^63, a negative id, a string where a number
// belongs, a missing or repeated key, an array cut short or grown, a value
// moved to another place in the tree.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace pocket::fuzz {

// An allocator that differs from std::allocator only in its name, so that
// the mutators' parser, lexer, DOM and serializer are template instances of
// their own, not the library's (which parses with nlohmann::json).
// fuzz/CMakeLists.txt builds the structure-aware targets' files without
// comparison tracing, which cost ~17% of fuzz_hf_tokenizer_struct's time
// inside its own parse and dump; the linker keeps one copy of an inline
// function, so an instance shared with the library would have lost the
// tracing there too. What is still shared (checked with nm) is small helpers:
// the character read of a const char* input, number printing, the error
// messages' string building.
template <class T>
struct MutatorAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = MutatorAllocator<U>;
  };
  MutatorAllocator() = default;
  template <class U>
  MutatorAllocator(const MutatorAllocator<U>&) noexcept {}
};

// std::map objects: ordered_json's linear key lookup made parsing a 50K-entry
// vocabulary quadratic. Key order is not meaningful in JSON, so sorting is fine.
using Json = nlohmann::basic_json<std::map, std::vector, std::string, bool, std::int64_t, std::uint64_t, double,
                                  MutatorAllocator>;

// Parses `text` as JSON; nullopt when it is not (the caller then mutates bytes).
inline std::optional<Json> parse_json(std::string_view text) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// Compact text, invalid UTF-8 in strings replaced (dump would throw on it).
inline std::string dump_json(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// A value that breaks size, index and count arithmetic, near `v` half the time.
inline int64_t hostile_int(std::mt19937_64& rng, int64_t v) {
  static const int64_t kEdges[] = {0, -1, 1, 2, 255, 256, 65535, 65536, INT32_MAX, int64_t{INT32_MAX} + 1,
                                   UINT32_MAX, int64_t{1} << 53, INT64_MAX, INT64_MIN, -(int64_t{1} << 31)};
  const uint64_t u = static_cast<uint64_t>(v);  // unsigned: wrapping, not overflow
  switch (rng() % 4) {
    case 0: return kEdges[rng() % std::size(kEdges)];
    case 1: return static_cast<int64_t>(u + rng() % 17 - 8);
    case 2: return static_cast<int64_t>(u * 2 + 1);
    default: return static_cast<int64_t>(rng());
  }
}

namespace json_detail {

// Every node of the tree, parents before children.
inline void collect(Json& j, std::vector<Json*>& out) {
  out.push_back(&j);
  if (j.is_structured())
    for (auto& child : j) collect(child, out);
}

inline Json random_scalar(std::mt19937_64& rng, const std::vector<Json*>& nodes) {
  switch (rng() % 7) {
    case 0: return hostile_int(rng, 0);
    case 1: return static_cast<uint64_t>(rng());
    case 2: return std::numeric_limits<double>::max() * ((rng() % 2) ? 1 : -1);
    case 3: return std::string(rng() % 2 ? 0 : 1 + rng() % 4096, static_cast<char>('a' + rng() % 26));
    case 4: return nullptr;
    case 5: return static_cast<bool>(rng() % 2);
    default: return *nodes[rng() % nodes.size()];  // a copy of another node: a plausible value, wrong place
  }
}

}  // namespace json_detail

// Applies one mutation to a random node of `root`. `pool` holds strings worth
// trying as values (dtype names, tokenizer types, token texts); may be empty.
inline void mutate_json_once(Json& root, std::mt19937_64& rng, const std::vector<std::string>& pool) {
  std::vector<Json*> nodes;
  json_detail::collect(root, nodes);
  Json& n = *nodes[rng() % nodes.size()];
  switch (rng() % 8) {
    case 0:  // a number made hostile
      if (n.is_number_integer() || n.is_number_unsigned()) {
        n = hostile_int(rng, n.is_number_unsigned() ? static_cast<int64_t>(n.get<uint64_t>()) : n.get<int64_t>());
        return;
      }
      [[fallthrough]];
    case 1:  // any node replaced by a scalar of another kind
      n = json_detail::random_scalar(rng, nodes);
      return;
    case 2:  // a string from the pool (a known name in the wrong place, or the right place)
      if (!pool.empty()) {
        n = pool[rng() % pool.size()];
        return;
      }
      n = "";
      return;
    case 3:  // an object loses a key or gains a copy of another node under an existing key's name
      if (n.is_object() && !n.empty()) {
        auto it = n.begin();
        std::advance(it, static_cast<long>(rng() % n.size()));
        if (rng() % 2) n.erase(it.key());
        else {
          Json value = *nodes[rng() % nodes.size()];  // copied first: the insertion may move n's children
          n[it.key() + (rng() % 2 ? "" : "_")] = std::move(value);
        }
        return;
      }
      [[fallthrough]];
    case 4:  // an array cut short, grown by repeating an element, or two elements swapped
      if (n.is_array() && !n.empty()) {
        const size_t i = rng() % n.size(), k = rng() % n.size();
        switch (rng() % 3) {
          case 0: n.erase(n.begin() + static_cast<long>(i), n.end()); break;
          case 1: {
            const Json repeated = n[i];
            for (size_t r = 1 + rng() % 3; r; --r) n.push_back(repeated);
            break;
          }
          default: std::swap(n[i], n[k]); break;
        }
        return;
      }
      [[fallthrough]];
    case 5:  // a container emptied or turned into the other kind
      if (n.is_structured()) {
        n = rng() % 2 ? Json::array() : Json::object();
        return;
      }
      n = Json::array({n});
      return;
    case 6:  // a string grown with a non-ASCII, a control or an escape-heavy tail
      if (n.is_string()) {
        static const char* kTails[] = {"\xc4\xa0", "\xe4\xbd\xa0", "\\u0000", "\n", " ", "\xf0\x9f\x98\x80", "<|im_end|>"};
        n = n.get<std::string>() + kTails[rng() % std::size(kTails)];
        return;
      }
      [[fallthrough]];
    default:  // two nodes exchanged (a value from elsewhere in the tree)
    {
      Json& other = *nodes[rng() % nodes.size()];
      if (&other != &n) {
        Json copy = other;
        n = std::move(copy);
      }
      return;
    }
  }
}

// One to three mutations of `root`.
inline void mutate_json(Json& root, std::mt19937_64& rng, const std::vector<std::string>& pool) {
  for (int k = 1 + static_cast<int>(rng() % 3); k; --k) mutate_json_once(root, rng, pool);
}

}  // namespace pocket::fuzz
