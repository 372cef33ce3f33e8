// The `configs:` block of a dataset card (dataset_card.hpp).
#include "trlhpc/data/dataset/dataset_card.hpp"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "trlhpc/core/error.hpp"

namespace trlhpc::dataset {
namespace {

std::string line_of(const YAML::Node& node) { return "line " + std::to_string(node.Mark().line + 1); }

// Scalars only: a mapping or list where a name or pattern belongs is refused, not stringified.
std::string scalar(const YAML::Node& node, const std::string& origin, const std::string& what) {
  if (!node.IsScalar()) throw UserError(origin + ": " + what + " must be a string (" + line_of(node) + ")");
  return node.Scalar();
}

std::vector<std::string> patterns_of(const YAML::Node& node, const std::string& origin, const std::string& what,
                                     size_t& budget) {
  std::vector<std::string> out;
  if (node.IsScalar()) {
    out.push_back(node.Scalar());
  } else if (node.IsSequence()) {
    for (const YAML::Node& item : node) out.push_back(scalar(item, origin, what + " entries"));
  } else {
    throw UserError(origin + ": " + what + " must be a pattern or a list of patterns (" + line_of(node) + ")");
  }
  if (out.size() > budget)
    throw UserError(origin + ": more than " + std::to_string(kMaxDataFilesPatterns) +
                    " data_files patterns (kMaxDataFilesPatterns); use wildcards");
  budget -= out.size();
  return out;
}

void add_split(DataFilesPatterns& out, const std::string& split, std::vector<std::string> patterns,
               const std::string& origin, const YAML::Node& where) {
  static const std::regex split_name(R"(^\w+(\.\w+)*$)");
  if (!std::regex_match(split, split_name))
    throw UserError(origin + ": data_files split \"" + split + "\" is not a valid split name (letters, digits, '_', "
                    "dots between words; " + line_of(where) + ")");
  for (const auto& [name, _] : out)
    if (name == split) throw UserError(origin + ": data_files names the split \"" + split + "\" twice (" + line_of(where) + ")");
  out.emplace_back(split, std::move(patterns));
}

// The text between a leading "---" line and the next "---" line (huggingface_hub's RepoCard rule).
std::optional<std::string> front_matter(const std::string& text) {
  size_t start = 0;
  while (start < text.size() && (text[start] == ' ' || text[start] == '\t' || text[start] == '\r' || text[start] == '\n')) ++start;
  if (text.compare(start, 3, "---") != 0) return std::nullopt;
  size_t body = start + 3;
  if (body >= text.size() || (text[body] != '\n' && text[body] != '\r')) return std::nullopt;
  for (size_t at = text.find("\n---", body); at != std::string::npos; at = text.find("\n---", at + 1)) {
    const size_t after = at + 4;
    if (after == text.size() || text[after] == '\n' || text[after] == '\r') return text.substr(body, at - body);
  }
  return std::nullopt;
}

}  // namespace

DataFilesPatterns parse_data_files(const YAML::Node& node, const std::string& origin) {
  DataFilesPatterns out;
  size_t budget = kMaxDataFilesPatterns;
  if (node.IsMap()) {
    for (const auto& kv : node)
      add_split(out, scalar(kv.first, origin, "a data_files split"), patterns_of(kv.second, origin, "data_files", budget),
                origin, kv.first);
    return out;
  }
  bool pairs = false;
  if (node.IsSequence())
    for (const YAML::Node& item : node) pairs |= item.IsMap();
  if (!pairs) {
    add_split(out, "train", patterns_of(node, origin, "data_files", budget), origin, node);
    return out;
  }
  for (const YAML::Node& item : node) {
    if (!item.IsMap() || item.size() != 2 || !item["split"] || !item["path"])
      throw UserError(origin + ": each data_files entry must be {split: NAME, path: PATTERN or [PATTERNS]} (" +
                      line_of(item) + ")");
    add_split(out, scalar(item["split"], origin, "split"), patterns_of(item["path"], origin, "path", budget), origin, item);
  }
  return out;
}

std::vector<DatasetCardConfig> parse_dataset_card_configs(const std::string& card_text, const std::string& origin) {
  const std::optional<std::string> yaml = front_matter(card_text);
  if (!yaml) return {};
  YAML::Node root;
  try {
    root = YAML::Load(*yaml);
  } catch (const YAML::Exception& e) {
    throw UserError(origin + ": invalid YAML front matter at line " + std::to_string(e.mark.line + 2) + ": " + e.msg);
  }
  if (!root.IsMap() || !root["configs"] || root["configs"].IsNull()) return {};
  const YAML::Node configs = root["configs"];
  if (!configs.IsSequence()) throw UserError(origin + ": configs must be a list of {config_name, data_files, ...} (" + line_of(configs) + ")");
  if (configs.size() > kMaxDatasetConfigs)
    throw UserError(origin + ": more than " + std::to_string(kMaxDatasetConfigs) + " configs (kMaxDatasetConfigs)");
  std::vector<DatasetCardConfig> out;
  std::set<std::string> names;
  for (const YAML::Node& entry : configs) {
    if (!entry.IsMap() || !entry["config_name"])
      throw UserError(origin + ": every entry of configs needs a config_name (" + line_of(entry) + ")");
    DatasetCardConfig config;
    config.name = scalar(entry["config_name"], origin, "config_name");
    const std::string where = origin + ": config " + config.name;
    if (!names.insert(config.name).second) throw UserError(where + " is declared twice (" + line_of(entry) + ")");
    if (entry["data_dir"] && !entry["data_dir"].IsNull()) config.data_dir = scalar(entry["data_dir"], where, "data_dir");
    if (entry["data_files"] && !entry["data_files"].IsNull()) config.data_files = parse_data_files(entry["data_files"], where);
    if (entry["default"]) {
      try {
        config.is_default = entry["default"].as<bool>();
      } catch (const YAML::Exception&) {
        throw UserError(where + ": default must be true or false (" + line_of(entry["default"]) + ")");
      }
    }
    out.push_back(std::move(config));
  }
  return out;
}

std::vector<DatasetCardConfig> read_dataset_card_configs(const std::string& folder) {
  const std::filesystem::path readme = std::filesystem::path(folder) / "README.md";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(readme, ec)) return {};
  std::ifstream in(readme, std::ios::binary);
  if (!in) throw UserError(readme.string() + ": cannot be read (check its permissions)");
  std::string text(kMaxDatasetCardBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return parse_dataset_card_configs(text, readme.string());
}

std::optional<size_t> default_dataset_config(const std::vector<DatasetCardConfig>& configs, const std::string& origin) {
  std::optional<size_t> chosen;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!(configs.size() == 1 || configs[i].name == "default" || configs[i].is_default)) continue;
    if (chosen)
      throw UserError(origin + ": the configs " + configs[*chosen].name + " and " + configs[i].name +
                      " are both default (named \"default\" or default: true); keep one, or pass --dataset_config NAME");
    chosen = i;
  }
  return chosen;
}

}  // namespace trlhpc::dataset
