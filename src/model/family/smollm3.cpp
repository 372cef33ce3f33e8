// SmolLM3 (SmolLM3ForCausalLM, model_type "smollm3"): Llama-style GQA with RoPE skipped on the layers
// whose no_rope_layers entry is 0 (default every no_rope_layer_interval-th layer), attention_bias on
// q/k/v/o, mlp_bias on gate/up/down, a tied head by default, and optional sliding layers (layer_types,
// or where use_sliding_window, a window and no RoPE), as SmolLM3Config derives them.
#include "src/model/family/model_family.hpp"

namespace trlhpc::model_family_detail {
namespace {

void read(const json& root, const FieldReader& r, ModelConfig& c) {
  read_rope(root, r, c);
  require_silu(r);
  c.qkv_bias = c.o_bias = r.boolean("attention_bias", false);
  c.mlp_bias = r.boolean("mlp_bias", false);
  const int64_t L = c.num_hidden_layers;
  c.use_sliding_window = r.boolean("use_sliding_window", false);
  c.sliding_window = read_window(r).value_or(0);
  c.no_rope_layer_interval = r.positive("no_rope_layer_interval", 4);
  if (r.has("no_rope_layers")) {
    c.rope_layers = read_no_rope_layers(r, L);
  } else {
    for (int64_t i = 0; i < L; ++i) c.rope_layers[static_cast<size_t>(i)] = (i + 1) % c.no_rope_layer_interval != 0;
  }
  if (r.has("layer_types")) {
    c.sliding_layers = read_layer_types(r, L);
  } else if (c.use_sliding_window && c.sliding_window > 0) {
    for (int64_t i = 0; i < L; ++i) c.sliding_layers[static_cast<size_t>(i)] = !c.rope_layers[static_cast<size_t>(i)];
  }
  // transformers' eager/sdpa mask follows layer_types while its flash path follows use_sliding_window:
  // a sliding layer without use_sliding_window is ambiguous there.
  for (bool sliding : c.sliding_layers)
    if (sliding && !c.use_sliding_window)
      r.fail("use_sliding_window", "layer_types names sliding_attention layers but use_sliding_window is false "
                                   "(transformers' attention implementations disagree on such a layer); set it "
                                   "to true or make those layers full_attention");
}

void write(const ModelConfig& c, json& j) {
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["use_sliding_window"] = c.use_sliding_window;
  j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  json no_rope = json::array();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) no_rope.push_back(c.layer_uses_rope(i) ? 1 : 0);
  j["no_rope_layers"] = no_rope;
  j["no_rope_layer_interval"] = c.no_rope_layer_interval;
  j["layer_types"] = c.layer_types();
}

}  // namespace

// SmolLM3Config: max_position_embeddings 32768, tied head.
const ModelFamily kSmolLM3Family{ModelArchitecture::SmolLM3, "SmolLM3ForCausalLM", "smollm3", std::nullopt, 32768,
                                 true, read, write};

}  // namespace trlhpc::model_family_detail
