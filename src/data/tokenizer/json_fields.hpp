#pragma once
// Typed reads of tokenizer.json / tokenizer_config.json fields that fail with a UserError naming the
// file, the object and the field, instead of a bare nlohmann type_error.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "trlhpc/core/error.hpp"

namespace trlhpc::tokenizer::detail {

inline const nlohmann::json& required_field(const nlohmann::json& object, const char* key, const std::string& where) {
  TRLHPC_REQUIRE(object.is_object(), where + ": expected a JSON object, found " + object.dump().substr(0, 80));
  const auto it = object.find(key);
  TRLHPC_REQUIRE(it != object.end(), where + ": missing field \"" + key + "\"");
  return *it;
}

inline std::string required_string(const nlohmann::json& object, const char* key, const std::string& where) {
  const nlohmann::json& value = required_field(object, key, where);
  TRLHPC_REQUIRE(value.is_string(), where + ": field \"" + key + "\" must be a string, found " + value.dump().substr(0, 80));
  return value.get<std::string>();
}

inline const nlohmann::json& required_array(const nlohmann::json& object, const char* key, const std::string& where) {
  const nlohmann::json& value = required_field(object, key, where);
  TRLHPC_REQUIRE(value.is_array(), where + ": field \"" + key + "\" must be a list");
  return value;
}

inline bool optional_bool(const nlohmann::json& object, const char* key, bool fallback) {
  const auto it = object.find(key);
  return it != object.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

inline std::optional<std::string> optional_string(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// A Split/Replace "pattern": {"String": "..."} or {"Regex": "..."}.
struct Pattern {
  std::string text;
  bool is_regex = false;
};

inline Pattern read_pattern(const nlohmann::json& object, const std::string& where) {
  const nlohmann::json& pattern = required_field(object, "pattern", where);
  if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string())
    return {pattern["Regex"].get<std::string>(), true};
  if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string())
    return {pattern["String"].get<std::string>(), false};
  throw_user_error(where + ": \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}, found " +
                   pattern.dump().substr(0, 80));
}

}  // namespace trlhpc::tokenizer::detail
