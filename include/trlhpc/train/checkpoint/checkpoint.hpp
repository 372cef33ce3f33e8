#pragma once
// Saving and resuming a training run (ARCHITECTURE.md section 7): the trainer's state in one
// parallel-HDF5 file per checkpoint (state.hpp), committed atomically (commit.hpp), described by a
// manifest (manifest.hpp). A checkpoint written on one layout resumes on any other: every rank reads
// exactly the slices it holds.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "trlhpc/model/model_config.hpp"
#include "trlhpc/train/checkpoint/state.hpp"
#include "trlhpc/train/trainer.hpp"

namespace trlhpc::checkpoint {

// Where training stands after `step` optimizer steps.
struct TrainingProgress {
  int64_t step = 0;
  int64_t num_tokens = 0;       // non-padding tokens trained on so far (all ranks)
  double epoch = 0;             // step / steps per epoch, as logged
  int64_t sampler_epoch = 0, sampler_step = 0;  // the sampler position of the next step
};

// What must match to resume, for require_same_identity: the model's parameter names and full
// shapes and its config; the caller adds tokenizer_fingerprint, dataset and global_batch_size.
nlohmann::json model_identity(const ModelConfig& config);

struct SaveRequest {
  std::string output_dir;
  TrainingProgress progress;
  nlohmann::json identity;      // model_identity + tokenizer, dataset, global batch
  nlohmann::json run;           // the mesh, sharding, options and schedule the run used (recorded only)
  std::string tokenizer_dir;    // its tokenizer files are copied into the checkpoint ("" = none)
  int64_t save_total_limit = 0;  // keep at most this many checkpoints (<= 0: all)
  int64_t keep_step = -1;        // a checkpoint the limit never deletes (the best model's), -1: none
  nlohmann::json best_model;     // the best-model record (best_model.hpp) for the manifest; null: none
  // TrainingArguments' save_only_model: the parameters alone (no AdamW moments, optimizer step or
  // sampler position); the manifest says "save_only_model": true and resuming from it is refused.
  bool model_only = false;
};

// Collective over the trainer's world group: writes and commits a checkpoint of the trainer's state
// now, copying one unit at a time to the host. Returns the committed folder.
std::string save_checkpoint(const SaveRequest& request, Trainer& trainer);

// Collective over `group` (every rank of the job, in any communicator): writes and commits a
// checkpoint of `layout` with values from `source`. What save_checkpoint and the asynchronous
// saver (async_save.hpp) share. Returns the committed folder; on an I/O error on any rank, every
// rank throws the same RuntimeFailure and the .tmp folder is removed.
std::string write_checkpoint(const SaveRequest& request, ProcessGroup& group, const StateLayout& layout,
                             const StateSource& source, int64_t optimizer_step);

// Collective: the manifest of committed checkpoint `dir` after checking it against `identity`
// (UserError naming the difference, on every rank, before any collective).
nlohmann::json open_manifest(const std::string& dir, const nlohmann::json& identity);

// UserError (local, the same on every rank) when `manifest` is of a --save_only_model checkpoint: it
// holds no optimizer state or data position to resume from. Its parameters still load (below).
void require_resumable(const std::string& dir, const nlohmann::json& manifest);

// Collective: parameters, AdamW moments and step of `dir` into the trainer; returns the progress.
TrainingProgress load_checkpoint(const std::string& dir, const nlohmann::json& manifest, Trainer& trainer);

// Collective: the parameters only (export, evaluation).
void load_checkpoint_parameters(const std::string& dir, const nlohmann::json& manifest, ParallelModel& model);

}  // namespace trlhpc::checkpoint
