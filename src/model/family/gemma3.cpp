// Gemma 3 text (Gemma3ForCausalLM, model_type "gemma3_text"), read as transformers 5's Gemma3TextConfig
// derives its fields (and written back in the spelling transformers 4 and 5 both read):
// embeddings times sqrt(hidden_size); every RMSNorm scales by (1 + w) in fp32 (weights are offsets);
// input_layernorm before attention, post_attention_layernorm on the attention output,
// pre_/post_feedforward_layernorm around a GeGLU MLP with tanh GELU; q/k norms as Qwen3; attention
// scale query_pre_attn_scalar^-0.5; sliding layers (every layer but each sliding_window_pattern-th,
// or layer_types) rotate with rope_local_base_freq and no scaling, full layers with rope_theta and
// linear rope_scaling; attn_logit_softcapping / final_logit_softcapping (null by default) applied as
// Gemma 2 applies them when set. Bidirectional attention is refused.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "src/model/family/model_family.hpp"

namespace trlhpc::model_family_detail {
namespace {

// One rope object (rope_parameters.<layer type> or rope_scaling): "default", or "linear" when
// `scaling` is given (the full-attention layers).
void read_rope_object(const FieldReader& r, double& theta, RopeScaling* scaling) {
  if (r.has("rope_theta")) theta = r.number("rope_theta", theta);
  if (r.has("partial_rotary_factor") && r.number("partial_rotary_factor", 1.0) != 1.0)
    r.fail("partial_rotary_factor", "partial rotary embeddings are not supported; remove it or set 1.0");
  const char* type_field = r.has("rope_type") ? "rope_type" : "type";
  const std::string type = r.string(type_field, "default");
  if (type == "default") return;
  if (type != "linear" || !scaling)
    r.fail(type_field, scaling ? "unsupported RoPE scaling for Gemma 3; trlhpc implements \"default\" and \"linear\""
                               : "the sliding layers' RoPE must be \"default\" (trlhpc scales only the full layers)");
  scaling->enabled = scaling->linear = true;
  scaling->factor = r.number("factor", 0.0);
  if (!(scaling->factor > 0)) r.fail("factor", "linear rope scaling needs a positive factor");
}

// rope_theta (global layers, default 1e6), rope_local_base_freq (sliding layers, default 1e4) and
// rope_scaling (global layers) in transformers 4; rope_parameters {full_attention, sliding_attention}
// in transformers 5.
void read_gemma3_rope(const json& root, const FieldReader& top, ModelConfig& c) {
  c.rope_theta = top.number("rope_theta", 1000000.0);
  c.rope_local_theta = top.number("rope_local_base_freq", 10000.0);
  if (top.has("rope_scaling")) {
    if (!root.at("rope_scaling").is_object()) top.fail("rope_scaling", "expected an object or null");
    read_rope_object(FieldReader(root.at("rope_scaling"), top.source(), "rope_scaling."), c.rope_theta,
                     &c.rope_scaling);
  }
  if (top.has("rope_parameters")) {
    const json& params = root.at("rope_parameters");
    if (!params.is_object()) top.fail("rope_parameters", "expected an object or null");
    const FieldReader p(params, top.source(), "rope_parameters.");
    for (const char* key : {"full_attention", "sliding_attention"}) {
      if (!p.has(key)) continue;
      if (!params.at(key).is_object())
        p.fail(key, "expected an object per layer type, as transformers 5 writes Gemma 3's rope_parameters");
      const bool full = std::string(key) == "full_attention";
      read_rope_object(FieldReader(params.at(key), top.source(), std::string("rope_parameters.") + key + "."),
                       full ? c.rope_theta : c.rope_local_theta, full ? &c.rope_scaling : nullptr);
    }
  }
  if (!(c.rope_theta > 0)) top.fail("rope_theta", "must be positive");
  if (!(c.rope_local_theta > 0)) top.fail("rope_local_base_freq", "must be positive");
}

// The structure flags, and the refusals of what trlhpc does not compute for Gemma.
void read_gemma3_structure(const FieldReader& r, ModelConfig& c) {
  read_gemma_structure(r, c, "Gemma3TextConfig");
  c.qk_norm = true;
  // Null in Gemma3TextConfig, but Gemma3's attention and head apply them as Gemma 2's do when set.
  read_softcapping(r, c, std::nullopt, std::nullopt);
}

// layer_types, or when absent "sliding_attention" unless (i + 1) % sliding_window_pattern == 0
// (Gemma3TextConfig.__post_init__, pattern default 6); sliding_window defaults to 4096.
void read_gemma3_layers(const FieldReader& r, ModelConfig& c) {
  const std::optional<int64_t> window = read_window(r);
  c.sliding_window = r.present("sliding_window") ? window.value_or(0) : 4096;
  c.sliding_window_pattern = r.positive("sliding_window_pattern", r.positive("_sliding_window_pattern", 6));
  if (r.has("layer_types")) {
    c.sliding_layers = read_layer_types(r, c.num_hidden_layers);
  } else {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      c.sliding_layers[static_cast<size_t>(i)] = (i + 1) % c.sliding_window_pattern != 0;
  }
}

void read(const json& root, const FieldReader& r, ModelConfig& c) {
  read_gemma3_rope(root, r, c);
  read_gemma3_structure(r, c);
  read_gemma3_layers(r, c);
}

void write(const ModelConfig& c, json& j) {
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["attention_bias"] = c.qkv_bias;
  // Gemma3TextConfig declares it an int (transformers 5's strict config refuses 24.0).
  const double scalar = c.query_pre_attn_scalar;
  j["query_pre_attn_scalar"] = scalar == std::floor(scalar) ? json(static_cast<int64_t>(scalar)) : json(scalar);
  j["rope_local_base_freq"] = c.rope_local_theta;
  j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  j["sliding_window_pattern"] = c.sliding_window_pattern;
  j["layer_types"] = c.layer_types();
  write_softcapping(c, j);
  j["use_bidirectional_attention"] = false;
}

}  // namespace

// Gemma3TextConfig: head_dim 256, max_position_embeddings 131072, tied head.
const ModelFamily kGemma3Family{ModelArchitecture::Gemma3, "Gemma3ForCausalLM", "gemma3_text", 256, 131072, true,
                                read, write};

}  // namespace trlhpc::model_family_detail
