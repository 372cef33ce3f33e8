// load_dataset's choice of files for one entry, and mixtures of entries (dataset_source.hpp).
#include "trlhpc/data/dataset/dataset_source.hpp"

#include <cmath>
#include <filesystem>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/batching/sampler.hpp"
#include "trlhpc/data/dataset/data_files.hpp"

namespace trlhpc::dataset {
namespace {

namespace fs = std::filesystem;

// The train_test_split permutation is its own stream: epoch -1 is never a training epoch.
constexpr int64_t kSplitPermutationEpoch = -1;

std::string joined(const std::vector<std::string>& names, size_t limit = 10) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

// A relative folder name from a card or a config: no absolute path, no "..", so an untrusted README
// cannot point the reader outside the dataset.
fs::path inside(const fs::path& root, const std::string& relative, const std::string& origin, const std::string& key) {
  const fs::path rel(relative);
  bool climbs = false;
  for (const auto& part : rel) climbs |= part == "..";
  if (rel.is_absolute() || climbs)
    throw UserError(origin + ": " + key + " " + relative + " must be a folder inside the dataset (relative, without \"..\")");
  return root / rel;
}

std::vector<SplitFiles> splits_from_patterns(const fs::path& base, const DataFilesPatterns& patterns, const std::string& origin) {
  std::error_code ec;
  if (!fs::is_directory(base, ec)) throw UserError(origin + ": " + base.string() + " is not a folder");
  const std::vector<std::string> files = dataset_folder_files(base);
  std::vector<SplitFiles> out;
  for (const auto& [split, list] : patterns) out.push_back({split, select_data_files(files, list, origin)});
  return out;
}

std::vector<SplitFiles> inferred_splits(const fs::path& base, const std::string& origin) {
  std::error_code ec;
  if (!fs::is_directory(base, ec))
    throw UserError(origin + ": " + base.string() + " is not a folder (check data_dir or --dataset_config)");
  return infer_splits(dataset_folder_files(base), origin);
}

std::vector<std::string> config_names(const std::vector<DatasetCardConfig>& configs) {
  std::vector<std::string> names;
  for (const auto& c : configs) names.push_back(c.name);
  return names;
}

// The splits of a folder entry (before `split` picks one) and the folder their paths are relative to.
std::vector<SplitFiles> entry_splits(const DatasetEntry& e, fs::path& base) {
  const fs::path root(e.path);
  if (e.data_files) {
    base = e.data_dir.empty() ? root : inside(root, e.data_dir, e.origin, "data_dir");
    return splits_from_patterns(base, *e.data_files, e.origin);
  }
  const std::vector<DatasetCardConfig> configs = read_dataset_card_configs(e.path);
  if (!configs.empty()) {
    const std::string card = (root / "README.md").string();
    std::optional<size_t> chosen;
    if (!e.name.empty()) {
      for (size_t i = 0; i < configs.size(); ++i)
        if (configs[i].name == e.name) chosen = i;
      if (!chosen)
        throw UserError(e.origin + ": the dataset has no config \"" + e.name + "\"; its README.md declares: " +
                        joined(config_names(configs)) + ". Pick one of those");
    } else {
      chosen = default_dataset_config(configs, card);
      if (!chosen)
        throw UserError(e.origin + ": the dataset declares several configs and none is the default: " +
                        joined(config_names(configs)) + ". Pick one with --dataset_config NAME (a mixture entry: name:)");
    }
    const DatasetCardConfig& config = configs[*chosen];
    const std::string where = card + " config " + config.name;
    const std::string data_dir = e.data_dir.empty() ? config.data_dir : e.data_dir;
    if (config.data_files) {  // paths relative to the dataset folder, as the Hub resolves them
      base = root;
      return splits_from_patterns(base, *config.data_files, where);
    }
    base = data_dir.empty() ? root : inside(root, data_dir, where, "data_dir");
    return inferred_splits(base, where);
  }
  fs::path folder = root;
  if (!e.name.empty()) {
    const bool plain_name = e.name.find('/') == std::string::npos && e.name != ".." && e.name != ".";
    std::error_code ec;
    if (!plain_name || !fs::is_directory(root / e.name, ec))
      throw UserError(e.origin + ": the dataset has no config \"" + e.name + "\": its README.md declares no configs and there "
                      "is no subset folder " + e.name + "/ (multi-config Hub repos keep each subset in a folder of its name). "
                      "Check the name, or drop --dataset_config (name:) for a single-config dataset");
    folder = root / e.name;
  }
  base = e.data_dir.empty() ? folder : inside(folder, e.data_dir, e.origin, "data_dir");
  return inferred_splits(base, e.origin);
}

}  // namespace

std::vector<std::string> resolve_entry_files(const DatasetEntry& e) {
  TRLHPC_REQUIRE(!e.path.empty(), e.origin + ": no dataset path: pass a .jsonl/.json/.parquet file or a folder of them");
  std::error_code ec;
  const auto status = fs::status(e.path, ec);
  TRLHPC_REQUIRE(fs::exists(status), e.origin + ": " + e.path +
                                         ": no such file or folder. Pass a local .jsonl/.json/.parquet file or a folder of "
                                         "them, or a hub id in the local Hugging Face cache (huggingface-cli download first)");
  if (fs::is_regular_file(status)) return {e.path};
  TRLHPC_REQUIRE(fs::is_directory(status), e.origin + ": " + e.path + " is neither a regular file nor a folder");

  fs::path base;
  const std::vector<SplitFiles> splits = entry_splits(e, base);
  std::vector<std::string> names;
  const SplitFiles* chosen = nullptr;
  for (const SplitFiles& s : splits) {
    names.push_back(s.split);
    if (s.split == e.split) chosen = &s;
  }
  if (!chosen && e.single_split_fallback && splits.size() == 1) chosen = &splits.front();
  if (!chosen) {
    const std::vector<std::string> all = dataset_folder_files(base);
    throw UserError(e.origin + " has no split \"" + e.split + "\" (" + e.split_option + "); its splits: " +
                    (names.empty() ? std::string("none (no data file)") : joined(names)) +
                    ", as Hugging Face datasets infers them from the file and folder names of " + base.string() +
                    " (it holds: " + (all.empty() ? std::string("no file") : joined(all)) + "). Pass one of those to " +
                    e.split_option + ", or name the files after the split (" + e.split + ".jsonl, data/" + e.split +
                    "-00000-of-00001.parquet or a " + e.split + "/ folder)" +
                    (e.missing_split_hint.empty() ? "" : "; " + e.missing_split_hint));
  }
  std::vector<std::string> paths;
  for (const std::string& rel : chosen->files)
    if (is_readable_data_file(rel)) paths.push_back((base / rel).string());
  if (paths.empty())
    throw UserError(e.origin + ": split \"" + e.split + "\" holds no .jsonl, .json or .parquet file (" +
                    joined(chosen->files) + "); trlhpc reads those formats only");
  return paths;
}

std::vector<DatasetPart> resolve_source(const DatasetSource& source) {
  TRLHPC_REQUIRE(!source.entries.empty(), (source.origin.empty() ? std::string("dataset") : source.origin) +
                                              ": no dataset to read: pass --dataset_name or a datasets: list in --config");
  std::vector<DatasetPart> parts;
  for (const DatasetEntry& e : source.entries) parts.push_back({resolve_entry_files(e), e.columns, e.origin});
  return parts;
}

std::vector<int64_t> split_rows(int64_t rows, double test_size, uint64_t seed, bool test_side, const std::string& origin) {
  // datasets: n_test = ceil(test_size * n) for a fraction, n_train = n - n_test; both must be > 0.
  const int64_t n_test = static_cast<int64_t>(std::ceil(test_size * static_cast<double>(rows)));
  const int64_t n_train = rows - n_test;
  if (n_test <= 0 || n_train <= 0)
    throw UserError(origin + ": test_split_size " + std::to_string(test_size) + " of " + std::to_string(rows) +
                    " rows leaves " + std::to_string(n_train) + " train and " + std::to_string(n_test) +
                    " test rows; both must be at least 1 (choose a size in (0, 1) that fits)");
  const std::vector<int64_t> permutation = batching::epoch_permutation(rows, seed, kSplitPermutationEpoch);
  return test_side ? std::vector<int64_t>(permutation.begin(), permutation.begin() + n_test)
                   : std::vector<int64_t>(permutation.begin() + n_test, permutation.end());
}

}  // namespace trlhpc::dataset
