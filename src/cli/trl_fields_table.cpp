// The table of every TRL argument (trl_fields.hpp): one entry per field of tests/fixtures/trl_fields.json,
// in its order. Only this data says what happens to a field; trl_fields.cpp applies it.
// Sources of the meanings: TRL 1.16 trl/trainer/sft_config.py, trl/trainer/model_config.py,
// trl/scripts/utils.py; transformers 5.25 training_args.py (read, not copied).
#include <cmath>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>

#include "trlhpc/cli/fsdp_config.hpp"
#include "trlhpc/cli/trl_fields.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace {

using H = TrlHandling;
using Flags = std::set<std::string>;

bool is_true(const std::string& v) { return trl_value_accepted("true", v); }

// dtype / torch_dtype: trlhpc loads and keeps weights in fp32; bfloat16 asks for its bf16 compute (--bf16).
void apply_dtype(const std::string& value, const Flags& explicit_flags, SftConfig& c) {
  if (trl_value_accepted("bfloat16|torch.bfloat16", value) && !explicit_flags.count("bf16")) c.bf16 = true;
}
void apply_use_cpu(const std::string& value, const Flags& explicit_flags, SftConfig& c) {
  if (is_true(value) && !explicit_flags.count("device")) c.device = "cpu";
}
// save_strategy no: no checkpoints, whatever save_steps says (transformers ignores save_steps then).
void apply_save_strategy(const std::string& value, const Flags&, SftConfig& c) {
  c.save_strategy = trl_value_accepted("no", value)      ? "no"
                    : trl_value_accepted("epoch", value) ? "epoch"
                    : trl_value_accepted("best", value)  ? "best"
                                                         : "steps";
  if (c.save_strategy == "no") c.save_steps = 0;
}
void apply_logging_strategy(const std::string& value, const Flags&, SftConfig& c) {
  c.logging_strategy = trl_value_accepted("no", value) ? "no" : trl_value_accepted("epoch", value) ? "epoch" : "steps";
}
// transformers' SequentialSampler is trlhpc's file order.
void apply_sampling(const std::string& value, const Flags& explicit_flags, SftConfig& c) {
  if (trl_value_accepted("sequential", value) && !explicit_flags.count("shuffle_dataset")) c.shuffle_dataset = false;
}
// Kept as text: the schedule type it belongs to is known only after parsing (optim/lr_scheduler.hpp).
void apply_lr_scheduler_kwargs(const std::string& value, const Flags&, SftConfig& c) {
  c.lr_scheduler_kwargs = trl_value_accepted("null", value) ? "" : value;
}
void apply_eval_on_start(const std::string& value, const Flags&, SftConfig& c) { c.eval_on_start = is_true(value); }
void apply_deepspeed(const std::string& value, const Flags&, SftConfig& c) {
  c.deepspeed = trl_value_accepted("null", value) ? "" : value;
}
void apply_fsdp(const std::string& value, const Flags&, SftConfig& c) {
  check_fsdp_words(value);
  c.fsdp = trl_value_accepted("null", value) ? "" : value;
}
void apply_fsdp_config(const std::string& value, const Flags&, SftConfig& c) {
  c.fsdp_config = trl_value_accepted("null", value) ? "" : value;
}
// data_seed: an integer >= 0 seeds the sampler only (transformers' data_seed); null: the sampler follows --seed.
void apply_data_seed(const std::string& value, const Flags&, SftConfig& c) {
  if (trl_value_accepted("null", value)) return c.data_seed.reset();
  size_t used = 0;
  unsigned long long seed = 0;
  try {
    seed = std::stoull(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || value.front() == '-')
    throw UserError("--data_seed '" + value + "': must be an integer >= 0 (the sampler's seed), or null to follow --seed");
  c.data_seed = seed;
}
void apply_save_only_model(const std::string& value, const Flags&, SftConfig& c) { c.save_only_model = is_true(value); }
void apply_load_best_model_at_end(const std::string& value, const Flags&, SftConfig& c) {
  c.load_best_model_at_end = is_true(value);
}
void apply_metric_for_best_model(const std::string& value, const Flags&, SftConfig& c) {
  c.metric_for_best_model = trl_value_accepted("null", value) ? "" : value;
}
void apply_greater_is_better(const std::string& value, const Flags&, SftConfig& c) {
  c.greater_is_better = trl_value_accepted("null", value) ? "" : is_true(value) ? "true" : "false";
}
void apply_truncation_mode(const std::string& value, const Flags&, SftConfig& c) {
  c.truncation_mode = trl_value_accepted("keep_end", value) ? "keep_end" : "keep_start";
}
// A token string, as TRL takes it (null: the tokenizer's own).
void apply_eos_token(const std::string& value, const Flags&, SftConfig& c) {
  c.eos_token = trl_value_accepted("null", value) ? "" : value;
}
void apply_pad_token(const std::string& value, const Flags&, SftConfig& c) {
  c.pad_token = trl_value_accepted("null", value) ? "" : value;
}
void apply_dataset_num_proc(const std::string& value, const Flags&, SftConfig& c) {
  if (trl_value_accepted("null", value)) return void(c.dataset_num_proc = 1);
  char* end = nullptr;
  const long long n = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || n < 1 || n > 1024)
    throw UserError("--dataset_num_proc '" + value + "': give a number of threads from 1 to 1024 (or null: 1)");
  c.dataset_num_proc = n;
}
void apply_neftune_noise_alpha(const std::string& value, const Flags&, SftConfig& c) {
  if (trl_value_accepted("null", value)) return void(c.neftune_noise_alpha = 0);
  char* end = nullptr;
  const double alpha = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(alpha >= 0) || !std::isfinite(alpha))
    throw UserError("--neftune_noise_alpha '" + value + "': give a non-negative number (NEFTune's paper uses 5, 10 or 15), "
                    "or null for no noise");
  c.neftune_noise_alpha = alpha;
}
void apply_logging_first_step(const std::string& value, const Flags&, SftConfig& c) { c.logging_first_step = is_true(value); }

