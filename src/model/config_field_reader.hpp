#pragma once
// FieldReader: reads the fields of one config.json object, naming the file and the field in every
// error (model_config.cpp, model_config_layers.cpp).
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/model_config.hpp"

namespace trlhpc::model_config_detail {

using nlohmann::json;

// Reads fields of one JSON object, naming the file and the field in every error.
class FieldReader {
 public:
  FieldReader(const json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  bool has(const char* field) const { return object_.contains(field) && !object_.at(field).is_null(); }
  bool present(const char* field) const { return object_.contains(field); }  // null counts as present
  const json& at(const char* field) const { return object_.at(field); }

  [[noreturn]] void fail(const char* field, const std::string& problem) const {
    std::string value = object_.contains(field) ? object_.at(field).dump() : "(missing)";
    throw UserError(source_ + ": field '" + prefix_ + field + "' = " + value + ": " + problem);
  }

  int64_t integer(const char* field, std::optional<int64_t> fallback = std::nullopt) const {
    if (!has(field)) {
      if (fallback) return *fallback;
      fail(field, "required; add it to the config");
    }
    const json& v = at(field);
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()) return static_cast<int64_t>(v.get<double>());
    fail(field, "expected an integer");
  }
  int64_t positive(const char* field, std::optional<int64_t> fallback = std::nullopt) const {
    int64_t value = integer(field, fallback);
    if (value <= 0) fail(field, "must be a positive integer");
    return value;
  }
  double number(const char* field, double fallback) const {
    if (!has(field)) return fallback;
    if (!at(field).is_number()) fail(field, "expected a number");
    return at(field).get<double>();
  }
  bool boolean(const char* field, bool fallback) const {
    if (!has(field)) return fallback;
    if (!at(field).is_boolean()) fail(field, "expected true or false");
    return at(field).get<bool>();
  }
  std::string string(const char* field, const std::string& fallback) const {
    if (!has(field)) return fallback;
    if (!at(field).is_string()) fail(field, "expected a string");
    return at(field).get<std::string>();
  }
  std::optional<int64_t> optional_integer(const char* field) const {
    if (!has(field)) return std::nullopt;
    return integer(field);
  }

 private:
  const json& object_;
  std::string source_;
  std::string prefix_;
};

// Reads layer_types, no_rope_layers and the sliding-window fields into c (model_config_layers.cpp);
// c's architecture and num_hidden_layers are already set.
void parse_layer_pattern(const FieldReader& r, ModelConfig& c);

// Gemma 3 text (model_config_gemma.cpp): its RoPE fields (both transformers spellings), its structure
// flags and refusals, its layer pattern (`layer_types` as read, or null to derive it from
// sliding_window_pattern), and the fields to_json writes for it.
void parse_gemma3_rope(const json& root, const std::string& source, ModelConfig& c);
void parse_gemma3_structure(const FieldReader& r, ModelConfig& c);
void parse_gemma3_layers(const FieldReader& r, ModelConfig& c, const std::vector<bool>* layer_types);
void write_gemma3_fields(const ModelConfig& c, json& j);

}  // namespace trlhpc::model_config_detail
