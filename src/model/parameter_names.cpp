#include "trlhpc/model/parameter_names.hpp"

#include "trlhpc/model/tensor_parallel.hpp"

namespace trlhpc {

std::string layer_parameter_name(int64_t layer, const std::string& suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

int parameter_unit_count(const ModelConfig& config) { return static_cast<int>(config.num_hidden_layers) + 2; }

std::vector<ParameterSpec> parameter_specs(const ModelConfig& full_config, TpLayout tp) {
  // This tp rank's sizes: NH/tp, KVH/tp, F/tp, V/tp (tp_local_config validates the divisibility).
  const ModelConfig config = tp_local_config(full_config, tp.size);
  const int64_t C = config.hidden_size, F = config.intermediate_size, V = config.vocab_size;
  const int64_t q_out = config.num_attention_heads * config.head_dim;   // NH*HS (local heads)
  const int64_t kv_out = config.num_key_value_heads * config.head_dim;  // KVH*HS (local heads)
  // tp ranks sharing one kv head when tp > KVH (validated: tp % KVH == 0), else 1.
  const int kv_share = tp.size > full_config.num_key_value_heads
                           ? static_cast<int>(tp.size / full_config.num_key_value_heads) : 1;
  std::vector<ParameterSpec> specs;
  specs.push_back({"model.embed_tokens.weight", {V, C}, ParameterKind::Embedding, 0, TpSplit::Rows});

  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const int unit = static_cast<int>(i) + 1;
    auto add = [&](const std::string& suffix, Shape shape, ParameterKind kind, TpSplit split) {
      specs.push_back({layer_parameter_name(i, suffix), std::move(shape), kind, unit, split});
    };
    // Column-parallel: weight rows and bias split. Row-parallel: weight columns split, bias
    // replicated (added once after the g all-reduce, Megatron-LM sec. 3).
    auto column_parallel = [&](const std::string& module, int64_t out, int64_t in, bool bias) {
      add(module + ".weight", {out, in}, ParameterKind::Matrix, TpSplit::Rows);
      if (bias) add(module + ".bias", {out}, ParameterKind::Bias, TpSplit::Rows);
    };
    auto row_parallel = [&](const std::string& module, int64_t out, int64_t in, bool bias) {
      add(module + ".weight", {out, in}, ParameterKind::Matrix, TpSplit::Columns);
      if (bias) add(module + ".bias", {out}, ParameterKind::Bias, TpSplit::Replicated);
    };
    add("input_layernorm.weight", {C}, ParameterKind::Norm, TpSplit::Replicated);
    column_parallel("self_attn.q_proj", q_out, C, config.qkv_bias);
    if (kv_share > 1) {  // tp > KVH: one kv head per rank, shared by kv_share ranks
      for (const char* module : {"self_attn.k_proj", "self_attn.v_proj"}) {
        add(std::string(module) + ".weight", {kv_out, C}, ParameterKind::Matrix, TpSplit::KvReplicated);
        specs.back().tp_kv_share = kv_share;
        if (config.qkv_bias) {
          add(std::string(module) + ".bias", {kv_out}, ParameterKind::Bias, TpSplit::KvReplicated);
          specs.back().tp_kv_share = kv_share;
        }
      }
    } else {
      column_parallel("self_attn.k_proj", kv_out, C, config.qkv_bias);
      column_parallel("self_attn.v_proj", kv_out, C, config.qkv_bias);
    }
    row_parallel("self_attn.o_proj", C, q_out, config.o_bias);
    if (config.qk_norm) {  // per-head norms: each tp rank norms its own heads with the whole weight
      add("self_attn.q_norm.weight", {config.head_dim}, ParameterKind::Norm, TpSplit::Replicated);
      add("self_attn.k_norm.weight", {config.head_dim}, ParameterKind::Norm, TpSplit::Replicated);
    }
    add("post_attention_layernorm.weight", {C}, ParameterKind::Norm, TpSplit::Replicated);
    if (config.sandwich_norms) {  // Gemma: the MLP's pre-norm and the norm of its output
      add("pre_feedforward_layernorm.weight", {C}, ParameterKind::Norm, TpSplit::Replicated);
      add("post_feedforward_layernorm.weight", {C}, ParameterKind::Norm, TpSplit::Replicated);
    }
    column_parallel("mlp.gate_proj", F, C, config.mlp_bias);
    column_parallel("mlp.up_proj", F, C, config.mlp_bias);
    row_parallel("mlp.down_proj", C, F, config.mlp_bias);
  }

  const int last = parameter_unit_count(config) - 1;
  specs.push_back({"model.norm.weight", {C}, ParameterKind::Norm, last, TpSplit::Replicated});
  if (!config.tie_word_embeddings)
    specs.push_back({"lm_head.weight", {V, C}, ParameterKind::Matrix, last, TpSplit::Rows});
  return specs;
}

std::vector<ParameterSpec> unit_parameter_specs(const ModelConfig& config, int unit, TpLayout tp) {
  std::vector<ParameterSpec> out;
  for (auto& spec : parameter_specs(config, tp))
    if (spec.unit == unit) out.push_back(std::move(spec));
  return out;
}

}  // namespace trlhpc
