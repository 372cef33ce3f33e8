#pragma once
// `--fsdp` and `--fsdp_config` (TrainingArguments' FSDP fields, transformers 5.25 training_args.py
// _process_fsdp_args) mapped onto the same strategies as `--accelerate_config` (cli/accelerate_config.hpp):
// the strategy is handed to the accelerate reader as the fsdp_config block an accelerate FSDP file holds.
//
//   --fsdp   null | "" | [] | false: off (fsdp_config is then not read, as transformers)
//            true: on, everything from fsdp_config
//            a string of words or a list: full_shard | shard_grad_op | no_shard | hybrid_shard |
//            hybrid_shard_zero2 (at most one), offload, auto_wrap (a no-op: trlhpc always shards per
//            decoder layer, TRANSFORMER_BASED_WRAP); unknown words are refused by name
//   --fsdp_config FILE.json or an object; each key with or without the fsdp_ prefix:
//     version 2 (default) | 1
//     reshard_after_forward  version 2: true | false (FULL_SHARD | SHARD_GRAD_OP; --fsdp's full_shard /
//                            shard_grad_op say the same, the other strategies need version 1, as in
//                            transformers); version 1: the strategy name (default full_shard)
//     cpu_offload (transformers) | offload_params (accelerate): --fsdp offload -> offload parameters
//     activation_checkpointing true -> gradient_checkpointing (FSDP's checkpointing: on whatever
//                            --gradient_checkpointing says, as transformers applies both)
//   strategy -> --sharding: FULL_SHARD, HYBRID_SHARD zero3; SHARD_GRAD_OP, HYBRID_SHARD_ZERO2 zero2;
//   NO_SHARD none. HYBRID_* shard over dp_shard and replicate over --dp_replicate_size (1 unless given or
//   set by --accelerate_config's parallelism_config: on one node HYBRID_SHARD is FULL_SHARD).
//   No-op keys, accepted with their no-op values (anything else refused naming the key):
//     auto_wrap_policy TRANSFORMER_BASED_WRAP; transformer_layer_cls_to_wrap: *DecoderLayer names;
//     min_num_params (unused under TRANSFORMER_BASED_WRAP, as in transformers); state_dict_type
//     FULL_STATE_DICT; xla false (xla_fsdp_settings / xla_fsdp_v2 / xla_fsdp_grad_ckpt unused without it)
//   Accepted with any valid value (scheduling and loading details with the same numbers here):
//     cpu_ram_efficient_loading, forward_prefetch, backward_prefetch, use_orig_params, sync_module_states,
//     limit_all_gathers. Unknown keys: a note each (transformers ignores them).
// Refused naming both sources: --fsdp with --deepspeed; a strategy or offload that differs from
// --accelerate_config's or from an explicit --sharding; a non-hybrid strategy with an explicit
// --dp_replicate_size > 1; a sharded strategy with an explicit --dp_shard_size 1 (and cp 1) on > 1 rank.
#include <set>
#include <string>
#include <vector>

#include "trlhpc/cli/accelerate_config.hpp"
#include "trlhpc/train/sft_config.hpp"

namespace trlhpc {

// Checks --fsdp's words alone (UserError naming the unknown one), so a --config YAML's value is refused
// with its file and line.
void check_fsdp_words(const std::string& value);

// Reads config.fsdp / config.fsdp_config and applies them to `config`. `accelerate` is the
// --accelerate_config already applied (nullptr: none), checked for contradictions.
void apply_fsdp_arguments(const std::set<std::string>& explicit_flags, int world_size,
                          const AccelerateConfig* accelerate, SftConfig& config, std::vector<std::string>& notes);

}  // namespace trlhpc
