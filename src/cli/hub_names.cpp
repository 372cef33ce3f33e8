#include "trlhpc/cli/hub_names.hpp"

#include <filesystem>

#include "trlhpc/core/error.hpp"
#include "trlhpc/io/hub_cache.hpp"

namespace trlhpc {

void resolve_hub_names(SftConfig& c, const std::string& cache) {
  using hub::RepoType;
  if (!c.model_name_or_path.empty())
    c.model_name_or_path = hub::resolve(c.model_name_or_path, RepoType::kModel, c.model_revision, cache, "--model_name_or_path");
  if (!c.tokenizer.empty()) c.tokenizer = hub::resolve(c.tokenizer, RepoType::kModel, c.model_revision, cache, "--tokenizer");
  if (!c.dataset_name.empty()) c.dataset_name = hub::resolve(c.dataset_name, RepoType::kDataset, "main", cache, "--dataset_name");
  if (!c.dataset_config.empty() && !c.dataset_name.empty()) {
    namespace fs = std::filesystem;
    const fs::path subset = fs::path(c.dataset_name) / c.dataset_config;
    const bool plain_name = c.dataset_config.find('/') == std::string::npos && c.dataset_config != ".." && c.dataset_config != ".";
    std::error_code ec;
    if (!plain_name || !fs::is_directory(subset, ec))
      throw UserError("--dataset_config " + c.dataset_config + ": the dataset " + c.dataset_name + " has no subset folder " +
                      c.dataset_config + "/ (trlhpc reads a subset from the folder of its name, as Hub repos store "
                      "them). Check the name, or drop --dataset_config for a single-config dataset");
    c.dataset_name = subset.string();
  }
  if (!c.eval_dataset.empty()) c.eval_dataset = hub::resolve(c.eval_dataset, RepoType::kDataset, "main", cache, "--eval_dataset");
}

}  // namespace trlhpc
