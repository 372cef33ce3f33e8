#pragma once
// Hub ids in `trlhpc sft` options replaced by the local folders they stand for (io/hub_cache.hpp):
// --model_name_or_path and --tokenizer (models, at --model_revision), --dataset_name and --eval_dataset
// (datasets, at "main"), and the path of every `datasets:` mixture entry. --dataset_config and the
// splits are chosen later, when the dataset is read (data/dataset/dataset_source.hpp).
// Runs on every rank before anything is read; the result depends only on the
// file system, so every rank resolves alike or raises the same UserError.
#include <string>

#include "trlhpc/train/sft_config.hpp"

namespace trlhpc {

void resolve_hub_names(SftConfig& config, const std::string& hub_cache_dir);

}  // namespace trlhpc
