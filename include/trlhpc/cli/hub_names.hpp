#pragma once
// Hub ids in `trlhpc sft` options replaced by the local folders they stand for (io/hub_cache.hpp):
// --model_name_or_path and --tokenizer (models, at --model_revision), --dataset_name and --eval_dataset
// (datasets, at "main"). Then --dataset_config NAME picks the subset folder NAME/ of the dataset, the
// layout of multi-config Hub repos (`<config>/train-*.parquet`; a README `configs:` block is not read).
// Runs on every rank before anything is read; the result depends only on the
// file system, so every rank resolves alike or raises the same UserError.
#include <string>

#include "trlhpc/train/sft_config.hpp"

namespace trlhpc {

void resolve_hub_names(SftConfig& config, const std::string& hub_cache_dir);

}  // namespace trlhpc
