#pragma once
// SftConfig: every option of `trlhpc sft` (CONTRACT.md), named and defaulted as TRL's SFTConfig /
// TrainingArguments. Filled by cli/sft_options from flags and --config YAML; consumed as a value.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trlhpc/data/dataset/dataset_source.hpp"

namespace trlhpc {

struct SftConfig {
  // Model and data.
  std::string model_name_or_path;   // HF directory, or a hub id resolved in the local HF cache (cli/hub_names)
  std::string model_revision = "main";  // branch, tag or commit sha of a hub id (TRL's ModelConfig)
  std::string model_config;         // config.json for a randomly initialised model
  std::string tokenizer;            // tokenizer directory (defaults to model_name_or_path)
  std::string dataset_name;         // .jsonl/.json/.parquet file, directory, or hub id in the HF cache
  std::string dataset_config;       // TRL's --dataset_config: a config of the dataset card, else its <name>/ folder
  std::string dataset_train_split = "train";
  std::string dataset_test_split = "test";  // the eval rows when eval_strategy is not "no" (TRL's ScriptArguments)
  std::string dataset_text_field = "text";
  std::string eval_dataset;         // trlhpc extra: a separate held-out dataset (its dataset_test_split split)
  // TRL's DatasetMixtureConfig, from the `datasets:` list of the --config YAML (dataset_mixture.hpp):
  // when set it replaces --dataset_name; test_split_size (0: none) cuts a test side off the mixture.
  std::vector<dataset::DatasetEntry> datasets;
  std::string datasets_config_file;  // the YAML file `datasets` came from, for messages
  bool streaming = false;            // accepted for TRL configs; trlhpc always streams rows from disk
  double test_split_size = 0;
  std::string chat_template_path;
  std::string chat_template_kwargs;  // JSON object of template variables, e.g. {"enable_thinking": false}
  std::string output_dir = "trlhpc-output";
  bool overwrite_output_dir = false;  // a fresh run removes an earlier run's files (train/output_dir.hpp)
  bool skip_bad_rows = false;
  std::string dataset_cache_dir;    // tokenized-dataset cache; empty: <output_dir>/.dataset_cache; "none": off

  // Training.
  int64_t max_steps = -1;
  double num_train_epochs = 3.0;
  int64_t per_device_train_batch_size = 8;
  int64_t per_device_eval_batch_size = 8;  // rows per evaluation micro-batch per dp rank (TrainingArguments)
  int64_t gradient_accumulation_steps = 1;
  double learning_rate = 2e-5;
  std::string lr_scheduler_type = "linear";
  std::string lr_scheduler_kwargs;  // JSON object, transformers' scheduler_specific_kwargs (optim/lr_scheduler.hpp)
  int64_t warmup_steps = 0;
  double warmup_ratio = 0.0;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8;
  double max_grad_norm = 1.0;
  // The per-token loss (kernels/token_loss.hpp): TrainingArguments' label_smoothing_factor (transformers'
  // LabelSmoother) and TRL's loss_type, "nll" or "dft" (which ignores label smoothing, as TRL does).
  double label_smoothing_factor = 0.0;
  std::string loss_type = "nll";
  uint64_t seed = 42;
  // TrainingArguments' data_seed: the sampler's shuffle only (model init, LoRA dropout and TRL's packing
  // shuffle follow --seed, as in transformers); unset: the sampler follows --seed.
  std::optional<uint64_t> data_seed;
  int64_t max_length = 1024;
  // TRL's truncation_mode: "keep_start" or "keep_end" (rows longer than max_length keep their end; not
  // when packing, where TRL's packer keeps the start).
  std::string truncation_mode = "keep_start";
  // TRL's eos_token / pad_token: replace the tokenizer's (data/dataset/special_tokens.hpp); empty: unset.
  std::string eos_token, pad_token;
  int64_t dataset_num_proc = 1;  // TRL's dataset_num_proc: threads that tokenize the dataset (same result)
  // TRL's / transformers' neftune_noise_alpha: NEFTune noise on the input embeddings of training passes
  // (model/neftune.hpp); 0: off.
  double neftune_noise_alpha = 0;
  bool packing = false;
  std::string packing_strategy = "bfd";
  bool padding_free = false;
  int64_t pad_to_multiple_of = 0;
  std::string completion_only_loss = "auto";  // auto | true | false
  bool assistant_only_loss = false;
  bool gradient_checkpointing = false;
  bool bf16 = false;
  // model.safetensors of the final save: "auto" (the input config's torch_dtype: bfloat16 stays
  // bfloat16, anything else float32), "float32" or "bfloat16". Checkpoints always hold fp32.
  std::string save_dtype = "auto";
  // Under --bf16, what Ulysses' attention-gradient all-to-alls carry: "fp32" (exact) or "bf16"
  // (accelerate / DeepSpeed ALST's seq_parallel_communication_data_type; half the bytes).
  std::string seq_parallel_communication_data_type = "fp32";
  int64_t logging_steps = 10;
  bool logging_first_step = false;  // TrainingArguments': also log after the first step (TRL argument table)
  // TrainingArguments' logging_strategy / save_strategy: "steps" (every logging_steps / save_steps), "epoch"
  // (after each epoch's last step, and after the last step) or "no" (no train lines / no checkpoints).
  std::string logging_strategy = "steps";
  std::string save_strategy = "steps";
  // Where the logged metrics also go besides metrics.jsonl: "tensorboard" (event files under
  // logging_dir, written by rank 0) or "none". HF's report_to, with transformers 5's default (4.x
  // defaulted to "all"); "all" means every integration trlhpc has, i.e. tensorboard.
  std::string report_to = "none";
  // TensorBoard folder (transformers 4's --logging_dir; 5 reads TENSORBOARD_LOGGING_DIR); empty:
  // <output_dir>/runs/<Mon DD_HH-MM-SS>_<host>, transformers' default.
  std::string logging_dir;
  bool plot = false;                // trlhpc extra: draw <output_dir>/loss.png from metrics.jsonl at the end (`trlhpc plot`)
  int64_t save_steps = 0;
  int64_t save_total_limit = 0;
  // TrainingArguments' save_only_model: checkpoints hold the parameters only (no AdamW moments, step count
  // or data position), for export and evaluation; resuming from one is refused (checkpoint.hpp).
  bool save_only_model = false;
  bool async_save = false;          // write checkpoints from a background thread (async_save.hpp)
  std::string resume_from_checkpoint;
  int64_t eval_steps = 0;
  // TrainingArguments' eval_strategy: "no" (default) or "steps" (every eval_steps, and after the last
  // step). Evaluation runs when it is "steps" or --eval_dataset is given.
  std::string eval_strategy = "no";
  bool eval_on_start = false;  // TrainingArguments': also evaluate before the first step (logged at step 0)
  // TrainingArguments' best-model selection (train/best_model.hpp): the metric ("" = none; "loss" and
  // "eval_loss" alike), whether higher is better ("" = TrainingArguments' default: not a loss; "true",
  // "false"), and whether the run's final model is the best checkpoint's. save_strategy "best" saves a
  // checkpoint whenever the metric improves.
  std::string metric_for_best_model;
  std::string greater_is_better;
  bool load_best_model_at_end = false;
  bool shuffle_dataset = true;
  // HF's dataloader_drop_last (default false): true drops the incomplete last batch of per_device x dp
  // rows of each epoch; false keeps it as a smaller last step (batching/sampler.hpp).
  bool dataloader_drop_last = false;
  double peak_flops = 0;            // per rank; 0 = measure the GEMM rate
  int64_t loss_chunk_tokens = 1024; // rows of logits materialised at once by the fused loss
  // A step whose loss or gradient norm is NaN/inf: false (default) stops the job with an error naming
  // the step and the first parameter; true skips the update and counts it (metrics skipped_steps).
  bool skip_nonfinite_steps = false;

