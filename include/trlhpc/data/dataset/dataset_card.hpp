#pragma once
// The `configs:` block of a Hub dataset card (the YAML front matter of the dataset folder's README.md),
// how multi-config repos declare which files make up each config and split:
//
//   ---
//   configs:
//   - config_name: default            # required, unique
//     default: true                   # optional: the config load_dataset takes when none is named
//     data_files:                     # a pattern, a list of patterns (all "train"), or split/path pairs
//     - split: train
//       path: data/train-*            # a pattern or a list of them, relative to the dataset folder
//     - split: test
//       path: data/test-*
//   - config_name: fr
//     data_dir: fr                    # without data_files: the splits inferred under fr/ (data_files.hpp)
//   ---
//
// As `datasets` (MetadataConfigs): the default config is the only one, else the one named "default"
// or marked `default: true` (two such are an error); other keys (features, ...) are ignored.
// The card is untrusted: at most kMaxDatasetCardBytes are read, at most kMaxDatasetConfigs configs;
// every error names README.md, the config and what to fix (docs/UNTRUSTED_INPUT.md).
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace YAML {
class Node;
}

namespace trlhpc::dataset {

inline constexpr size_t kMaxDatasetCardBytes = 1 << 20;  // README.md bytes read for the front matter
inline constexpr size_t kMaxDatasetConfigs = 1000;        // entries of `configs:`
inline constexpr size_t kMaxDataFilesPatterns = 10000;    // patterns of one config, all splits together

// Split name -> its patterns, in the order given (a plain pattern or list is the "train" split).
using DataFilesPatterns = std::vector<std::pair<std::string, std::vector<std::string>>>;

struct DatasetCardConfig {
  std::string name;
  std::string data_dir;                    // empty: the dataset folder
  std::optional<DataFilesPatterns> data_files;  // unset: inferred under data_dir
  bool is_default = false;
};

// The configs of the card text (front matter between a leading "---" line and the next "---" line);
// empty when there is no front matter or no `configs:`. `origin` (the README path) starts every error.
std::vector<DatasetCardConfig> parse_dataset_card_configs(const std::string& card_text, const std::string& origin);

// A `data_files` value as `datasets` accepts it (sanitize_patterns): a pattern or a list of them (the
// "train" split), a list of {split, path} pairs (path: a pattern or a list), or a mapping split -> pattern(s)
// (TRL's mixture entries). Split names must be \w+(\.\w+)* and appear once. UserError names `origin`.
DataFilesPatterns parse_data_files(const YAML::Node& node, const std::string& origin);

// The configs of <folder>/README.md; empty when there is none.
std::vector<DatasetCardConfig> read_dataset_card_configs(const std::string& folder);

// The config `load_dataset(folder)` takes without a name (see above); nullopt when there are several
// and none is the default. UserError for two defaults.
std::optional<size_t> default_dataset_config(const std::vector<DatasetCardConfig>& configs, const std::string& origin);

}  // namespace trlhpc::dataset
