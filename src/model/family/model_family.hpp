#pragma once
// ModelFamily: what trlhpc knows about one Hugging Face architecture, one file per family in this
// folder (llama.cpp, qwen2.cpp, qwen3.cpp, mistral.cpp, smollm3.cpp, gemma2.cpp, gemma3.cpp), listed
// once in registry.cpp.
//
// A family turns its config.json (transformers 4 and 5 spellings, its configuration class's defaults
// and derivations) into a ModelConfig: the common sizes, read by model_config.cpp for every family,
// plus the family's structure — which projections carry biases, q/k norms, sandwich norms, the MLP
// activation, embedding scaling, attention scale, softcapping, RoPE bases and scaling, and the per-layer
// pattern (sliding windows, RoPE-less layers) — and writes the same fields back so that transformers derives
// the same model. Everything else follows from that structure in one place each, never from the
// family's name: HF parameter names and each weight's tensor-parallel split (parameter_names.cpp),
// the decoder's computation (decoder_layer.cpp), its buffers and hence the memory plan
// (Decoder::planned_activation_bytes), parameter count and FLOPs (ModelConfig::parameter_count,
// train/flops.cpp). Adding a family made of structure the decoder computes = a file here, its line
// in registry.cpp, its ModelArchitecture value, and its tests (golden against transformers, layouts).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/model/config_field_reader.hpp"
#include "trlhpc/model/model_config.hpp"

namespace trlhpc::model_family_detail {

using model_config_detail::FieldReader;
using nlohmann::json;

struct ModelFamily {
  ModelArchitecture architecture;
  const char* class_name;  // config.json architectures[0]
  const char* model_type;  // config.json model_type
  // The configuration class's defaults where families differ.
  std::optional<int64_t> default_head_dim;  // none: hidden_size / num_attention_heads
  int64_t default_max_position_embeddings;
  bool default_tie_word_embeddings;
  // Reads the family's own fields into `c`, whose architecture and common sizes are set: RoPE, the
  // structure flags (with refusals of what trlhpc does not compute, each naming the field), and the
  // per-layer pattern (c.sliding_layers / c.rope_layers arrive as L entries of false / true).
  void (*read)(const json& root, const FieldReader& r, ModelConfig& c);
  // Writes the fields only this family has (the common ones are model_config.cpp's).
  void (*write)(const ModelConfig& c, json& j);
};

// registry.cpp: every supported family, and the one of an architecture.
std::span<const ModelFamily* const> model_families();
const ModelFamily& model_family(ModelArchitecture architecture);

// The families' definitions (one per file).
extern const ModelFamily kLlamaFamily, kQwen2Family, kQwen3Family, kMistralFamily, kSmolLM3Family, kGemma2Family,
    kGemma3Family;

// Readers shared by several families (shared_fields.cpp).
// rope_theta with rope_scaling (transformers 4) or rope_parameters (transformers 5): "default" or
// "llama3"; partial rotary refused.
void read_rope(const json& root, const FieldReader& r, ModelConfig& c);
// hidden_act must be "silu" (SwiGLU).
void require_silu(const FieldReader& r);
// layer_types as given: L entries, each "full_attention" or "sliding_attention" (true = sliding).
std::vector<bool> read_layer_types(const FieldReader& r, int64_t L);
// no_rope_layers as given: L entries, 1 = the layer uses RoPE, 0 = it does not.
std::vector<bool> read_no_rope_layers(const FieldReader& r, int64_t L);
// sliding_window as an integer (> 0) or null / absent (nullopt).
std::optional<int64_t> read_window(const FieldReader& r);
// Gemma's attn_logit_softcapping / final_logit_softcapping: absent -> the configuration class's default
// (nullopt: none), null -> none (0), else a positive number.
void read_softcapping(const FieldReader& r, ModelConfig& c, std::optional<double> attn_default,
                      std::optional<double> final_default);
// Both fields, null where there is no cap.
void write_softcapping(const ModelConfig& c, json& j);
// What Gemma 2 and Gemma 3 share (gemma2.cpp): (1 + w) sandwich norms, scaled embeddings with
// padding_idx, GeGLU with tanh GELU (hidden_activation), attention_bias, query_pre_attn_scalar (default
// 256), hidden_size divisible by the heads (`config_class` names the class that requires it), and the
// refusal of bidirectional attention, the token ids' defaults (pad 0, eos 1, bos 2). The caller adds q/k
// norms, softcapping defaults and RoPE.
void read_gemma_structure(const FieldReader& r, ModelConfig& c, const char* config_class);
// Qwen2Config / Qwen3Config: use_sliding_window, sliding_window (default 4096, nulled unless
// use_sliding_window), max_window_layers (default 28), layer_types or "sliding_attention" for layers
// i >= max_window_layers when a window is set (qwen2.cpp; Qwen3 derives them the same way).
void read_qwen_sliding_layers(const FieldReader& r, ModelConfig& c);
void write_qwen_sliding_fields(const ModelConfig& c, json& j);

}  // namespace trlhpc::model_family_detail