constexpr const char* kNoHub =
    "no network on compute nodes: upload the output dir from a login node (hf upload ORG/NAME OUTPUT_DIR)";
constexpr const char* kAdamW =
    "adamw_torch|adamw_torch_fused|adamw_hf|adamw_torch_xla|adamw_torch_npu_fused|adamw_apex_fused";
constexpr const char* kUseAccelerate =
    "use --accelerate_config (zero1|zero2|zero3|fsdp1|fsdp2 or an accelerate YAML) or --sharding none|zero1|zero2|zero3";

const std::vector<TrlField> kTable = {
    // SFTConfig fields inherited from transformers' TrainingArguments.
    {"output_dir", H::honored, "*", "where metrics, checkpoints and the model go (null: trlhpc-output)", nullptr},
    {"per_device_train_batch_size", H::honored, "*", "rows per micro-batch per data-parallel rank", nullptr},
    {"num_train_epochs", H::honored, "*", "epochs when max_steps is -1", nullptr},
    {"max_steps", H::honored, "*", "optimizer steps (-1: use epochs)", nullptr},
    {"learning_rate", H::honored, "*", "peak learning rate", nullptr},
    {"lr_scheduler_type", H::honored, "*", "linear|cosine|cosine_with_min_lr|constant|constant_with_warmup (others refused by --lr_scheduler_type's check)", nullptr},
    {"lr_scheduler_kwargs", H::honored, "*", "a JSON object: num_cycles (cosine), min_lr_rate or min_lr (cosine_with_min_lr)",
     nullptr, nullptr, nullptr, apply_lr_scheduler_kwargs},
    {"warmup_steps", H::honored, "*", "linear warmup steps (an integer; for a fraction use --warmup_ratio)", nullptr},
    {"optim", H::honored, kAdamW, "trlhpc's AdamW (torch.optim.AdamW's update, decoupled weight decay)",
     "trlhpc implements AdamW only: use --optim adamw_torch"},
    {"optim_args", H::refused, "null|", "", "trlhpc's AdamW takes only --adam_beta1/--adam_beta2/--adam_epsilon/--weight_decay"},
    {"weight_decay", H::honored, "*", "AdamW decoupled weight decay (not on biases and norms)", nullptr},
    {"adam_beta1", H::honored, "*", "", nullptr},
    {"adam_beta2", H::honored, "*", "", nullptr},
    {"adam_epsilon", H::honored, "*", "", nullptr},
    {"optim_target_modules", H::refused, "null|[]", "", "GaLore/APOLLO optimizers are not built: use --optim adamw_torch"},
    {"gradient_accumulation_steps", H::honored, "*", "micro-batches per optimizer step", nullptr},
    {"average_tokens_across_devices", H::honored, "true", "the loss is normalised by the target tokens of all ranks",
     "trlhpc always normalises by the target tokens of all data-parallel ranks: leave it true"},
    {"max_grad_norm", H::honored, "*", "global-norm clipping (0: off)", nullptr},
    {"label_smoothing_factor", H::honored, "*", "transformers' LabelSmoother in the fused loss, train and eval: (1 - eps) nll + eps mean_v(-log p_v) per target token, over the global target count (ignored under loss_type dft, as TRL; also with --tp_size > 1, in the vocab-parallel loss)", nullptr},
    {"bf16", H::honored, "*", "bf16 mixed precision (null: off)", nullptr},
    {"fp16", H::refused, "false", "", "fp16 is not supported: use --bf16"},
    {"bf16_full_eval", H::refused, "false", "", "evaluation runs in the training precision: use --bf16"},
    {"fp16_full_eval", H::refused, "false", "", "fp16 is not supported: use --bf16"},
    {"tf32", H::mapped, "*", "trlhpc's fp32 GEMMs are full fp32 (no TF32); --bf16 is its fast path", nullptr,
     nullptr, nullptr, nullptr, false, "null|false"},
    {"activation_checkpointing", H::mapped, "*", "another name of --gradient_checkpointing", nullptr, "gradient_checkpointing"},
    {"activation_checkpointing_kwargs", H::no_op, "*", "use_reentrant has no meaning here: each layer is recomputed in backward", nullptr},
    {"gradient_checkpointing", H::honored, "*", "recompute layers in backward (TRL's default true; trlhpc's false)", nullptr},
    {"gradient_checkpointing_kwargs", H::no_op, "*", "use_reentrant has no meaning here: each layer is recomputed in backward", nullptr},
    {"torch_compile", H::no_op, "*", "trlhpc's kernels are compiled ahead of time", nullptr},
    {"torch_compile_backend", H::no_op, "*", "trlhpc's kernels are compiled ahead of time", nullptr},
    {"torch_compile_mode", H::no_op, "*", "trlhpc's kernels are compiled ahead of time", nullptr},
    {"use_liger_kernel", H::mapped, "*", "trlhpc's loss is always a chunked fused lm_head + cross-entropy (--loss_chunk_tokens)", nullptr,
     nullptr, nullptr, nullptr, false, "false"},
    {"liger_kernel_config", H::no_op, "*", "trlhpc's fused loss has no Liger options", nullptr},
    {"use_cache", H::no_op, "*", "no KV cache is kept in training", nullptr},
    {"neftune_noise_alpha", H::honored, "*", "NEFTune: uniform noise of +-alpha/sqrt(L*d) on the input embeddings of "
     "training passes (null: off; docs/guide/trl-arguments.md)", nullptr, nullptr, nullptr, apply_neftune_noise_alpha},
    {"torch_empty_cache_steps", H::no_op, "*", "no PyTorch caching allocator to empty", nullptr},
    {"auto_find_batch_size", H::refused, "false", "", "set --per_device_train_batch_size (trlhpc env shows the memory plan)"},
    {"logging_strategy", H::honored, "steps|epoch|no", "steps: every --logging_steps and the last step; epoch: after each "
     "epoch; no: no train lines (--logging_first_step still logs step 1)", "use steps, epoch or no", nullptr, nullptr,
     apply_logging_strategy},
    {"logging_steps", H::honored, "*", "", nullptr},
    {"logging_first_step", H::honored, "*", "also log the first step", nullptr, nullptr, nullptr, apply_logging_first_step},
    {"log_on_each_node", H::no_op, "*", "rank 0 writes the metrics", nullptr},
    {"logging_nan_inf_filter", H::no_op, "*", "a non-finite loss stops the run (or is skipped with --skip_nonfinite_steps), never averaged in", nullptr},
    {"include_num_input_tokens_seen", H::mapped, "*", "num_tokens is logged on every line", nullptr,
     nullptr, nullptr, nullptr, false, "no"},
    {"log_level", H::no_op, "*", "trlhpc's messages have no levels", nullptr},
    {"log_level_replica", H::no_op, "*", "only rank 0 prints progress", nullptr},
    {"disable_tqdm", H::no_op, "*", "no progress bar", nullptr},
    {"report_to", H::honored, "*", "none|tensorboard|all (all: tensorboard)", nullptr},
    {"run_name", H::no_op, "*", "names a tracker run; trlhpc's only tracker, TensorBoard, is named by --logging_dir", nullptr},
    {"project", H::no_op, "*", "a trackio project: no trackio here", nullptr},
    {"trackio_space_id", H::refused, "null", "", kNoHub},
    {"trackio_bucket_id", H::refused, "null", "", kNoHub},
    {"trackio_static_space_id", H::refused, "null", "", kNoHub},
    {"eval_strategy", H::honored, "*", "no|steps", nullptr},
    {"eval_steps", H::honored, "*", "(null: logging_steps)", nullptr},
    {"eval_delay", H::refused, "0", "", "not implemented: leave it 0"},
    {"per_device_eval_batch_size", H::honored, "*", "rows per evaluation micro-batch per data-parallel rank", nullptr},
    {"prediction_loss_only", H::no_op, "*", "evaluation computes the loss (and token metrics) only", nullptr},
    {"eval_on_start", H::honored, "*", "evaluate before the first step too (an eval line at step 0)", nullptr, nullptr,
     nullptr, apply_eval_on_start},
    {"eval_do_concat_batches", H::no_op, "*", "no predictions are gathered", nullptr},
    {"eval_use_gather_object", H::no_op, "*", "no predictions are gathered", nullptr},
    {"eval_accumulation_steps", H::no_op, "*", "no predictions are accumulated", nullptr},
    {"include_for_metrics", H::refused, "[]|null", "", "there is no compute_metrics: leave it empty"},
    {"batch_eval_metrics", H::refused, "false", "", "there is no compute_metrics: leave it false"},
    {"save_only_model", H::honored, "*", "true: checkpoints hold the parameters only (no AdamW moments, step count or data position; about a third of the size), for trlhpc export / generate / load_best_model_at_end; resuming from one is refused (transformers would restart the optimizer silently)",
     nullptr, nullptr, nullptr, apply_save_only_model},
    {"save_strategy", H::honored, "steps|epoch|no|best", "steps: every --save_steps; epoch: after each epoch and the last "
     "step; best: after each evaluation that improves --metric_for_best_model; no: no checkpoints",
     "use steps, epoch, best or no", nullptr, nullptr, apply_save_strategy},
    {"save_steps", H::honored, "*", "(TRL's default 500; trlhpc's 0: no checkpoints)", nullptr},
    {"save_on_each_node", H::refused, "false", "", "not supported: trlhpc writes one checkpoint per save into --output_dir"},
    {"save_total_limit", H::honored, "*", "(null: keep all; 1 with a best checkpoint: only the best is left at the end)", nullptr},
    {"enable_jit_checkpoint", H::refused, "false", "", "trlhpc checkpoints on SIGTERM/SIGUSR1 by itself (docs/guide/checkpoints-and-preemption.md): leave it false"},
    {"push_to_hub", H::refused, "false", "", kNoHub},
    {"hub_token", H::no_op, "*", "used only by push_to_hub (refused)", nullptr, nullptr, nullptr, nullptr, true},
    {"hub_private_repo", H::no_op, "*", "used only by push_to_hub (refused)", nullptr},
    {"hub_model_id", H::no_op, "*", "used only by push_to_hub (refused)", nullptr},
    {"hub_strategy", H::no_op, "*", "used only by push_to_hub (refused)", nullptr},
    {"hub_always_push", H::no_op, "*", "used only by push_to_hub (refused)", nullptr},
    {"hub_revision", H::no_op, "*", "used only by push_to_hub (refused)", nullptr},
    {"load_best_model_at_end", H::honored, "*", "the saved model is the best checkpoint's (save and eval strategies must match unless save_strategy best; the best checkpoint survives --save_total_limit)",
     nullptr, nullptr, nullptr, apply_load_best_model_at_end},
    {"metric_for_best_model", H::honored, "*", "eval_loss (default with load_best_model_at_end), eval_entropy or eval_mean_token_accuracy; the eval_ prefix is optional",
     nullptr, nullptr, nullptr, apply_metric_for_best_model},
    {"greater_is_better", H::honored, "null|true|false", "null: true unless the metric ends in loss",
     "use true or false", nullptr, nullptr, apply_greater_is_better},
    {"ignore_data_skip", H::refused, "false", "", "a resumed run always continues at the next row: leave it false"},
    {"restore_callback_states_from_checkpoint", H::no_op, "*", "no callbacks", nullptr},
    {"full_determinism", H::mapped, "*", "trlhpc's reductions have a fixed order whatever this says", nullptr,
     nullptr, nullptr, nullptr, false, "false"},
    {"seed", H::honored, "*", "init and data-order seed", nullptr},
    {"data_seed", H::honored, "*", "seeds the sampler's shuffle only (null: --seed); model init, LoRA dropout and the packing shuffle follow --seed, as in transformers",
     nullptr, nullptr, nullptr, apply_data_seed},
    {"use_cpu", H::mapped, "*", "true: --device cpu", nullptr, nullptr, nullptr, apply_use_cpu, false, "false"},
    {"accelerator_config", H::refused, "null|{}", "", "put accelerate settings in --accelerate_config FILE"},
    {"parallelism_config", H::refused, "null", "", "use --dp_replicate_size/--dp_shard_size/--tp_size/--cp_size/--sp_size or --accelerate_config"},
    {"dataloader_drop_last", H::honored, "*", "", nullptr},
    {"dataloader_num_workers", H::no_op, "*", "rows are read and tokenized by the training process (cached in --dataset_cache_dir)", nullptr},
    {"dataloader_pin_memory", H::no_op, "*", "no PyTorch DataLoader", nullptr},
    {"dataloader_persistent_workers", H::no_op, "*", "no PyTorch DataLoader", nullptr},
    {"dataloader_prefetch_factor", H::no_op, "*", "no PyTorch DataLoader", nullptr},
    {"dataloader_multiprocessing_context", H::no_op, "*", "no PyTorch DataLoader", nullptr},
    {"dataloader_in_order", H::no_op, "*", "no DataLoader workers to reorder", nullptr},
    {"remove_unused_columns", H::no_op, "*", "only the columns of the dataset's format are read", nullptr},
    {"label_names", H::refused, "null|[]", "", "labels come from the tokenized rows: leave it unset"},
    {"train_sampling_strategy", H::mapped, "random|sequential", "random: shuffled rows; sequential: --shuffle_dataset false",
     "use random or sequential (group_by_length is not implemented)", nullptr, nullptr, apply_sampling, false, "random"},
    {"length_column_name", H::no_op, "*", "used only by group_by_length", nullptr},
    {"ddp_find_unused_parameters", H::no_op, "*", "every parameter gets a gradient each step", nullptr},
    {"ddp_bucket_cap_mb", H::mapped, "*", "--bucket_size_mb", nullptr, "bucket_size_mb"},
    {"ddp_broadcast_buffers", H::no_op, "*", "the models have no buffers to broadcast", nullptr},
    {"ddp_static_graph", H::no_op, "*", "no autograd graph", nullptr},
    {"ddp_backend", H::no_op, "*", "communication is MPI (device collectives chosen with --device)", nullptr},
    {"ddp_timeout", H::honored, "*", "seconds a collective may wait (0: no limit)", nullptr},
    {"fsdp", H::mapped, "*", "full_shard|shard_grad_op|no_shard|hybrid_shard|hybrid_shard_zero2 (one), offload, "
     "auto_wrap (a string or list; true: all from --fsdp_config) onto --sharding zero3|zero2|none and CPU offload, "
     "as --accelerate_config's FSDP (cli/fsdp_config.hpp)", nullptr, nullptr, nullptr, apply_fsdp, false, "*"},
    {"fsdp_config", H::mapped, "*", "a JSON file or object (keys with or without fsdp_): version, reshard_after_forward, "
     "cpu_offload/offload_params, activation_checkpointing; no-op keys only with their no-op values (cli/fsdp_config.hpp)",
     nullptr, nullptr, nullptr, apply_fsdp_config, false, "*"},
    {"deepspeed", H::mapped, "*", "a DeepSpeed JSON (file or object): ZeRO stage, offload, bf16, batch and clipping onto "
     "trlhpc's strategies (cli/deepspeed_config.hpp)", nullptr, nullptr, nullptr, apply_deepspeed, false, "null"},
    {"debug", H::refused, "|[]|null", "", "underflow_overflow and tpu_metrics_debug are not built"},
    {"skip_memory_metrics", H::no_op, "*", "trlhpc env shows the memory plan", nullptr},
    {"do_train", H::no_op, "*", "trlhpc sft always trains", nullptr},
    {"do_eval", H::no_op, "*", "evaluation follows --eval_strategy", nullptr},
    {"do_predict", H::no_op, "*", "used only by example scripts", nullptr},
    {"resume_from_checkpoint", H::honored, "*", "DIR, latest or auto", nullptr},
    {"local_rank", H::no_op, "*", "ranks come from MPI", nullptr},
    // SFTConfig's own fields.
    {"model_init_kwargs", H::refused, "null|{}", "", "trlhpc loads the model itself: use --dtype / --attn_implementation"},
    {"trust_remote_code", H::no_op, "*", "no model code is ever run from the hub: only trlhpc's built-in families load", nullptr},
    {"router_aux_loss_coef", H::refused, "null", "", "no mixture-of-experts models: leave it unset"},
    {"chat_template_path", H::honored, "*", "", nullptr},
    {"dataset_text_field", H::honored, "*", "", nullptr},
    {"dataset_kwargs", H::refused, "null|{}", "", "trlhpc always prepares (tokenizes) the dataset: leave it empty"},
    {"dataset_num_proc", H::honored, "*", "threads that tokenize the dataset (null: 1); the examples and the cache file are "
     "the same for every value", nullptr, nullptr, nullptr, apply_dataset_num_proc},
    {"eos_token", H::honored, "*", "replaces the tokenizer's eos token: appended to text and completions, the chat "
     "template's eos_token (must be in the vocabulary)", nullptr, nullptr, nullptr, apply_eos_token},
    {"max_length", H::honored, "*", "tokens per example / packed row", nullptr},
    {"truncation_mode", H::honored, "keep_start|keep_end", "which end of a row longer than max_length is kept (packing: "
     "the start, as TRL)", "use keep_start or keep_end", nullptr, nullptr, apply_truncation_mode},
    {"shuffle_dataset", H::honored, "*", "(TRL's default false; trlhpc's true)", nullptr},
    {"packing", H::honored, "*", "", nullptr},
    {"packing_strategy", H::honored, "*", "bfd|wrapped", nullptr},
    {"padding_free", H::honored, "*", "", nullptr},
    {"pad_to_multiple_of", H::honored, "*", "auto and null: no padding multiple (TRL's auto off Neuron)", nullptr, nullptr,
     "auto=0|none=0|null=0"},
    {"eval_packing", H::refused, "null", "", "evaluation packs as --packing says: leave it unset"},
    {"completion_only_loss", H::honored, "*", "(null: auto)", nullptr},
    {"assistant_only_loss", H::honored, "*", "", nullptr},
    {"loss_type", H::honored, "*", "nll: token-mean cross-entropy; dft: TRL's DFT, each token's nll times its detached probability (also with --tp_size > 1, in the vocab-parallel loss)", nullptr},
    {"activation_offloading", H::refused, "false", "", "not implemented: use --gradient_checkpointing, or CPU offload in --accelerate_config"},
    {"pad_token", H::honored, "*", "the padding token (null: the tokenizer's, else its eos token; must be in the "
     "vocabulary)", nullptr, nullptr, nullptr, apply_pad_token},
    // ModelConfig.
    {"model_name_or_path", H::honored, "*", "", nullptr},
    {"model_revision", H::honored, "*", "", nullptr},
    {"dtype", H::mapped, "float32|torch.float32|auto|null|bfloat16|torch.bfloat16",
     "float32/auto: fp32 weights (as loaded); bfloat16: --bf16 (bf16 compute, fp32 master weights) unless --bf16 is given",
     "float16 is not supported: use --dtype bfloat16 or --bf16", nullptr, nullptr, apply_dtype, false,
     "float32|torch.float32|auto|null"},
    {"attn_implementation", H::mapped, "*", "trlhpc always uses its own flash-style tiled attention", nullptr,
     nullptr, nullptr, nullptr, false, "null"},
    {"use_peft", H::honored, "*", "", nullptr},
    {"lora_r", H::honored, "*", "", nullptr},
    {"lora_alpha", H::honored, "*", "", nullptr},
    {"lora_dropout", H::honored, "*", "", nullptr},
    {"lora_target_modules", H::honored, "*", "(null: q_proj v_proj)", nullptr},
    {"lora_target_parameters", H::refused, "null|[]", "", "no expert parameters to adapt: use --lora_target_modules"},
    {"lora_modules_to_save", H::honored, "*", "", nullptr},
    {"lora_task_type", H::honored, "CAUSAL_LM", "", "trlhpc trains causal LMs: use CAUSAL_LM"},
    {"use_rslora", H::honored, "*", "", nullptr},
    {"use_dora", H::honored, "*", "(true is refused by --use_dora's check)", nullptr},
    {"load_in_8bit", H::refused, "false", "", "no bitsandbytes quantisation: use --use_peft on the fp32 or --bf16 model"},
    {"load_in_4bit", H::refused, "false", "", "no bitsandbytes quantisation: use --use_peft on the fp32 or --bf16 model"},
    {"bnb_4bit_quant_type", H::no_op, "*", "used only by load_in_4bit (refused)", nullptr},
    {"use_bnb_nested_quant", H::no_op, "*", "used only by load_in_4bit (refused)", nullptr},
    {"bnb_4bit_quant_storage", H::no_op, "*", "used only by load_in_4bit (refused)", nullptr},
    // ScriptArguments.
    {"dataset_name", H::honored, "*", "", nullptr},
    {"dataset_config", H::honored, "*", "", nullptr},
    {"dataset_train_split", H::honored, "*", "", nullptr},
    {"dataset_test_split", H::honored, "*", "", nullptr},
    {"dataset_streaming", H::no_op, "*", "rows are streamed from disk either way", nullptr},
    {"ignore_bias_buffers", H::no_op, "*", "the models have no bias buffers", nullptr},
    // DatasetMixtureConfig.
    {"datasets", H::honored, "[]|null", "the dataset mixture, a list in --config FILE.yaml", "give the mixture as the datasets: list of --config FILE.yaml"},
    {"streaming", H::no_op, "*", "rows are streamed from disk either way", nullptr},
    {"test_split_size", H::honored, "*", "(null: no test split)", nullptr},
    // Older spellings (TRL < 0.20/0.23, transformers 4).
    {"max_seq_length", H::mapped, "*", "TRL < 0.20's name of --max_length", nullptr, "max_length"},
    {"dataset_batch_size", H::no_op, "*", "TRL < 0.20's tokenization batch: tokenization is not batched", nullptr},
    {"torch_dtype", H::mapped, "*", "the older name of --dtype", nullptr, "dtype"},
    {"evaluation_strategy", H::mapped, "*", "transformers < 4.46's name of --eval_strategy", nullptr, "eval_strategy"},
    {"per_gpu_train_batch_size", H::mapped, "*", "the older name of --per_device_train_batch_size", nullptr, "per_device_train_batch_size"},
    {"per_gpu_eval_batch_size", H::mapped, "*", "the older name of --per_device_eval_batch_size", nullptr, "per_device_eval_batch_size"},
    {"overwrite_output_dir", H::honored, "*", "a fresh run replaces an earlier run's files", nullptr},
    {"logging_dir", H::honored, "*", "TensorBoard folder", nullptr},
    {"warmup_ratio", H::honored, "*", "warmup as a fraction of the steps", nullptr},
    {"no_cuda", H::mapped, "*", "the older name of --use_cpu", nullptr, "use_cpu"},
    {"use_mps_device", H::refused, "false", "", "no Apple MPS backend: use --device cpu or cuda"},
    {"fp16_backend", H::no_op, "*", "fp16 is not supported (use --bf16)", nullptr},
    {"half_precision_backend", H::no_op, "*", "bf16 is trlhpc's own (--bf16)", nullptr},
    {"push_to_hub_model_id", H::no_op, "*", "used only by push_to_hub (refused)", nullptr},
    {"push_to_hub_organization", H::no_op, "*", "used only by push_to_hub (refused)", nullptr},
    {"push_to_hub_token", H::no_op, "*", "used only by push_to_hub (refused)", nullptr, nullptr, nullptr, nullptr, true},
    {"tpu_num_cores", H::refused, "null", "", "no TPUs: use --device cpu or cuda"},
    {"jit_mode_eval", H::no_op, "*", "trlhpc's kernels are compiled ahead of time", nullptr},
    {"use_ipex", H::no_op, "*", "trlhpc's CPU kernels are its own", nullptr},
};

}  // namespace

const std::vector<TrlField>& trl_fields() { return kTable; }

}  // namespace trlhpc
