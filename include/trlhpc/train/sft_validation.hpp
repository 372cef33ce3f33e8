#pragma once
// Range checks of every numeric option of `trlhpc sft` (SftConfig). Pure: a function of the options
// only, run first by plan_sft_job, so every rank raises the same UserError before any file is read or
// any collective starts. Each message names the flag, the value given and the allowed range, e.g.
//   --learning_rate -1: must be > 0 and finite
// Values the fp32 optimizer would turn into inf, 0 or 1 (beta) are refused too.
#include <cstdint>

#include "trlhpc/train/sft_config.hpp"

namespace trlhpc {

void validate_sft_options(const SftConfig& config);

// The most optimizer steps a run may have: 2^40, far beyond any real run, low enough that rows
// (steps x global batch) and tokens (x max_length) of any accepted run fit int64.
inline constexpr int64_t kMaxTrainingSteps = int64_t{1} << 40;

// The run's optimizer steps: --max_steps, or ceil(--num_train_epochs x steps_per_epoch) (at least 1).
// UserError naming the flag when that count, the global batch or the token count of the run would
// overflow (kMaxTrainingSteps, 2^31 - 1 rows, int64 tokens). The same on every rank.
int64_t checked_total_steps(const SftConfig& config, int64_t steps_per_epoch, int64_t global_batch_size);

}  // namespace trlhpc
