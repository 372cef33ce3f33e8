#pragma once
// FieldReader: reads the fields of one config.json object, naming the file and the field in every
// error (model_config.cpp and the family files, src/model/family/).
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
  const std::string& source() const { return source_; }

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

}  // namespace trlhpc::model_config_detail
