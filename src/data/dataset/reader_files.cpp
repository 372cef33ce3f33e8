// Resolution of `--dataset_name PATH --dataset_train_split SPLIT` to a list of files.
//
// Follows the local-folder rules of Hugging Face `datasets` (data_files.py), restricted to JSON and Parquet:
// a file belongs to SPLIT when its path relative to PATH starts with SPLIT followed by a delimiter
// ("train.jsonl", "train-00000-of-00002.jsonl", "train/part.json") or holds SPLIT between two delimiters
// ("data/train-0.jsonl", "my.train.json"); delimiters are - . _ space digits and '/'. When no file names
// any split at all, every file is "train". Files and folders whose name starts with '.' or "__" are ignored.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/dataset/reader.hpp"

namespace trlhpc::dataset {
namespace {

namespace fs = std::filesystem;

bool is_delimiter(char c) {
  return c == '-' || c == '.' || c == '_' || c == ' ' || c == '/' || (c >= '0' && c <= '9');
}

bool is_json_file(const fs::path& p) {
  std::string ext = p.extension().string();
  return ext == ".jsonl" || ext == ".json" || ext == ".parquet";
}

bool is_hidden(const fs::path& relative) {
  for (const auto& part : relative) {
    std::string name = part.string();
    if ((!name.empty() && name[0] == '.') || name.rfind("__", 0) == 0) return true;
  }
  return false;
}

// True when `relative` (with '/' separators) names `split` as HF's split patterns do.
bool names_split(const std::string& relative, const std::string& split) {
  for (size_t at = relative.find(split); at != std::string::npos; at = relative.find(split, at + 1)) {
    size_t end = at + split.size();
    bool before_ok = at == 0 || is_delimiter(relative[at - 1]);
    bool after_ok = end < relative.size() && is_delimiter(relative[end]);
    if (before_ok && after_ok) return true;
  }
  return false;
}

// Split names HF recognises in file names (datasets.data_files.SPLIT_KEYWORDS).
const std::vector<std::string>& known_split_names() {
  static const std::vector<std::string> names = {"train", "training", "validation", "valid", "dev", "val",
                                                 "test",  "testing",  "eval",       "evaluation"};
  return names;
}

std::vector<std::string> json_files_under(const fs::path& root) {
  std::vector<std::string> relative_paths;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    // Lexically: fs::relative would follow a Hub cache snapshot's symlinks into ../../blobs/.
    fs::path rel = it->path().lexically_relative(root);
    if (is_hidden(rel)) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && is_json_file(it->path())) relative_paths.push_back(rel.generic_string());
  }
  std::sort(relative_paths.begin(), relative_paths.end());
  return relative_paths;
}

std::string listing(const std::vector<std::string>& names) {
  if (names.empty()) return "no .jsonl, .json or .parquet file";
  std::string out;
  for (size_t i = 0; i < names.size() && i < 10; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 10) out += ", ... (" + std::to_string(names.size()) + " files)";
  return out;
}

}  // namespace

std::vector<std::string> resolve_dataset_files(const std::string& dataset_name, const std::string& split) {
  TRLHPC_REQUIRE(!dataset_name.empty(), "--dataset_name is empty: pass a .jsonl/.json file or a folder of them");
  fs::path root(dataset_name);
  std::error_code ec;
  auto status = fs::status(root, ec);
  TRLHPC_REQUIRE(fs::exists(status), "--dataset_name " + dataset_name +
                                         ": no such file or folder. Pass a local .jsonl/.json file or a folder "
                                         "of them (trlhpc does not download Hub datasets; fetch it first)");
  if (fs::is_regular_file(status)) return {dataset_name};
  TRLHPC_REQUIRE(fs::is_directory(status),
                 "--dataset_name " + dataset_name + " is neither a regular file nor a folder");

  std::vector<std::string> all = json_files_under(root);
  std::vector<std::string> chosen;
  for (const auto& rel : all)
    if (names_split(rel, split)) chosen.push_back(rel);

  if (chosen.empty() && split == "train") {
    bool any_split_named = false;
    for (const auto& rel : all)
      for (const auto& name : known_split_names()) any_split_named |= names_split(rel, name);
    if (!any_split_named) chosen = all;
  }
  TRLHPC_REQUIRE(!chosen.empty(), "--dataset_name " + dataset_name + " has no file for split \"" + split +
                                      "\" (expected " + split + ".jsonl, " + split + "-*.jsonl or a " + split +
                                      "/ folder); it holds: " + listing(all) +
                                      ". Name the files after the split or set --dataset_train_split");
  std::vector<std::string> paths;
  paths.reserve(chosen.size());
  for (const auto& rel : chosen) paths.push_back((root / rel).string());
  return paths;
}

}  // namespace trlhpc::dataset
