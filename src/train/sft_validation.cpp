#include "trlhpc/train/sft_validation.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/chat_template/template_kwargs.hpp"
#include "trlhpc/train/best_model.hpp"
#include "trlhpc/train/sft_data.hpp"

namespace trlhpc {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// The shortest text that reads back as `v` ("-1", "0.9", "1e+30", "nan", "inf").
std::string number_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return ec == std::errc() ? std::string(text, end) : std::to_string(v);
}

[[noreturn]] void reject(const char* flag, const std::string& value, const std::string& rule) {
  throw UserError(std::string(flag) + " " + value + ": " + rule);
}

// `ok` is the option's range; NaN and +-inf are refused whatever the range says.
void require(const char* flag, double v, bool ok, const char* rule) {
  if (!std::isfinite(v) || !ok) reject(flag, number_text(v), rule);
}

void require(const char* flag, int64_t v, bool ok, const char* rule) {
  if (!ok) reject(flag, std::to_string(v), rule);
}

// AdamW and the lr schedule run in fp32: a double that is fine may still overflow or flush to zero there.
void require_fp32_finite(const char* flag, double v) {
  const float f = static_cast<float>(v);
  if (!std::isfinite(f) || (v != 0 && f == 0))
    reject(flag, number_text(v), "out of fp32 range (the optimizer computes in fp32: |value| in [1.2e-38, 3.4e38] or 0)");
}

void require_beta(const char* flag, double v) {
  require(flag, v, v >= 0 && v < 1, "must be in [0, 1)");
  if (static_cast<float>(v) >= 1.0f)
    reject(flag, number_text(v), "rounds to 1 in fp32 (the optimizer's precision): use at most 0.99999994");
}

void require_parallel_size(const char* flag, int64_t v) {
  require(flag, v, v >= 1 && v <= kInt32Max, "must be an integer in [1, 2147483647]");
}

// transformers' checks of the best-model options (TrainingArguments.__post_init__, Trainer.__init__), with
// its wording, plus the metrics trlhpc's evaluation reports (transformers finds a missing one only at the
// first evaluation).
void validate_best_model_options(const SftConfig& c) {
  const bool selects = c.load_best_model_at_end || c.save_strategy == "best" || !c.metric_for_best_model.empty();
  if (!selects) return;
  if (c.save_strategy == "best" && c.metric_for_best_model.empty() && !c.load_best_model_at_end)
    throw UserError("--save_strategy best: --metric_for_best_model must be provided (e.g. eval_loss), as transformers "
                    "requires");
  const std::string metric = best_model_metric_name(c.metric_for_best_model.empty() ? "loss" : c.metric_for_best_model);
  if (metric != "eval_loss" && metric != "eval_entropy" && metric != "eval_mean_token_accuracy")
    throw UserError("--metric_for_best_model " + c.metric_for_best_model + ": " + metric + " is not an evaluation metric "
                    "of trlhpc sft; use eval_loss, eval_entropy or eval_mean_token_accuracy");
  if (!c.greater_is_better.empty() && c.greater_is_better != "true" && c.greater_is_better != "false")
    throw UserError("--greater_is_better " + c.greater_is_better + ": use true or false");
  if ((c.load_best_model_at_end || c.save_strategy == "best") && !evaluates(c))
    throw UserError(std::string(c.load_best_model_at_end ? "--load_best_model_at_end" : "--save_strategy best") +
                    " needs evaluation: give --eval_dataset (or a test split) and --eval_strategy steps");
  if (!c.load_best_model_at_end || c.save_strategy == "best") return;
  // trlhpc evaluates with --eval_dataset even under eval_strategy no; transformers' strategies must match.
  const std::string eval_strategy = c.eval_strategy == "no" && !c.eval_dataset.empty() ? "steps" : c.eval_strategy;
  if (eval_strategy != c.save_strategy)
    throw UserError("--load_best_model_at_end requires the save and eval strategy to match, except when "
                    "--save_strategy best, but found eval strategy " + eval_strategy + " and save strategy " +
                    c.save_strategy);
  if (c.save_strategy == "steps" && c.save_steps > 0 && (c.eval_steps == 0 || c.save_steps % c.eval_steps != 0))
    throw UserError("--load_best_model_at_end requires the saving steps to be a round multiple of the evaluation "
                    "steps, but found --save_steps " + std::to_string(c.save_steps) + ", which is not a round "
                    "multiple of --eval_steps " + std::to_string(c.eval_steps));
}

}  // namespace

