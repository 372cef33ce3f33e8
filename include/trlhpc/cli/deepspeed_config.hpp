#pragma once
// `--deepspeed FILE.json` (TrainingArguments' deepspeed): a DeepSpeed config mapped onto the same
// strategies as `--accelerate_config` (cli/accelerate_config.hpp), by handing its ZeRO settings to the
// accelerate reader as the deepspeed_config block an accelerate file would hold:
//
//   zero_optimization.stage 0 | 1 | 2 | 3             -> sharding none | zero1 | zero2 | zero3 (default 0)
//   zero_optimization.offload_optimizer.device cpu|none -> offload optimizer (accelerate's rules: stage >= 1)
//   zero_optimization.offload_param.device cpu|none     -> offload parameters (stage 3, with the optimizer)
//   bf16.enabled true | false | "auto"                 -> --bf16 unless given ("auto": leave --bf16)
//   fp16.enabled true                                  -> refused: use --bf16
//   gradient_accumulation_steps, train_micro_batch_size_per_gpu, gradient_clipping: a number fills
//   --gradient_accumulation_steps / --per_device_train_batch_size / --max_grad_norm unless given, and
//   contradicts a given different value (a UserError naming both); "auto" (the HF integration's
//   placeholder) takes the flag's value
//   train_batch_size: "auto" or a number (checked by DeepSpeed against the others; not used here)
//   other keys (optimizer, scheduler, ...): a note each, ignored (trlhpc's own AdamW and schedule run)
// A value may also be the JSON object itself ({"zero_optimization": ...}), as TrainingArguments takes a
// dict. --deepspeed together with --accelerate_config is refused naming both.
#include <set>
#include <string>
#include <vector>

#include "trlhpc/train/sft_config.hpp"

namespace trlhpc {

// Reads config.deepspeed and applies it to `config` (flags in `explicit_flags` win or contradict).
void apply_deepspeed_config(const std::set<std::string>& explicit_flags, int world_size, SftConfig& config,
                            std::vector<std::string>& notes);

}  // namespace trlhpc
