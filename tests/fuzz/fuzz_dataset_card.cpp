// A dataset card's README.md (its `configs:` block), then its patterns matched against the paths it
// names and split inference over those paths: the parts of load_dataset's rules that see untrusted text.
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "trlhpc/data/dataset/data_files.hpp"
#include "trlhpc/data/dataset/dataset_card.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trlhpc::dataset;
  trlhpc::fuzz::expect_user_errors_only([&] {
    const std::vector<DatasetCardConfig> configs = parse_dataset_card_configs(trlhpc::fuzz::as_text(data, size), "README.md");
    (void)default_dataset_config(configs, "README.md");
    std::vector<std::string> paths;  // the patterns as if they were file names, and some real layouts
    for (const DatasetCardConfig& c : configs)
      if (c.data_files)
        for (const auto& [split, patterns] : *c.data_files) paths.insert(paths.end(), patterns.begin(), patterns.end());
    for (const char* p : {"data/train-00000-of-00001.parquet", "train/a.jsonl", "x/my.test.json", "valid.jsonl"}) paths.push_back(p);
    for (const DatasetCardConfig& c : configs)
      if (c.data_files)
        for (const auto& [split, patterns] : *c.data_files) (void)select_data_files(paths, patterns, "README.md");
    (void)infer_splits(paths, "README.md");
  });
  return 0;
}
