#include "trlhpc/cli/hub_names.hpp"

#include "trlhpc/core/error.hpp"
#include "trlhpc/io/hub_cache.hpp"

namespace trlhpc {

void resolve_hub_names(SftConfig& c, const std::string& cache) {
  using hub::RepoType;
  if (!c.model_name_or_path.empty())
    c.model_name_or_path = hub::resolve(c.model_name_or_path, RepoType::kModel, c.model_revision, cache, "--model_name_or_path");
  if (!c.tokenizer.empty()) c.tokenizer = hub::resolve(c.tokenizer, RepoType::kModel, c.model_revision, cache, "--tokenizer");
  // With a datasets: mixture TRL ignores --dataset_name (sft_job warns), so it need not be cached.
  if (!c.dataset_name.empty() && c.datasets.empty()) c.dataset_name = hub::resolve(c.dataset_name, RepoType::kDataset, "main", cache, "--dataset_name");
  for (dataset::DatasetEntry& entry : c.datasets)  // a mixture entry's path is a hub id like --dataset_name
    entry.path = hub::resolve(entry.path, RepoType::kDataset, "main", cache, entry.origin);
  if (!c.eval_dataset.empty()) c.eval_dataset = hub::resolve(c.eval_dataset, RepoType::kDataset, "main", cache, "--eval_dataset");
}

}  // namespace trlhpc
