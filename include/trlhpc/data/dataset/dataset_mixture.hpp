#pragma once
// TRL's `datasets:` mixture in a `--config` YAML file (trl.scripts.utils.DatasetMixtureConfig):
//
//   datasets:
//     - path: trl-lib/Capybara          # required: hub id in the local cache, folder or file
//       name: default                   # config (subset)
//       data_dir: data                  # folder inside path
//       data_files: data/train-*.parquet  # pattern, list, {split: pattern(s)} or [{split, path}]
//       split: train                    # default train
//       columns: [messages]             # keep only these columns (select_columns)
//     - path: ./local_folder
//   streaming: false
//   test_split_size: 0.05
//
// Each entry is one load_dataset call (dataset_source.hpp); the mixture is their concatenation in
// order. Unknown keys are errors (TRL builds DatasetConfig(**entry), which refuses them); `fraction`
// (TRL 1.16) is refused as not supported yet. Every error names the config file and the entry.
#include <string>
#include <vector>

#include "trlhpc/data/dataset/dataset_source.hpp"

namespace YAML {
class Node;
}

namespace trlhpc::dataset {

inline constexpr size_t kMaxMixtureEntries = 1000;

// The entries of the `datasets:` node of `config_file` (origin and split_option filled in for errors).
std::vector<DatasetEntry> parse_dataset_mixture(const YAML::Node& datasets, const std::string& config_file);

}  // namespace trlhpc::dataset
