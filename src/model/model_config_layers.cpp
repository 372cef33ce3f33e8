// ModelConfig's per-layer and per-token properties, from the structure its family read
// (src/model/family/): windows, RoPE, attention and embedding scales.
#include <bit>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "trlhpc/model/model_config.hpp"

namespace trlhpc {

int64_t ModelConfig::attention_window(int64_t layer) const {
  const size_t i = static_cast<size_t>(layer);
  return i < sliding_layers.size() && sliding_layers[i] ? sliding_window : 0;
}

bool ModelConfig::layer_uses_rope(int64_t layer) const {
  const size_t i = static_cast<size_t>(layer);
  return i >= rope_layers.size() || rope_layers[i];
}

std::vector<std::string> ModelConfig::layer_types() const {
  std::vector<std::string> types;
  for (int64_t i = 0; i < num_hidden_layers; ++i)
    types.push_back(attention_window(i) > 0 ? "sliding_attention" : "full_attention");
  return types;
}

float ModelConfig::attention_scale() const {
  // transformers: query_pre_attn_scalar**-0.5 (a python float) or head_dim**-0.5, rounded to fp32 where
  // it meets the fp32 scores.
  if (query_pre_attn_scalar > 0) return static_cast<float>(std::pow(query_pre_attn_scalar, -0.5));
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

float ModelConfig::attention_softcap() const { return static_cast<float>(attn_logit_softcapping); }

float ModelConfig::final_logit_softcap() const { return static_cast<float>(final_logit_softcapping); }

float ModelConfig::embedding_scale(bool bf16) const {
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(hidden_size)));  // torch.tensor(C**0.5)
  if (!bf16) return scale;
  const uint32_t bits = std::bit_cast<uint32_t>(scale);  // round to nearest even (finite, positive)
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  return std::bit_cast<float>(rounded);
}

std::vector<std::string> ModelConfig::structure() const {
  std::vector<std::string> parts;
  auto add = [&](bool on, const char* phrase) {
    if (on) parts.emplace_back(phrase);
  };
  add(qkv_bias, "q/k/v bias");
  add(o_bias, "o bias");
  add(mlp_bias, "MLP bias");
  add(qk_norm, "q/k norms");
  add(sandwich_norms, "norms on the attention and MLP outputs");
  add(norm_weight_offset, "(1 + w) RMSNorm");
  parts.emplace_back(mlp_activation == MlpActivation::GeluTanh ? "GeGLU (tanh GELU)" : "SwiGLU");
  add(scale_embeddings, "embeddings x sqrt(hidden)");
  add(query_pre_attn_scalar > 0, "attention scale query_pre_attn_scalar^-0.5");
  add(rope_scaling.enabled && rope_scaling.linear, "linear RoPE scaling");
  add(rope_scaling.enabled && !rope_scaling.linear, "llama3 RoPE scaling");
  add(rope_local_theta > 0, "sliding layers with their own RoPE base");
  if (attn_logit_softcapping > 0) {
    std::ostringstream phrase;
    phrase << "attention scores softcapped at " << attn_logit_softcapping;
    parts.push_back(phrase.str());
  }
  if (final_logit_softcapping > 0) {
    std::ostringstream phrase;
    phrase << "final logits softcapped at " << final_logit_softcapping;
    parts.push_back(phrase.str());
  }
  parts.emplace_back(tie_word_embeddings ? "tied head" : "untied head");
  parts.push_back("head_dim " + std::to_string(head_dim));
  return parts;
}

bool ModelConfig::layer_uses_local_rope(int64_t layer) const {
  return rope_local_theta > 0 && attention_window(layer) > 0;
}

}  // namespace trlhpc
