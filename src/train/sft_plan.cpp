#include "trlhpc/train/sft_plan.hpp"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <optional>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/peft_adapter.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/parallel/data_parallel/data_parallel.hpp"
#include "trlhpc/train/checkpoint/checkpoint.hpp"
#include "trlhpc/train/checkpoint/manifest.hpp"
#include "trlhpc/train/sft_validation.hpp"

namespace trlhpc {
namespace {

void require_supported(const SftConfig& c) {
  if (c.output_dir.empty()) throw UserError("--output_dir must not be empty");
  if (c.dataset_name.empty() && c.datasets.empty())
    throw UserError("no dataset: pass --dataset_name PATH (.jsonl/.json/.parquet file, folder or hub id) or a datasets: list in --config");
  if (c.seq_parallel_communication_data_type != "fp32" && c.seq_parallel_communication_data_type != "bf16")
    throw UserError("--seq_parallel_communication_data_type " + c.seq_parallel_communication_data_type +
                    " is not one of fp32, bf16");
  if (c.save_dtype != "auto" && c.save_dtype != "float32" && c.save_dtype != "bfloat16")
    throw UserError("--save_dtype " + c.save_dtype + " is not one of auto, float32, bfloat16");
}

// The accelerate config's offload on the sharding that will run (--sharding may override the file's),
// refused before any collective with the key and the file named.
Offload parse_offload(const SftConfig& c) {
  if (c.offload == "none") return Offload::None;
  const Offload offload = c.offload == "parameters" ? Offload::Parameters : Offload::Optimizer;
  if (c.offload != "parameters" && c.offload != "optimizer")
    throw UserError("offload '" + c.offload + "' is not one of none, optimizer, parameters");
  const ShardingKind sharding = parse_sharding(c.sharding);
  if (sharding == ShardingKind::None)
    throw UserError(c.offload_source + ": CPU offload needs a sharded optimizer, but sharding is " + c.sharding +
                    " (DDP): use ZeRO stage 1-3 / FSDP, drop --sharding, or turn the offload off");
  if (offload == Offload::Parameters && sharding != ShardingKind::Zero3)
    throw UserError(c.offload_source + ": parameter offload needs sharding zero3, but sharding is " + c.sharding +
                    " (every rank keeps the full parameters on its device): drop --sharding or turn the offload off");
  return offload;
}

ModelConfig load_model_config(const SftConfig& c, const std::string& model_dir) {
  if (!c.model_name_or_path.empty() && !c.model_config.empty())
    throw UserError("give either --model_name_or_path or --model_config, not both");
  if (!model_dir.empty()) return ModelConfig::from_file(model_dir + "/config.json");
  if (!c.model_config.empty()) return ModelConfig::from_file(c.model_config);
  throw UserError("no model: pass --model_name_or_path DIR (a Hugging Face directory) or --model_config FILE");
}

// The mesh the flags ask for, resolved for the world size.
ParallelDims requested_dims(const SftConfig& c, int world_size) {
  return ParallelDims{static_cast<int>(c.dp_replicate_size), static_cast<int>(c.dp_shard_size),
                      static_cast<int>(c.cp_size), static_cast<int>(c.sp_size), static_cast<int>(c.tp_size),
                      c.tp_sequence_parallel}
      .resolved(world_size);
}

// `resolved` checked against the model's heads, intermediate size and vocabulary and the sequence
// length, with the model's kv_share.
ParallelDims model_dims(const ParallelDims& resolved, const ModelConfig& model, const SftConfig& c) {
  const ParallelDims dims = resolved.for_model(static_cast<int>(model.num_attention_heads),
                                               static_cast<int>(model.num_key_value_heads));
  validate_tensor_parallel(model, dims.tp);  // vocab_size and intermediate_size split by tp too
  dims.validate_sequence(c.max_length, c.pad_to_multiple_of);
  return dims;
}

// --use_peft, or an adapter directory as --model_name_or_path (transformers' PEFT integration: the
// adapter's base is loaded and the adapter trained on; its adapter_config.json wins over the --lora_*
// flags). Fills the plan's base/adapter directories; returns the adapter config, or none.
// The adapters' dropout masks follow --seed. For an adapter directory, --lora_dropout given on the
// command line (any value but TRL's default 0.05) overrides its adapter_config.json's lora_dropout.
LoraConfig with_seed(LoraConfig lora, const SftConfig& c) {
  if (!(lora.dropout >= 0 && lora.dropout < 1))
    throw UserError("lora_dropout " + std::to_string(lora.dropout) + " must be in [0, 1)");
  lora.dropout_seed = c.seed;
  return lora;
}

std::optional<LoraConfig> plan_lora(const SftConfig& c, SftPlan& plan) {
  plan.base_model_dir = c.model_name_or_path;
  plan.base_model_name = c.model_name_or_path;
  if (!c.model_name_or_path.empty() && is_peft_adapter_dir(c.model_name_or_path)) {
    const PeftAdapterDir adapter(c.model_name_or_path);
    if (adapter.base_model_dir().empty())
      throw UserError(c.model_name_or_path + "/" + kPeftConfigFile + ": base_model_name_or_path \"" +
                      adapter.base_model_name() + "\" is not a model directory (as given, or relative to the adapter); "
                      "edit it to the base model's path");
    plan.adapter_dir = c.model_name_or_path;
    plan.base_model_dir = adapter.base_model_dir();
    // Saved adapters name the base as it was found (an absolute path when it lay relative to the adapter).
    plan.base_model_name = adapter.base_model_dir();
    LoraConfig lora = adapter.lora();
    if (c.lora_dropout != SftConfig{}.lora_dropout) lora.dropout = c.lora_dropout;
    return with_seed(lora, c);
  }
  if (!c.use_peft) return std::nullopt;
  if (c.use_dora) throw UserError("--use_dora: DoRA adapters are not supported; train plain LoRA (drop --use_dora)");
  LoraConfig lora;
  lora.r = c.lora_r;
  lora.alpha = c.lora_alpha;
  lora.dropout = c.lora_dropout;
  lora.use_rslora = c.use_rslora;
  if (!c.lora_target_modules.empty()) lora.target_modules = c.lora_target_modules;
  lora.modules_to_save = c.lora_modules_to_save;
  return with_seed(lora, c);
}

TrainerOptions trainer_options(const SftConfig& c) {
  TrainerOptions o;
  o.parallel.data_parallel.sharding = parse_sharding(c.sharding);
  o.parallel.data_parallel.offload = parse_offload(c);
  o.parallel.data_parallel.bucket_elements = c.bucket_size_mb * 1024 * 1024 / 4;
  o.parallel.gradient_checkpointing = c.gradient_checkpointing;
  o.parallel.loss_chunk_tokens = c.loss_chunk_tokens;
  // TRL's SFTTrainer applies label smoothing only under loss_type nll (the DFT loss ignores it).
  o.parallel.token_loss.dft = c.loss_type == "dft";
  o.parallel.token_loss.label_smoothing = o.parallel.token_loss.dft ? 0.0f : static_cast<float>(c.label_smoothing_factor);
  o.parallel.sp_gradient_dtype = c.seq_parallel_communication_data_type == "bf16" ? DType::BF16 : DType::F32;
  o.adamw = {static_cast<float>(c.adam_beta1), static_cast<float>(c.adam_beta2), static_cast<float>(c.adam_epsilon),
             static_cast<float>(c.weight_decay)};
  o.max_grad_norm = c.max_grad_norm;
  return o;
}

// HF's TrainingArguments: report_to names integrations ("all": every installed one; trlhpc has one);
// logging_dir defaults to runs/<%b%d_%H-%M-%S>_<host> under the output directory. Only global rank 0
// writes there, so the clock reading differing between ranks does not matter.
std::string tensorboard_dir(const SftConfig& c) {
  if (c.report_to == "none") return "";
  if (c.report_to != "tensorboard" && c.report_to != "all")
    throw UserError("--report_to " + c.report_to + ": must be tensorboard, all (= tensorboard) or none");
  if (!c.logging_dir.empty()) return c.logging_dir;
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%b%d_%H-%M-%S", &local);
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "localhost");
  return (std::filesystem::path(c.output_dir) / "runs" / (std::string(stamp) + "_" + host)).string();
}

}  // namespace