void validate_sft_options(const SftConfig& c) {
  chat_template::parse_chat_template_kwargs(c.chat_template_kwargs, "--chat_template_kwargs");
  // Training length and batch.
  require("--max_steps", c.max_steps, c.max_steps == -1 || c.max_steps >= 1, "must be -1 (train --num_train_epochs) or >= 1");
  if (c.max_steps == -1)
    require("--num_train_epochs", c.num_train_epochs, c.num_train_epochs > 0, "must be > 0 and finite when --max_steps is -1");
  else
    require("--num_train_epochs", c.num_train_epochs, true, "must be a finite number");
  require("--per_device_train_batch_size", c.per_device_train_batch_size,
          c.per_device_train_batch_size >= 1 && c.per_device_train_batch_size <= kInt32Max, "must be in [1, 2147483647]");
  require("--per_device_eval_batch_size", c.per_device_eval_batch_size,
          c.per_device_eval_batch_size >= 1 && c.per_device_eval_batch_size <= kInt32Max, "must be in [1, 2147483647]");
  require("--gradient_accumulation_steps", c.gradient_accumulation_steps,
          c.gradient_accumulation_steps >= 1 && c.gradient_accumulation_steps <= kInt32Max, "must be in [1, 2147483647]");

  // Optimizer and schedule.
  // >= 0 as HF's TrainingArguments and TRL: a zero rate is a legitimate dry run (data, loss, logging).
  require("--learning_rate", c.learning_rate, c.learning_rate >= 0, "must be >= 0 and finite");
  require_fp32_finite("--learning_rate", c.learning_rate);
  require("--warmup_steps", c.warmup_steps, c.warmup_steps >= 0, "must be >= 0");
  if (c.max_steps >= 1 && c.warmup_steps >= c.max_steps)
    reject("--warmup_steps", std::to_string(c.warmup_steps),
           "must be < --max_steps " + std::to_string(c.max_steps) + " (a warmup that long never reaches the peak learning rate)");
  require("--warmup_ratio", c.warmup_ratio, c.warmup_ratio >= 0 && c.warmup_ratio < 1, "must be in [0, 1)");
  require("--weight_decay", c.weight_decay, c.weight_decay >= 0, "must be >= 0 and finite");
  require_fp32_finite("--weight_decay", c.weight_decay);
  require_beta("--adam_beta1", c.adam_beta1);
  require_beta("--adam_beta2", c.adam_beta2);
  require("--adam_epsilon", c.adam_epsilon, c.adam_epsilon > 0, "must be > 0 and finite");
  require_fp32_finite("--adam_epsilon", c.adam_epsilon);
  require("--max_grad_norm", c.max_grad_norm, c.max_grad_norm >= 0, "must be >= 0 and finite (0: no clipping)");

  // The per-token loss (kernels/token_loss.hpp).
  require("--label_smoothing_factor", c.label_smoothing_factor,
          c.label_smoothing_factor >= 0 && c.label_smoothing_factor <= 1, "must be in [0, 1] (0: no label smoothing)");
  if (c.loss_type != "nll" && c.loss_type != "dft")  // TRL's SFTTrainer accepts these two
    throw UserError("--loss_type " + c.loss_type + ": use nll (cross-entropy) or dft (TRL's Dynamic Fine-Tuning loss)");

  // Sequences (the data path holds lengths in int32).
  require("--max_length", c.max_length, c.max_length >= 2 && c.max_length <= kInt32Max, "must be in [2, 2147483647]");
  require("--pad_to_multiple_of", c.pad_to_multiple_of, c.pad_to_multiple_of >= 0 && c.pad_to_multiple_of <= kInt32Max,
          "must be in [0, 2147483647] (0: no padding multiple)");
  require("--loss_chunk_tokens", c.loss_chunk_tokens, c.loss_chunk_tokens >= 1, "must be >= 1");

  // Logging, evaluation, checkpoints.
  require("--logging_steps", c.logging_steps, c.logging_steps >= 0, "must be >= 0 (0: log the last step only)");
  require("--eval_steps", c.eval_steps, c.eval_steps >= 0, "must be >= 0 (0: evaluate after the last step only)");
  if (c.eval_strategy != "no" && c.eval_strategy != "steps")
    throw UserError("--eval_strategy " + c.eval_strategy + ": use no or steps (steps: every --eval_steps and after the "
                    "last step; epoch is not supported yet, set --eval_steps to the steps of an epoch)");
  require("--test_split_size", c.test_split_size, c.test_split_size >= 0 && c.test_split_size < 1,
          "must be a fraction in (0, 1) of the datasets: mixture's rows (0: no test split)");
  if (c.test_split_size > 0 && c.datasets.empty())
    throw UserError("--test_split_size cuts a test split off a datasets: mixture in --config (as TRL's "
                    "DatasetMixtureConfig), and there is none; with --dataset_name use its own test split "
                    "(--dataset_test_split) or drop test_split_size");
  require("--save_steps", c.save_steps, c.save_steps >= 0, "must be >= 0 (0: no checkpoints)");
  validate_best_model_options(c);
  require("--save_total_limit", c.save_total_limit, c.save_total_limit >= 0, "must be >= 0 (0: keep every checkpoint)");
  require("--peak_flops", c.peak_flops, c.peak_flops >= 0, "must be >= 0 and finite (0: measure the GEMM rate)");

  // Parallelism.
  require_parallel_size("--dp_replicate_size", c.dp_replicate_size);
  require("--dp_shard_size", c.dp_shard_size, c.dp_shard_size == -1 || (c.dp_shard_size >= 1 && c.dp_shard_size <= kInt32Max),
          "must be -1 (the rest of the world) or an integer in [1, 2147483647]");
  require_parallel_size("--tp_size", c.tp_size);
  require_parallel_size("--cp_size", c.cp_size);
  require_parallel_size("--sp_size", c.sp_size);
  require("--bucket_size_mb", c.bucket_size_mb, c.bucket_size_mb >= 1 && c.bucket_size_mb <= (int64_t{1} << 40),
          "must be in [1, 1099511627776]");
}

