#pragma once
// The parameters of a ModelConfig: Hugging Face tensor names, shapes and kinds, in one fixed order.
//
// Order (it is the order of the flat per-unit buffers, of init and of saving):
//   unit 0        model.embed_tokens.weight                          (V, C)      embedding
//   unit 1+i      model.layers.i.input_layernorm.weight              (C)         norm
//   (layer i)     model.layers.i.self_attn.q_proj.weight             (NH*HS, C)  matrix
//                 model.layers.i.self_attn.q_proj.bias               (NH*HS)     bias   [qkv_bias]
//                 model.layers.i.self_attn.k_proj.weight / .bias     (KVH*HS, C) / (KVH*HS)
//                 model.layers.i.self_attn.v_proj.weight / .bias     (KVH*HS, C) / (KVH*HS)
//                 model.layers.i.self_attn.o_proj.weight             (C, NH*HS)  matrix
//                 model.layers.i.self_attn.o_proj.bias               (C)         bias   [o_bias]
//                 model.layers.i.self_attn.q_norm.weight / k_norm    (HS) / (HS) norm   [qk_norm]
//                 model.layers.i.post_attention_layernorm.weight     (C)         norm
//                 model.layers.i.pre_feedforward_layernorm.weight    (C)         norm   [sandwich_norms]
//                 model.layers.i.post_feedforward_layernorm.weight   (C)         norm   [sandwich_norms]
//                 model.layers.i.mlp.gate_proj.weight / .bias        (F, C) / (F)         [mlp_bias]
//                 model.layers.i.mlp.up_proj.weight / .bias          (F, C) / (F)         [mlp_bias]
//                 model.layers.i.mlp.down_proj.weight / .bias        (C, F) / (C)         [mlp_bias]
//   unit L+1      model.norm.weight                                  (C)         norm
//                 lm_head.weight                                     (V, C)      matrix [not tied]
// Linear weights are (out, in) as in PyTorch. With tie_word_embeddings the head is the embedding.
// Under tensor parallelism (TpLayout, tp_layout.hpp) the names and order stay; shapes are this tp
// rank's slices: q/k/v/gate/up and their biases and both vocab tables split in rows, o/down weights in
// columns, norms (q/k norms too) and o/down biases replicated. When tp > KVH (tp % KVH == 0) k/v hold
// one kv head (HS rows), TpSplit::KvReplicated, shared by tp/KVH ranks.
#include <cstdint>
#include <string>
#include <vector>

#include "trlhpc/core/tensor.hpp"
#include "trlhpc/model/model_config.hpp"
#include "trlhpc/model/tp_layout.hpp"

namespace trlhpc {

// Kind decides initialisation (init.hpp) and weight decay (none on biases and norm weights, as
// transformers' Trainer groups parameters).
enum class ParameterKind { Matrix, Norm, Bias, Embedding };


struct ParameterSpec {
  std::string name;     // Hugging Face name, e.g. "model.layers.3.mlp.up_proj.weight"
  Shape shape;          // e.g. (F, C)
  ParameterKind kind;
  int unit;             // 0 = embedding, 1..L = decoder layer unit-1, L+1 = final norm + head
  TpSplit tp_split = TpSplit::Replicated;  // how tensor parallelism cuts it (shape is the local slice)
  int tp_kv_share = 1;  // KvReplicated: tp ranks holding the same kv head (tp / KVH); 1 otherwise

  int64_t numel() const { return shape_numel(shape); }
  // Every tp rank holds the same values (and, after the f/g all-reduces, the same gradient).
  bool tp_replicated() const { return tp_split == TpSplit::Replicated; }
  // Whether tp rank `tp_rank` counts this parameter's gradient in the global norm (each element once):
  // replicated ones on rank 0 only, kv-replicated ones on the first rank of each sharing sub-group.
  bool tp_counted_on(int tp_rank) const {
    if (tp_split == TpSplit::Replicated) return tp_rank == 0;
    if (tp_split == TpSplit::KvReplicated) return tp_rank % tp_kv_share == 0;
    return true;
  }
  bool weight_decay() const { return kind == ParameterKind::Matrix || kind == ParameterKind::Embedding; }
};

// All parameters of `config` in the order above, shaped for tp rank `tp` (default: no tensor parallel).
// tp.size > 1 validates the divisibility first (validate_tensor_parallel, UserError).
std::vector<ParameterSpec> parameter_specs(const ModelConfig& config, TpLayout tp = {});
// Number of units: L + 2.
int parameter_unit_count(const ModelConfig& config);
// The specs of one unit, in order (a filter of parameter_specs).
std::vector<ParameterSpec> unit_parameter_specs(const ModelConfig& config, int unit, TpLayout tp = {});
// "model.layers.<layer>.<suffix>", e.g. layer_parameter_name(3, "mlp.up_proj.weight").
std::string layer_parameter_name(int64_t layer, const std::string& suffix);

}  // namespace trlhpc
