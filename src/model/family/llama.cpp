// Llama (LlamaForCausalLM, model_type "llama"): pre-norm decoder, GQA attention with rotate-half RoPE
// (llama3 scaling of Llama 3.1), SwiGLU MLP. q/k/v/o carry a bias when attention_bias, gate/up/down
// when mlp_bias (both default false). No sliding window: a config naming one is refused rather than
// trained with full attention.
#include "src/model/family/model_family.hpp"

namespace trlhpc::model_family_detail {
namespace {

void read(const json& root, const FieldReader& r, ModelConfig& c) {
  read_rope(root, r, c);
  require_silu(r);
  c.qkv_bias = c.o_bias = r.boolean("attention_bias", false);
  c.mlp_bias = r.boolean("mlp_bias", false);
  // layer_types may list full_attention layers (transformers 5 writes it); a sliding one fails in
  // model_config.cpp for want of a window.
  if (r.has("layer_types")) c.sliding_layers = read_layer_types(r, c.num_hidden_layers);
  if (r.has("sliding_window") || r.boolean("use_sliding_window", false))
    r.fail("sliding_window", "LlamaForCausalLM has no sliding window; remove it (or use model_type mistral)");
}

void write(const ModelConfig& c, json& j) {
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
}

}  // namespace

// LlamaConfig: max_position_embeddings 2048, untied head.
const ModelFamily kLlamaFamily{ModelArchitecture::Llama, "LlamaForCausalLM", "llama", std::nullopt, 2048, false,
                               read, write};

}  // namespace trlhpc::model_family_detail
