#pragma once
// Accelerate configuration files: `--accelerate_config NAME|FILE` (CONTRACT.md "Parallelism").
//
// TRL's CLI hands --accelerate_config to `accelerate launch --config_file`; trlhpc reads the same YAML
// itself (the launcher is mpirun/srun) and maps it onto its own options:
//
//   distributed_type NO | MULTI_GPU | MULTI_CPU            -> sharding none (DDP)
//   DEEPSPEED, deepspeed_config.zero_stage 0 | 1 | 2 | 3     -> none | zero1 | zero2 | zero3
//   FSDP, fsdp_config.fsdp_version 1 | 2 and the sharding strategy, given as
//     fsdp_reshard_after_forward true | false or FULL_SHARD | SHARD_GRAD_OP | NO_SHARD | HYBRID_SHARD |
//     HYBRID_SHARD_ZERO2 (accelerate's FSDP1 form), or the older fsdp_sharding_strategy (name or 1..5)
//                                                            -> zero3 | zero2 | none | zero3 | zero2
//   fsdp_config.fsdp_activation_checkpointing               -> gradient_checkpointing
//   parallelism_config.parallelism_config_{dp_replicate,dp_shard,tp,cp,sp}_size -> the mesh sizes
//   HYBRID_SHARD* without parallelism_config: dp_replicate = num_machines (shard within a node)
//   num_processes     user files only: must equal the world size (named profiles leave the process
//                     count to the launcher, and their dp_shard to "the rest of the world")
//   deepspeed_config.seq_parallel_communication_data_type  bf16 | fp32 (also bfloat16, torch.bfloat16, ...)
//                     -> --seq_parallel_communication_data_type: under --bf16, bf16 sends Ulysses'
//                     attention gradients in bf16 (its activations travel in bf16 either way)
//   CPU offload (src/parallel/data_parallel/host_offload.hpp), active under its distributed_type only:
//     deepspeed_config.offload_optimizer_device none | cpu  -> offload optimizer (fp32 master + AdamW
//                     moments in pinned host memory, AdamW on the host); zero_stage 1, 2 or 3
//     deepspeed_config.offload_param_device none | cpu      -> offload parameters too (the fp32 parameter
//                     shard between uses); zero_stage 3 and offload_optimizer_device cpu
//     fsdp_config.fsdp_offload_params true | false          -> offload parameters (and so the optimizer,
//                     as FSDP's CPUOffload steps the optimizer on the host); FULL_SHARD / HYBRID_SHARD
//     Refused (UserError naming the key and the file): nvme; offload_param without
//     offload_optimizer or below stage 3; offload_optimizer at zero_stage 0; fsdp_offload_params with
//     SHARD_GRAD_OP, NO_SHARD or HYBRID_SHARD_ZERO2 (trlhpc keeps full parameters on the device there).
//   mixed_precision   no | bf16 -> --bf16 false | true unless --bf16 is given (the flag wins, as in
//                     transformers); fp16 | fp8 without --bf16: a UserError (not supported)
//
// Decisions where accelerate is lenient or the schema is ambiguous (each a UserError naming the file,
// the key and the values): DEEPSPEED without deepspeed_config.zero_stage (accelerate would silently
// pick stage 2; trlhpc asks for it), deepspeed_config_file (not read), a zero_stage or FSDP strategy
// under another distributed_type, two FSDP strategy keys that disagree, FSDP with dp_replicate > 1 and
// dp_shard == 1 (nothing to shard: use MULTI_GPU), sizes whose product is not the world size.
// Keys of accelerate's schema that do not apply here (ports, machine ranks, TPU settings, wrap
// policies, ...) are accepted silently; unknown keys produce one warning each.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "trlhpc/train/sft_config.hpp"

namespace trlhpc {

struct AccelerateConfig {
  std::string source;           // the NAME or FILE as given
  std::string path;             // the file read
  bool named_profile = false;   // one of accelerate_profile_names()
  std::string distributed_type = "NO";
  std::string sharding = "none";  // none | zero1 | zero2 | zero3
  bool reshard_after_forward = true;
  // Mesh sizes the file sets (unset: keep the flag's value). dp_shard -1 = the rest of the world.
  std::optional<int64_t> dp_replicate, dp_shard, tp, cp, sp;
  std::optional<bool> activation_checkpointing;
  // deepspeed_config.seq_parallel_communication_data_type, normalised to "bf16" | "fp32".
  std::optional<std::string> sp_communication_dtype;
  std::optional<int64_t> num_processes;
  std::string mixed_precision = "no";
  // CPU offload: "none" | "optimizer" | "parameters" (parameters implies the optimizer), and the key
  // that asked for it ("deepspeed_config.offload_optimizer_device cpu", ...), for messages.
  std::string offload = "none";
  std::string offload_key;
  std::vector<std::string> warnings;  // unknown keys and ignored settings, for rank 0 to print
};

// The profile names (files configs/NAME.yaml): multi_gpu, zero1, zero2, zero3, fsdp1, fsdp2,
// context_parallel_2gpu, alst_ulysses_4gpu.
const std::vector<std::string>& accelerate_profile_names();

// The file of profile `name`: share/trlhpc/configs next to the installed binary (<exe>/../share/...),
// else the source tree's configs/ (TRLHPC_SOURCE_DIR). UserError when neither holds it.
std::string accelerate_profile_path(const std::string& name);

// Parses accelerate YAML text; `origin` names it in messages. Validates against `world_size` (user
// files: num_processes, the product of the sizes; named profiles: neither). Throws UserError.
AccelerateConfig parse_accelerate_config(const std::string& yaml_text, const std::string& origin, bool named_profile,
                                         int world_size);

// Reads NAME (a profile) or FILE and parses it as above.
AccelerateConfig read_accelerate_config(const std::string& name_or_file, int world_size);

// Copies the file's settings into `config`, except those whose flag was given explicitly
// (`explicit_flags` holds option names without dashes, e.g. "sharding", "dp_shard_size").
void apply_accelerate_config(const AccelerateConfig& accelerate, const std::set<std::string>& explicit_flags,
                             SftConfig& config);

}  // namespace trlhpc
