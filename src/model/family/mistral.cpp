// Mistral (MistralForCausalLM, model_type "mistral"): the Llama structure without biases, a head_dim
// field, and sliding_window on every layer (default 4096; null = full attention).
#include "src/model/family/model_family.hpp"

namespace trlhpc::model_family_detail {
namespace {

void read(const json& root, const FieldReader& r, ModelConfig& c) {
  read_rope(root, r, c);
  require_silu(r);
  c.qkv_bias = c.o_bias = c.mlp_bias = false;  // MistralAttention / MistralMLP: Linear(bias=False)
  // transformers ignores layer_types for Mistral, so a differing one is refused, not ignored.
  const std::optional<int64_t> window = read_window(r);
  c.sliding_window = r.present("sliding_window") ? window.value_or(0) : 4096;
  c.sliding_layers.assign(static_cast<size_t>(c.num_hidden_layers), c.sliding_window > 0);
  if (r.has("layer_types") && read_layer_types(r, c.num_hidden_layers) != c.sliding_layers)
    r.fail("layer_types", "MistralForCausalLM applies sliding_window to every layer; remove layer_types");
}

void write(const ModelConfig& c, json& j) {
  j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
}

}  // namespace

// MistralConfig: max_position_embeddings 4096 * 32, untied head.
const ModelFamily kMistralFamily{ModelArchitecture::Mistral, "MistralForCausalLM", "mistral", std::nullopt, 131072,
                                 false, read, write};

}  // namespace trlhpc::model_family_detail
