#include "tokenizer_files.hpp"

#include <fstream>
#include <sstream>

#include "json_fields.hpp"
#include "trlhpc/data/tokenizer/tokenizer.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc::tokenizer::detail {

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  TRLHPC_REQUIRE(in.good(), path.string() + ": cannot be read; check that the file exists and is readable");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  const std::string text = read_text_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw_user_error(path.string() + ": malformed JSON (" + e.what() + "); re-download or fix the file");
  }
}

int32_t checked_token_id(const nlohmann::json& id, const std::string& what) {
  const bool in_range = id.is_number_unsigned() ? id.get<uint64_t>() <= static_cast<uint64_t>(kMaxTokenId)
                                                : id.get<int64_t>() >= 0 && id.get<int64_t>() <= kMaxTokenId;
  TRLHPC_REQUIRE(in_range, what + " " + id.dump() + " is outside 0.." + std::to_string(kMaxTokenId) +
                               " (trlhpc's limit kMaxTokenId); the file is corrupt or not a tokenizer");
  return static_cast<int32_t>(id.get<int64_t>());
}

std::vector<std::pair<std::string, int32_t>> read_vocab(const nlohmann::json& vocab, const std::string& where) {
  TRLHPC_REQUIRE(vocab.is_object(), where + ": the vocabulary must be a JSON object {\"token\": id, ...}");
  std::vector<std::pair<std::string, int32_t>> out;
  out.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    TRLHPC_REQUIRE(id.is_number_integer(), where + ": vocabulary id of \"" + token + "\" is not an integer");
    out.emplace_back(token, checked_token_id(id, where + ": vocabulary id of \"" + token + "\""));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> read_merges(const nlohmann::json& merges, const std::string& where) {
  TRLHPC_REQUIRE(merges.is_array(), where + ": \"merges\" must be a list");
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& merge = merges[i];
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      TRLHPC_REQUIRE(space != std::string::npos && text.find(' ', space + 1) == std::string::npos,
                     where + ": merge " + std::to_string(i) + " \"" + text + "\" is not two tokens separated by one space");
      out.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else {
      TRLHPC_REQUIRE(merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string(),
                     where + ": merge " + std::to_string(i) + " must be \"a b\" or [\"a\", \"b\"]");
      out.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> read_merges_txt(const std::filesystem::path& path) {
  std::istringstream lines(read_text_file(path));
  std::vector<std::pair<std::string, std::string>> out;
  std::string line;
  size_t number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number == 1 && line.rfind("#version", 0) == 0) continue;
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    TRLHPC_REQUIRE(space != std::string::npos && line.find(' ', space + 1) == std::string::npos,
                   path.string() + ":" + std::to_string(number) + ": \"" + line +
                       "\" is not two tokens separated by one space");
    out.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  return out;
}

AddedToken read_added_token(const nlohmann::json& entry, int32_t id, const std::string& where) {
  AddedToken token;
  token.id = id;
  if (entry.contains("id")) {
    TRLHPC_REQUIRE(entry["id"].is_number_integer(), where + ": added token id must be an integer");
    token.id = checked_token_id(entry["id"], where + ": added token id");
  }
  TRLHPC_REQUIRE(token.id >= 0, where + ": added token without a valid id: " + entry.dump().substr(0, 120));
  token.content = required_string(entry, "content", where + " added token");
  token.special = optional_bool(entry, "special", false);
  token.single_word = optional_bool(entry, "single_word", false);
  token.lstrip = optional_bool(entry, "lstrip", false);
  token.rstrip = optional_bool(entry, "rstrip", false);
  token.normalized = optional_bool(entry, "normalized", !token.special);
  return token;
}

std::optional<std::string> read_special_token(const nlohmann::json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return std::nullopt;
  const nlohmann::json& value = config[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object()) return optional_string(value, "content");
  return std::nullopt;
}

}  // namespace trlhpc::tokenizer::detail
