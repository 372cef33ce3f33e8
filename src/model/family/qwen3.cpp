// Qwen3 (Qwen3ForCausalLM, model_type "qwen3"): the Llama structure plus a per-head RMSNorm over
// head_dim on q and on k (self_attn.q_norm / k_norm, shape (head_dim)) after the projections and
// before RoPE; head_dim defaults to 128 whatever hidden_size / heads is; q/k/v/o carry a bias when
// attention_bias; no MLP bias; sliding-window layers as Qwen2.
#include "src/model/family/model_family.hpp"

namespace trlhpc::model_family_detail {
namespace {

void read(const json& root, const FieldReader& r, ModelConfig& c) {
  read_rope(root, r, c);
  require_silu(r);
  // Qwen3Attention: q/k/v/o Linear(bias=attention_bias); Qwen3MLP no bias; q_norm/k_norm always.
  c.qkv_bias = c.o_bias = r.boolean("attention_bias", false);
  c.mlp_bias = false;
  c.qk_norm = true;
  read_qwen_sliding_layers(r, c);
}

void write(const ModelConfig& c, json& j) {
  j["attention_bias"] = c.qkv_bias;
  write_qwen_sliding_fields(c, j);
}

}  // namespace

// Qwen3Config: head_dim 128, max_position_embeddings 32768, untied head.
const ModelFamily kQwen3Family{ModelArchitecture::Qwen3, "Qwen3ForCausalLM", "qwen3", 128, 32768, false, read, write};

}  // namespace trlhpc::model_family_detail
