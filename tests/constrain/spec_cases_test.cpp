// Spec-exactness of the JSON Schema compiler: the cases in
// tests/data/constrain/spec_cases.json carry jsonschema's verdict (made and
// re-checked by tools/constrain/spec_cases.py): lowercase t/z in date-times,
// -0, RFC 5322 local parts in emails, extra properties where
// additionalProperties is absent, arrays shorter or longer than prefixItems.
// With JsonOptions::open, Pocket's grammar must accept exactly what
// jsonschema does.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "constrain/json_schema.h"
#include "match_util.h"
#include "util/mapped_file.h"

namespace pocket::constrain {
namespace {

nlohmann::json cases() {
  return nlohmann::json::parse(read_text_file(pocket::test::test_data_dir() + "/constrain/spec_cases.json"));
}

TEST(ConstrainSpecCases, OpenAcceptsExactlyWhatJsonschemaAccepts) {
  const auto all = cases();
  ASSERT_GE(all.size(), 30u);
  JsonOptions open;
  open.open = true;
  for (const auto& c : all) {
    const Grammar g = compile_json_schema(c["schema"].dump(), open);
    const std::string inst = c["instance"].get<std::string>();
    EXPECT_EQ(test::matches(g, inst), c["valid"].get<bool>()) << c["schema"].dump() << "\ninstance " << inst;
  }
}

TEST(ConstrainSpecCases, ClosedByDefaultDiffersOnlyOnExtraPropertiesAndItems) {
  // The default (closed, documented in json_schema.h) refuses the extra
  // properties and items jsonschema allows, and agrees on every other case.
  int refused_extra = 0;
  for (const auto& c : cases()) {
    const Grammar g = compile_json_schema(c["schema"].dump());
    const std::string inst = c["instance"].get<std::string>();
    const auto value = nlohmann::json::parse(inst);
    const auto& sc = c["schema"];
    const bool extra = (sc.contains("properties") && value.is_object() &&
                        std::any_of(value.items().begin(), value.items().end(),
                                    [&](const auto& kv) { return !sc["properties"].contains(kv.key()); })) ||
                       (sc.contains("prefixItems") && !sc.contains("items") && value.is_array() &&
                        value.size() > sc["prefixItems"].size());
    if (extra && c["valid"].get<bool>()) {
      EXPECT_FALSE(test::matches(g, inst)) << inst;
      ++refused_extra;
    } else {
      EXPECT_EQ(test::matches(g, inst), c["valid"].get<bool>()) << c["schema"].dump() << "\ninstance " << inst;
    }
  }
  EXPECT_GE(refused_extra, 3);
}

}  // namespace
}  // namespace pocket::constrain
