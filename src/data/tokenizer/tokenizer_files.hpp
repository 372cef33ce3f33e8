#pragma once
// Reading the files of a Hugging Face tokenizer directory, with UserErrors that name the file.
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "added_tokens.hpp"

namespace trlhpc::tokenizer::detail {

// The parsed JSON of `path`; UserError when it cannot be read or is not valid JSON.
nlohmann::json read_json_file(const std::filesystem::path& path);

// Whole text of `path`; UserError when it cannot be read.
std::string read_text_file(const std::filesystem::path& path);

// A token id from a JSON integer: a UserError naming `what` unless 0 <= id <= kMaxTokenId.
int32_t checked_token_id(const nlohmann::json& id, const std::string& what);

// vocab.json: {"token": id, ...}.
std::vector<std::pair<std::string, int32_t>> read_vocab(const nlohmann::json& vocab, const std::string& where);

// merges: tokenizer.json's list of "a b" strings or ["a", "b"] pairs.
std::vector<std::pair<std::string, std::string>> read_merges(const nlohmann::json& merges, const std::string& where);

// merges.txt: an optional "#version" line, then one "a b" pair per line.
std::vector<std::pair<std::string, std::string>> read_merges_txt(const std::filesystem::path& path);

// One added token: tokenizer.json "added_tokens" entry (with "id") or a tokenizer_config.json
// "added_tokens_decoder" value (id given separately).
AddedToken read_added_token(const nlohmann::json& entry, int32_t id, const std::string& where);

// A tokenizer_config.json special token (bos_token, eos_token, ...): a string, an AddedToken dict
// {"content": ...}, or null/absent.
std::optional<std::string> read_special_token(const nlohmann::json& config, const char* key);

}  // namespace trlhpc::tokenizer::detail
