// A small JSON Schema validator for the tests (the subset the constraint
// supports, formats left to the Python jsonschema oracle): written from the
// specification, independent of the grammar compiler.
#pragma once
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

namespace pocket::constrain::test {

using ojson = nlohmann::ordered_json;

inline size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

inline bool validate(const ojson& v, const ojson& s, const ojson& root, std::string& why, int depth = 0) {
  auto bad = [&](const std::string& w) {
    why = w;
    return false;
  };
  if (depth > 100) return bad("too deep");
  if (s.is_boolean()) return s.get<bool>() || bad("false schema");
  if (s.contains("$ref")) return validate(v, root.at(ojson::json_pointer(s["$ref"].get<std::string>().substr(1))), root, why, depth + 1);
  if (s.contains("allOf"))
    for (auto& sub : s["allOf"])
      if (!validate(v, sub, root, why, depth + 1)) return false;
  for (const char* k : {"anyOf", "oneOf"})
    if (s.contains(k)) {
      int ok = 0;
      std::string w;
      for (auto& sub : s[k]) ok += validate(v, sub, root, w, depth + 1);
      if (ok == 0 || (std::string(k) == "oneOf" && ok != 1)) return bad(std::string(k) + " failed: " + w);
    }
  if (s.contains("const") && v != s["const"]) return bad("const");
  if (s.contains("enum")) {
    bool found = false;
    for (auto& e : s["enum"]) found = found || e == v;
    if (!found) return bad("enum");
  }
  if (s.contains("type")) {
    auto is = [&](const std::string& t) {
      if (t == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<long long>(v.get<double>())));
      if (t == "number") return v.is_number();
      if (t == "string") return v.is_string();
      if (t == "boolean") return v.is_boolean();
      if (t == "null") return v.is_null();
      if (t == "object") return v.is_object();
      return t == "array" && v.is_array();
    };
    bool ok = false;
    if (s["type"].is_string()) ok = is(s["type"]);
    else for (auto& t : s["type"]) ok = ok || is(t);
    if (!ok) return bad("type");
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return bad("minimum");
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return bad("maximum");
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return bad("exclusiveMinimum");
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return bad("exclusiveMaximum");
  }
  if (v.is_string()) {
    const std::string str = v.get<std::string>();
    if (s.contains("minLength") && code_points(str) < s["minLength"].get<size_t>()) return bad("minLength");
    if (s.contains("maxLength") && code_points(str) > s["maxLength"].get<size_t>()) return bad("maxLength");
    if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>()))) return bad("pattern");
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return bad("minItems");
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return bad("maxItems");
    size_t k = 0;
    if (s.contains("prefixItems"))
      for (; k < s["prefixItems"].size() && k < v.size(); ++k)
        if (!validate(v[k], s["prefixItems"][k], root, why, depth + 1)) return false;
    if (s.contains("items"))
      for (; k < v.size(); ++k)
        if (!validate(v[k], s["items"], root, why, depth + 1)) return false;
  }
  if (v.is_object()) {
    const ojson empty = ojson::object();
    const ojson& props = s.contains("properties") ? s["properties"] : empty;
    if (s.contains("required"))
      for (auto& r : s["required"])
        if (!v.contains(r.get<std::string>())) return bad("required " + r.get<std::string>());
    for (auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (!validate(x, props[k], root, why, depth + 1)) return false;
      } else if (s.contains("additionalProperties")) {
        if (!validate(x, s["additionalProperties"], root, why, depth + 1)) return bad("additional property " + k + ": " + why);
      }
    }
  }
  return true;
}

}  // namespace pocket::constrain::test
