#pragma once
// The plan of a `trlhpc sft` run: everything that follows from the configuration alone (the model's
// architecture, the mesh, the trainer's options, the lr schedule, where the tokenizer and the dataset
// cache are). Built first and only from files every rank reads the same, so a bad option or config is
// the same UserError on every rank, before any collective could leave one waiting.
#include <string>

#include <nlohmann/json.hpp>

#include "trlhpc/model/model_config.hpp"
#include "trlhpc/optim/lr_scheduler.hpp"
#include "trlhpc/parallel/mesh/parallel_dims.hpp"
#include "trlhpc/train/sft_config.hpp"
#include "trlhpc/train/trainer.hpp"

namespace trlhpc {

struct SftPlan {
  ModelConfig model;          // from --model_name_or_path's config.json or --model_config
  ParallelDims dims;          // resolved for the world size and the model's heads (for_model)
  TrainerOptions trainer;     // layout (sharding, checkpointing, loss chunks), AdamW, clipping
  LrSchedule schedule;        // --lr_scheduler_type
  std::string tokenizer_dir;  // --tokenizer, else --model_name_or_path (may hold no tokenizer files)
  std::string cache_dir;      // --dataset_cache_dir, else OUTPUT_DIR/.dataset_cache; "none": no cache
  std::string tensorboard_dir;  // --report_to tensorboard: --logging_dir or HF's default under OUTPUT_DIR/runs; else empty
  nlohmann::json identity;    // checkpoint::model_identity + tokenizer_fingerprint of this run
  // --resume_from_checkpoint: the committed checkpoint folder and its manifest, already checked
  // against this run's model and tokenizer (the dataset is checked once loaded). Empty otherwise.
  std::string resume_dir;
  nlohmann::json resume_manifest;
  // --use_peft (or a PEFT adapter directory as --model_name_or_path): the base model's directory ("" for
  // --model_config), the adapter directory to continue ("" = PEFT's fresh init), the name written as the
  // saved adapter's base_model_name_or_path. trainer.parallel.lora holds the adapter config.
  std::string base_model_dir;
  std::string adapter_dir;
  std::string base_model_name;
};

// Throws UserError naming the option and what to do (also for a checkpoint that cannot be resumed).
SftPlan plan_sft_job(const SftConfig& config, int world_size);

}  // namespace trlhpc