  // PEFT LoRA, TRL's ModelConfig flags (docs/guide/lora.md): --use_peft trains adapters on a frozen base.
  bool use_peft = false;
  int64_t lora_r = 16;
  double lora_alpha = 32;
  double lora_dropout = 0.05;
  std::vector<std::string> lora_target_modules;  // empty: PEFT's default for Qwen2/Llama (q_proj, v_proj)
  std::vector<std::string> lora_modules_to_save;
  bool use_rslora = false;
  bool use_dora = false;

  // Parallelism.
  std::string accelerate_config;
  std::string deepspeed;  // TrainingArguments' --deepspeed: a DeepSpeed JSON file or object (cli/deepspeed_config.hpp)
  // TrainingArguments' --fsdp (its words, or a list's JSON text; "" = off) and --fsdp_config (a JSON file
  // or object), read by cli/fsdp_config.hpp onto sharding / offload / gradient_checkpointing.
  std::string fsdp, fsdp_config;
  int64_t dp_replicate_size = 1, dp_shard_size = -1, tp_size = 1, cp_size = 1, sp_size = 1;
  bool tp_sequence_parallel = false;  // Megatron sequence parallelism inside the tp group
  std::string sharding = "none";    // none (DDP) | zero1 | zero2 | zero3 (set from accelerate profiles)
  int64_t bucket_size_mb = 25;
  // CPU offload, set from the accelerate config (DeepSpeed offload_optimizer_device / offload_param_device,
  // FSDP fsdp_offload_params): "none" | "optimizer" | "parameters"; offload_source names the key and
  // file for messages.
  std::string offload = "none";
  std::string offload_source;
  std::string device = "auto";
  // Seconds one collective may wait before the job ends with exit 2 and a report naming the step, the
  // collective, the group and the ranks that had not arrived (HF's --ddp_timeout; 0: wait forever).
  double ddp_timeout = 1800;
  // Who advances non-blocking communication while compute runs: "thread" (a progress thread tests it,
  // needs MPI_THREAD_MULTIPLE, else falls back with a warning) or "none" (only the strategies' own
  // test() calls between units and attention blocks). progress_thread.hpp; measured in bench/RESULTS.md.
  std::string comm_progress = "thread";
  // The kernel engines (BackendOptions, docs/CONTRACT.md "Kernel choices"): CPU fp32 GEMM, CPU bf16
  // GEMM, CUDA attention; "auto" picks by cpuid / measurement.
  std::string cpu_gemm = "auto";
  std::string cpu_bf16_gemm = "auto";
  std::string cuda_attention = "auto";
};

}  // namespace trlhpc
