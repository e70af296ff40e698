#include "constrain/json_frames.h"

#include <string>

#include "constrain/frame_cache.h"
#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "util/error.h"

namespace pocket::constrain {

namespace {

// A value schema and a sample value of it. The kinds are JSON's own (strings,
// numbers) and the string formats and bounds json_schema.h supports; not the
// fragments of any particular schema.
struct Kind {
  const char* schema;
  const char* value;
};
constexpr Kind kKinds[] = {
    {R"({"type":"string"})", R"("a\n\u001f\"b")"},
    {R"({"type":"string","minLength":1,"maxLength":40})", R"("a\n\u001f\"b")"},
    {R"({"type":"integer"})", "-12"},
    {R"({"type":"number"})", "-1.5e3"},
    {R"({"type":"boolean"})", "true"},
    {R"({"type":"string","format":"email"})", R"("ab.c@d.ef")"},
    {R"({"type":"string","format":"date"})", R"("2024-01-02")"},
    {R"({"type":"string","format":"time"})", R"("12:34:56Z")"},
    {R"({"type":"string","format":"date-time"})", R"("2024-01-02T12:34:56Z")"},
    {R"({"type":"string","format":"uuid"})", R"("123e4567-e89b-12d3-a456-426614174000")"},
    {R"({"type":"string","format":"ipv4"})", R"("10.0.0.1")"},
    {R"({"type":"array","items":{"type":"string"}})", R"(["a\n","b"])"},
    {R"({"type":"array","items":{"type":"string","maxLength":12},"maxItems":3})", R"(["a\n","b"])"},
    {R"({"type":"object"})", R"({"a":"b","c":1})"},
    {R"({"type":"object","additionalProperties":{"type":"string"}})", R"({"a":"b","c":"d"})"},
};

// The masks of every state on the way through `text` (one per byte).
void replay(const std::shared_ptr<const VocabIndex>& vocab, const std::string& schema, const std::string& text) {
  Matcher m(std::make_shared<const CompiledGrammar>(compile_json_schema(schema)), vocab);
  for (char c : text) {
    m.mask();
    if (!m.advance_bytes(std::string_view(&c, 1)))
      fail("json frames: the sample ", text, " does not match its schema ", schema);
  }
  m.mask();
}

}  // namespace

bool warm_json_frames(const std::shared_ptr<const VocabIndex>& vocab) {
  if (!vocab->frame_cache->claim_json_frames()) return false;
  for (const Kind& k : kKinds) {
    // As a property value of a closed object, the commonest place.
    replay(vocab, std::string(R"({"type":"object","properties":{"k":)") + k.schema + R"(},"required":["k"]})",
           std::string(R"({"k":)") + k.value + "}");
  }
  return true;
}

}  // namespace pocket::constrain
