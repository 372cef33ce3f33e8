// Qwen2 (Qwen2ForCausalLM, model_type "qwen2"): the Llama structure with a bias on q/k/v (always; none
// on o_proj or the MLP), and optional sliding-window layers as Qwen2Config derives them.
#include "src/model/family/model_family.hpp"

namespace trlhpc::model_family_detail {
namespace {

void read(const json& root, const FieldReader& r, ModelConfig& c) {
  read_rope(root, r, c);
  require_silu(r);
  c.qkv_bias = true;  // Qwen2Attention: q/k/v Linear(bias=True), o_proj bias=False; Qwen2MLP no bias
  c.o_bias = c.mlp_bias = false;
  read_qwen_sliding_layers(r, c);
}

}  // namespace

void read_qwen_sliding_layers(const FieldReader& r, ModelConfig& c) {
  // Qwen*Config: sliding_window defaults to 4096 and is nulled unless use_sliding_window.
  const std::optional<int64_t> window = read_window(r);
  c.use_sliding_window = r.boolean("use_sliding_window", false);
  c.sliding_window = c.use_sliding_window ? (r.has("sliding_window") ? *window : 4096) : 0;
  c.max_window_layers = r.integer("max_window_layers", 28);
  if (r.has("layer_types")) {
    c.sliding_layers = read_layer_types(r, c.num_hidden_layers);
  } else if (c.sliding_window > 0) {
    for (int64_t i = c.max_window_layers; i < c.num_hidden_layers; ++i) c.sliding_layers[static_cast<size_t>(i)] = true;
  }
}

void write_qwen_sliding_fields(const ModelConfig& c, json& j) {
  j["use_sliding_window"] = c.use_sliding_window;
  j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  // Before sliding layers existed trlhpc wrote max_window_layers = L; kept when there is no window.
  j["max_window_layers"] = c.sliding_window > 0 ? c.max_window_layers : c.num_hidden_layers;
  if (c.sliding_window > 0) j["layer_types"] = c.layer_types();  // as read or derived; exact either way
}

// Qwen2Config: max_position_embeddings 32768, untied head.
const ModelFamily kQwen2Family{ModelArchitecture::Qwen2, "Qwen2ForCausalLM", "qwen2", std::nullopt, 32768, false,
                               read, write_qwen_sliding_fields};

}  // namespace trlhpc::model_family_detail
