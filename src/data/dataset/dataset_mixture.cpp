// TRL's `datasets:` mixture entries from a --config YAML file (dataset_mixture.hpp).
#include "trlhpc/data/dataset/dataset_mixture.hpp"

#include <yaml-cpp/yaml.h>

#include "trlhpc/core/error.hpp"

namespace trlhpc::dataset {
namespace {

std::string line_of(const YAML::Node& node) { return "line " + std::to_string(node.Mark().line + 1); }

std::string text(const YAML::Node& node, const std::string& where, const std::string& key) {
  if (!node.IsScalar()) throw UserError(where + ": " + key + " must be a string (" + line_of(node) + ")");
  return node.Scalar();
}

DatasetEntry parse_entry(const YAML::Node& node, const std::string& config_file, size_t index) {
  const std::string where = config_file + ": datasets[" + std::to_string(index) + "]";
  if (!node.IsMap())
    throw UserError(where + " must be a mapping with path: and optionally name, data_dir, data_files, split, columns (" +
                    line_of(node) + ")");
  DatasetEntry e;
  e.split_option = "its split: key";
  bool has_path = false;
  for (const auto& kv : node) {
    const std::string key = text(kv.first, where, "a key");
    const YAML::Node& value = kv.second;
    if (key == "fraction") {
      if (!value.IsNull())
        throw UserError(where + ": fraction is not supported by trlhpc yet (" + line_of(value) +
                        "); remove it to concatenate the whole datasets, or cut the files to the share you want");
      continue;
    }
    if (value.IsNull() && key != "path") continue;  // YAML `name:` with no value: the default, as None in TRL
    if (key == "path") {
      if (value.IsNull()) throw UserError(where + ": path is empty; give a hub id, a folder or a file (" + line_of(value) + ")");
      e.path = text(value, where, key);
      has_path = true;
    } else if (key == "name") {
      e.name = text(value, where, key);
    } else if (key == "data_dir") {
      e.data_dir = text(value, where, key);
    } else if (key == "split") {
      e.split = text(value, where, key);
    } else if (key == "data_files") {
      e.data_files = parse_data_files(value, where);
    } else if (key == "columns") {
      if (!value.IsSequence() || value.size() == 0)
        throw UserError(where + ": columns must be a non-empty list of column names (" + line_of(value) + ")");
      for (const YAML::Node& c : value) e.columns.push_back(text(c, where, "each column"));
    } else {
      throw UserError(where + ": unknown key '" + key + "' (" + line_of(kv.first) +
                      "); an entry takes path, name, data_dir, data_files, split, columns");
    }
  }
  if (!has_path) throw UserError(where + ": no path: (" + line_of(node) + "); every entry names its dataset with path:");
  e.origin = where + " (path: " + e.path + ")";
  return e;
}

}  // namespace

std::vector<DatasetEntry> parse_dataset_mixture(const YAML::Node& datasets, const std::string& config_file) {
  if (datasets.IsNull()) return {};
  if (!datasets.IsSequence())
    throw UserError(config_file + ": datasets must be a list of entries (- path: ...), as TRL's DatasetMixtureConfig (" +
                    line_of(datasets) + ")");
  if (datasets.size() > kMaxMixtureEntries)
    throw UserError(config_file + ": datasets has more than " + std::to_string(kMaxMixtureEntries) + " entries (kMaxMixtureEntries)");
  std::vector<DatasetEntry> entries;
  for (size_t i = 0; i < datasets.size(); ++i) entries.push_back(parse_entry(datasets[i], config_file, i));
  return entries;
}

}  // namespace trlhpc::dataset
