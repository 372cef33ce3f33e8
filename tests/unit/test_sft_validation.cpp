// validate_sft_options (train/sft_validation.hpp): every numeric option of `trlhpc sft` outside its
// range is a UserError naming the flag, the value and the range; the defaults and the edges of each
// range pass. Pure, so every rank of a job raises the same message.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/train/sft_validation.hpp"

namespace trlhpc {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Case {
  std::function<void(SftConfig&)> change;
  std::string message;  // the whole message
};

std::string error_of(const SftConfig& c) {
  try {
    validate_sft_options(c);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(SftValidation, DefaultsPass) { EXPECT_EQ(error_of(SftConfig{}), ""); }

TEST(SftValidation, EachRuleNamesTheFlagTheValueAndTheRange) {
  const std::vector<Case> cases = {
      {[](SftConfig& c) { c.max_steps = 0; }, "--max_steps 0: must be -1 (train --num_train_epochs) or >= 1"},
      {[](SftConfig& c) { c.max_steps = -2; }, "--max_steps -2: must be -1 (train --num_train_epochs) or >= 1"},
      {[](SftConfig& c) { c.num_train_epochs = 0; }, "--num_train_epochs 0: must be > 0 and finite when --max_steps is -1"},
      {[](SftConfig& c) { c.num_train_epochs = kInf; }, "--num_train_epochs inf: must be > 0 and finite when --max_steps is -1"},
      {[](SftConfig& c) { c.max_steps = 5, c.num_train_epochs = kNaN; }, "--num_train_epochs nan: must be a finite number"},
      {[](SftConfig& c) { c.per_device_train_batch_size = 0; }, "--per_device_train_batch_size 0: must be in [1, 2147483647]"},
      {[](SftConfig& c) { c.per_device_train_batch_size = int64_t{1} << 40; },
       "--per_device_train_batch_size 1099511627776: must be in [1, 2147483647]"},
      {[](SftConfig& c) { c.gradient_accumulation_steps = -1; }, "--gradient_accumulation_steps -1: must be in [1, 2147483647]"},
      {[](SftConfig& c) { c.learning_rate = -1; }, "--learning_rate -1: must be >= 0 and finite"},
      {[](SftConfig& c) { c.learning_rate = kNaN; }, "--learning_rate nan: must be >= 0 and finite"},
      {[](SftConfig& c) { c.learning_rate = kInf; }, "--learning_rate inf: must be >= 0 and finite"},
      {[](SftConfig& c) { c.learning_rate = 1e40; },
       "--learning_rate 1e+40: out of fp32 range (the optimizer computes in fp32: |value| in [1.2e-38, 3.4e38] or 0)"},
      {[](SftConfig& c) { c.warmup_steps = -1; }, "--warmup_steps -1: must be >= 0"},
      {[](SftConfig& c) { c.max_steps = 10, c.warmup_steps = 10; },
       "--warmup_steps 10: must be < --max_steps 10 (a warmup that long never reaches the peak learning rate)"},
      {[](SftConfig& c) { c.warmup_ratio = 1; }, "--warmup_ratio 1: must be in [0, 1)"},
      {[](SftConfig& c) { c.warmup_ratio = -0.1; }, "--warmup_ratio -0.1: must be in [0, 1)"},
      {[](SftConfig& c) { c.weight_decay = -0.01; }, "--weight_decay -0.01: must be >= 0 and finite"},
      {[](SftConfig& c) { c.adam_beta1 = 1; }, "--adam_beta1 1: must be in [0, 1)"},
      {[](SftConfig& c) { c.adam_beta1 = -0.5; }, "--adam_beta1 -0.5: must be in [0, 1)"},
      {[](SftConfig& c) { c.adam_beta2 = kNaN; }, "--adam_beta2 nan: must be in [0, 1)"},
      {[](SftConfig& c) { c.adam_beta2 = 0.99999999999; },
       "--adam_beta2 0.99999999999: rounds to 1 in fp32 (the optimizer's precision): use at most 0.99999994"},
      {[](SftConfig& c) { c.adam_epsilon = 0; }, "--adam_epsilon 0: must be > 0 and finite"},
      {[](SftConfig& c) { c.adam_epsilon = 1e-50; },
       "--adam_epsilon 1e-50: out of fp32 range (the optimizer computes in fp32: |value| in [1.2e-38, 3.4e38] or 0)"},
      {[](SftConfig& c) { c.max_grad_norm = -1; }, "--max_grad_norm -1: must be >= 0 and finite (0: no clipping)"},
      {[](SftConfig& c) { c.save_strategy = "best", c.eval_dataset = "e.jsonl"; },
       "--save_strategy best: --metric_for_best_model must be provided (e.g. eval_loss), as transformers requires"},
      {[](SftConfig& c) { c.load_best_model_at_end = true; },
       "--load_best_model_at_end needs evaluation: give --eval_dataset (or a test split) and --eval_strategy steps"},
      {[](SftConfig& c) { c.load_best_model_at_end = true, c.eval_dataset = "e.jsonl", c.save_strategy = "epoch"; },
       "--load_best_model_at_end requires the save and eval strategy to match, except when --save_strategy best, but "
       "found eval strategy steps and save strategy epoch"},
      {[](SftConfig& c) { c.load_best_model_at_end = true, c.eval_strategy = "steps", c.eval_steps = 4, c.save_steps = 6; },
       "--load_best_model_at_end requires the saving steps to be a round multiple of the evaluation steps, but found "
       "--save_steps 6, which is not a round multiple of --eval_steps 4"},
      {[](SftConfig& c) { c.metric_for_best_model = "bleu"; },
       "--metric_for_best_model bleu: eval_bleu is not an evaluation metric of trlhpc sft; use eval_loss, eval_entropy "
       "or eval_mean_token_accuracy"},
      {[](SftConfig& c) { c.label_smoothing_factor = 1.5; },
       "--label_smoothing_factor 1.5: must be in [0, 1] (0: no label smoothing)"},
      {[](SftConfig& c) { c.loss_type = "dpo"; },
       "--loss_type dpo: use nll (cross-entropy) or dft (TRL's Dynamic Fine-Tuning loss)"},
      {[](SftConfig& c) { c.max_length = 1; }, "--max_length 1: must be in [2, 2147483647]"},
      {[](SftConfig& c) { c.max_length = int64_t{1} << 31; }, "--max_length 2147483648: must be in [2, 2147483647]"},
      {[](SftConfig& c) { c.pad_to_multiple_of = -8; }, "--pad_to_multiple_of -8: must be in [0, 2147483647] (0: no padding multiple)"},
      {[](SftConfig& c) { c.loss_chunk_tokens = 0; }, "--loss_chunk_tokens 0: must be >= 1"},
      {[](SftConfig& c) { c.logging_steps = -1; }, "--logging_steps -1: must be >= 0 (0: log the last step only)"},
      {[](SftConfig& c) { c.eval_steps = -1; }, "--eval_steps -1: must be >= 0 (0: evaluate after the last step only)"},
      {[](SftConfig& c) { c.save_steps = -3; }, "--save_steps -3: must be >= 0 (0: no checkpoints)"},
      {[](SftConfig& c) { c.save_total_limit = -1; }, "--save_total_limit -1: must be >= 0 (0: keep every checkpoint)"},
      {[](SftConfig& c) { c.peak_flops = -1e12; }, "--peak_flops -1e+12: must be >= 0 and finite (0: measure the GEMM rate)"},
      {[](SftConfig& c) { c.dp_replicate_size = 0; }, "--dp_replicate_size 0: must be an integer in [1, 2147483647]"},
      {[](SftConfig& c) { c.dp_shard_size = 0; },
       "--dp_shard_size 0: must be -1 (the rest of the world) or an integer in [1, 2147483647]"},
      {[](SftConfig& c) { c.dp_shard_size = -2; },
       "--dp_shard_size -2: must be -1 (the rest of the world) or an integer in [1, 2147483647]"},
      {[](SftConfig& c) { c.tp_size = 0; }, "--tp_size 0: must be an integer in [1, 2147483647]"},
      {[](SftConfig& c) { c.tp_size = (int64_t{1} << 32) + 1; }, "--tp_size 4294967297: must be an integer in [1, 2147483647]"},
      {[](SftConfig& c) { c.cp_size = -1; }, "--cp_size -1: must be an integer in [1, 2147483647]"},
      {[](SftConfig& c) { c.sp_size = 0; }, "--sp_size 0: must be an integer in [1, 2147483647]"},
      {[](SftConfig& c) { c.bucket_size_mb = 0; }, "--bucket_size_mb 0: must be in [1, 1099511627776]"},
  };
  for (const Case& k : cases) {
    SftConfig c;
    k.change(c);
    EXPECT_EQ(error_of(c), k.message);
  }
}

TEST(SftValidation, RangeEdgesPass) {
  const std::vector<std::function<void(SftConfig&)>> fine = {
      [](SftConfig& c) { c.learning_rate = 1e30; },  // finite: the loss guard, not the parser, stops it
      [](SftConfig& c) { c.learning_rate = 0; },     // HF and TRL accept 0 (issue 30, item 9)
      [](SftConfig& c) { c.max_steps = 1; },
      [](SftConfig& c) { c.max_steps = 5, c.num_train_epochs = 0; },  // epochs unused with max_steps
      [](SftConfig& c) { c.max_steps = 10, c.warmup_steps = 9; },
      [](SftConfig& c) { c.warmup_steps = 1000; },  // epochs: the step count is known only with the data
      [](SftConfig& c) { c.warmup_ratio = 0.999; },
      [](SftConfig& c) { c.weight_decay = 0, c.max_grad_norm = 0, c.peak_flops = 0; },
      [](SftConfig& c) { c.adam_beta1 = 0, c.adam_beta2 = 0.99999994; },
      [](SftConfig& c) { c.max_length = 2, c.pad_to_multiple_of = 0; },
      [](SftConfig& c) { c.logging_steps = 0, c.eval_steps = 0, c.save_steps = 0, c.save_total_limit = 0; },
      [](SftConfig& c) { c.dp_shard_size = 4, c.dp_replicate_size = 2, c.tp_size = 2, c.cp_size = 2, c.sp_size = 2; },
      [](SftConfig& c) { c.bucket_size_mb = 1, c.loss_chunk_tokens = 1; },
      [](SftConfig& c) { c.label_smoothing_factor = 1, c.loss_type = "dft"; },
      [](SftConfig& c) { c.load_best_model_at_end = true, c.eval_strategy = "steps", c.eval_steps = 2, c.save_steps = 6; },
      [](SftConfig& c) { c.save_strategy = "best", c.load_best_model_at_end = true, c.eval_dataset = "e.jsonl"; },
      [](SftConfig& c) { c.save_strategy = "best", c.metric_for_best_model = "mean_token_accuracy", c.eval_dataset = "e"; },
      [](SftConfig& c) { c.loss_type = "dft", c.label_smoothing_factor = 0.2, c.tp_size = 1; },
      // The vocab-parallel loss has label smoothing and DFT too (issue 42; they were refused before).
      [](SftConfig& c) { c.label_smoothing_factor = 0.1, c.tp_size = 2; },
      [](SftConfig& c) { c.loss_type = "dft", c.tp_size = 4; },
  };
  for (size_t i = 0; i < fine.size(); ++i) {
    SftConfig c;
    fine[i](c);
    EXPECT_EQ(error_of(c), "") << "case " << i;
  }
}

std::string total_steps_error(const SftConfig& c, int64_t steps_per_epoch, int64_t global_batch) {
  try {
    checked_total_steps(c, steps_per_epoch, global_batch);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// Issue 30, item 2: 1e18 epochs overflowed the step count to INT64_MIN, trained 0 steps and exited 0.
TEST(SftValidation, DerivedCountsAreRangeChecked) {
  SftConfig c;
  c.num_train_epochs = 1e18;
  EXPECT_EQ(total_steps_error(c, 99, 16),
            "--num_train_epochs 1e+18: 9.9e+19 optimizer steps (99 per epoch); at most 1099511627776 "
            "(kMaxTrainingSteps): pass fewer epochs or --max_steps");
  c.num_train_epochs = kMaxTrainingSteps;  // exactly the limit with 1 step per epoch
  EXPECT_EQ(checked_total_steps(c, 1, 1), kMaxTrainingSteps);
  c.num_train_epochs = 3;
  EXPECT_EQ(checked_total_steps(c, 99, 16), 297);
  c.num_train_epochs = 1e-9;  // a sliver of an epoch is still one step
  EXPECT_EQ(checked_total_steps(c, 99, 16), 1);
  c.max_steps = kMaxTrainingSteps + 1;
  EXPECT_EQ(total_steps_error(c, 99, 16), "--max_steps 1099511627777: at most 1099511627776 (kMaxTrainingSteps)");
  c.max_steps = 10;
  EXPECT_EQ(total_steps_error(c, 99, int64_t{1} << 31),
            "global batch 2147483648 rows (--per_device_train_batch_size x data-parallel ranks x "
            "--gradient_accumulation_steps): must be at most 2147483647");
  c.max_steps = int64_t{1} << 40;
  c.max_length = int64_t{1} << 20;
  EXPECT_EQ(total_steps_error(c, 99, 1 << 20),
            "1099511627776 steps x global batch 1048576 rows x --max_length 1048576 tokens overflow the 64-bit "
            "token count: pass fewer steps (--max_steps, --num_train_epochs)");
}

}  // namespace
}  // namespace trlhpc
