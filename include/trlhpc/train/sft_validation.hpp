#pragma once
// Range checks of every numeric option of `trlhpc sft` (SftConfig). Pure: a function of the options
// only, run first by plan_sft_job, so every rank raises the same UserError before any file is read or
// any collective starts. Each message names the flag, the value given and the allowed range, e.g.
//   --learning_rate -1: must be > 0 and finite
// Values the fp32 optimizer would turn into inf, 0 or 1 (beta) are refused too.
#include "trlhpc/train/sft_config.hpp"

namespace trlhpc {

void validate_sft_options(const SftConfig& config);

}  // namespace trlhpc