SftPlan plan_sft_job(const SftConfig& c, int world_size) {
  validate_sft_options(c);
  require_supported(c);
  // The order of the checks is the order of the messages a user with several mistakes sees.
  SftPlan plan;
  plan.schedule = parse_lr_schedule(c.lr_scheduler_type);
  parse_lr_scheduler_kwargs(plan.schedule, c.lr_scheduler_kwargs, c.learning_rate);  // its UserErrors, early
  const ParallelDims resolved = requested_dims(c, world_size);
  plan.trainer = trainer_options(c);
  plan.trainer.parallel.lora = plan_lora(c, plan);
  plan.model = load_model_config(c, plan.base_model_dir);
  plan.dims = model_dims(resolved, plan.model, c);
  // An adapter directory carries the run's tokenizer files (TRL saves them next to the adapter).
  plan.tokenizer_dir = !c.tokenizer.empty() ? c.tokenizer
                       : !plan.adapter_dir.empty() && std::filesystem::exists(plan.adapter_dir + "/tokenizer.json")
                           ? plan.adapter_dir
                           : plan.base_model_dir;
  plan.cache_dir = !c.dataset_cache_dir.empty() ? c.dataset_cache_dir
                                                : (std::filesystem::path(c.output_dir) / ".dataset_cache").string();
  plan.tensorboard_dir = tensorboard_dir(c);
  plan.identity = checkpoint::model_identity(plan.model);
  if (const std::optional<LoraConfig>& lora = plan.trainer.parallel.lora) {
    try {
      (void)resolve_lora_targets(plan.model, *lora);  // every rank, before any collective
    } catch (const UserError& e) {  // an adapter directory's config, not a flag, said it
      if (plan.adapter_dir.empty()) throw;
      throw UserError((std::filesystem::path(plan.adapter_dir) / kPeftConfigFile).string() + ": " + e.what());
    }
    plan.identity["lora"] = lora_identity(*lora);
  }
  plan.identity["tokenizer_fingerprint"] = checkpoint::tokenizer_fingerprint(plan.tokenizer_dir);
  if (!c.resume_from_checkpoint.empty()) {
    plan.resume_dir = checkpoint::resolve_checkpoint(c.resume_from_checkpoint, c.output_dir);
    if (!plan.resume_dir.empty()) {
      plan.resume_manifest = checkpoint::open_manifest(plan.resume_dir, plan.identity);
      checkpoint::require_resumable(plan.resume_dir, plan.resume_manifest);  // before any collective
    }
  }
  return plan;
}

}  // namespace trlhpc