int64_t checked_total_steps(const SftConfig& c, int64_t steps_per_epoch, int64_t global_batch_size) {
  // The sampler indexes rows as slot * rows_of_step (< dp*accumulation * global batch): a global batch
  // below 2^31 keeps that in int64.
  if (global_batch_size > kInt32Max)
    throw UserError("global batch " + std::to_string(global_batch_size) +
                    " rows (--per_device_train_batch_size x data-parallel ranks x --gradient_accumulation_steps): must be "
                    "at most 2147483647");
  int64_t steps = c.max_steps;
  if (c.max_steps <= 0) {
    // Computed in double: 1e18 epochs x steps_per_epoch is far outside int64, and a cast of such a
    // double is undefined (it gave INT64_MIN, then 0 steps and an untrained model saved with exit 0).
    const double wanted = std::ceil(c.num_train_epochs * static_cast<double>(steps_per_epoch));
    if (!(wanted <= static_cast<double>(kMaxTrainingSteps)))
      throw UserError("--num_train_epochs " + number_text(c.num_train_epochs) + ": " + number_text(wanted) +
                      " optimizer steps (" + std::to_string(steps_per_epoch) + " per epoch); at most " +
                      std::to_string(kMaxTrainingSteps) + " (kMaxTrainingSteps): pass fewer epochs or --max_steps");
    steps = std::max<int64_t>(1, static_cast<int64_t>(wanted));
  } else if (steps > kMaxTrainingSteps) {
    throw UserError("--max_steps " + std::to_string(steps) + ": at most " + std::to_string(kMaxTrainingSteps) +
                    " (kMaxTrainingSteps)");
  }
  // Rows consumed (steps x global batch) and tokens trained (x max_length) are counted in int64.
  const __int128 tokens = static_cast<__int128>(steps) * global_batch_size * c.max_length;
  if (tokens > std::numeric_limits<int64_t>::max())
    throw UserError(std::to_string(steps) + " steps x global batch " + std::to_string(global_batch_size) +
                    " rows x --max_length " + std::to_string(c.max_length) +
                    " tokens overflow the 64-bit token count: pass fewer steps (--max_steps, --num_train_epochs)");
  return steps;
}

}  // namespace trlhpc
