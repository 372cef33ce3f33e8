#pragma once
// ModelConfig: the architecture of a decoder-only model, read from (and written back to) a Hugging Face
// config.json. Supported: `LlamaForCausalLM` (model_type "llama"), `Qwen2ForCausalLM` ("qwen2"),
// `Qwen3ForCausalLM` ("qwen3"), `MistralForCausalLM` ("mistral"), `SmolLM3ForCausalLM` ("smollm3"),
// `Gemma2ForCausalLM` ("gemma2") and `Gemma3ForCausalLM` ("gemma3_text").
//
// All are one pre-norm decoder (RMSNorm -> GQA attention with rotate-half RoPE -> RMSNorm -> gated MLP)
// whose variations are the structure fields below. Each family lives in one file of src/model/family/
// (its config.json fields in the transformers 4 and 5 spellings, its configuration class's defaults and
// derivations of layer_types / no_rope_layers, the fields written back; the header there says what
// follows from the structure, and where). In short:
//   llama:   q/k/v/o bias = attention_bias, gate/up/down bias = mlp_bias (both default false)
//   qwen2:   q/k/v always biased, o never; no MLP bias; optional sliding layers
//   qwen3:   q/k/v/o bias = attention_bias; per-head RMSNorm of q and k before RoPE; head_dim default 128
//   mistral: no biases; head_dim field; sliding_window on every layer
//   smollm3: llama's biases; RoPE skipped where no_rope_layers[i] is 0; optional sliding layers
//   gemma2:  scaled embeddings, (1 + w) norms, sandwich norms, GeGLU (tanh GELU), query_pre_attn_scalar,
//          alternating sliding / full layers, tanh softcapping of the attention scores and final logits
//   gemma3_text: Gemma 2's structure plus q/k norms and sliding layers with their own RoPE base
//          (softcapping when set, null by default)
// A sliding layer attends, per document, to itself and the window - 1 tokens before it.
// Anything trlhpc does not compute (other architectures, rope scaling other than llama3 / Gemma's
// linear, another activation, attention dropout, partial rotary) is rejected with a
// UserError that names the file, the field and the value, rather than trained silently wrong.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trlhpc {

enum class ModelArchitecture { Llama, Qwen2, Qwen3, Mistral, SmolLM3, Gemma2, Gemma3 };

// The MLP's gate activation: SwiGLU (silu) or Gemma's GeGLU with the tanh GELU (gelu_pytorch_tanh).
enum class MlpActivation { Silu, GeluTanh };

// rope_scaling / rope_parameters of type "llama3" (Llama 3.1) or "linear" (inv_freq / factor; Gemma 3's
// global layers). `enabled == false` means plain RoPE (no rope_scaling, or rope_type "default").
struct RopeScaling {
  bool enabled = false;
  bool linear = false;  // "linear": only `factor` applies
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  ModelArchitecture architecture = ModelArchitecture::Llama;
  int64_t hidden_size = 0;              // C
  int64_t intermediate_size = 0;        // F
  int64_t num_hidden_layers = 0;        // L
  int64_t num_attention_heads = 0;      // NH
  int64_t num_key_value_heads = 0;      // KVH (config default: NH)
  int64_t head_dim = 0;                 // HS (config default: C / NH)
  int64_t vocab_size = 0;               // V
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool qkv_bias = false;                // q_proj/k_proj/v_proj carry a bias
  bool o_bias = false;                  // o_proj carries a bias (llama attention_bias only)
  bool mlp_bias = false;                // gate/up/down carry a bias (llama mlp_bias)
  bool qk_norm = false;                 // per-head RMSNorm of q and k before RoPE (qwen3)
  bool tie_word_embeddings = false;     // lm_head.weight is model.embed_tokens.weight
  double initializer_range = 0.02;      // std of the normal init of matrices and embeddings
  // Sliding window and RoPE per layer (see the header comment). The config fields are kept as read so
  // that to_json writes back what transformers derives the same layers from.
  bool use_sliding_window = false;      // qwen2/qwen3/smollm3 field
  int64_t sliding_window = 0;           // the config's sliding_window, 0 = null
  int64_t max_window_layers = 0;        // qwen2/qwen3 field (default 28)
  int64_t no_rope_layer_interval = 4;   // smollm3 field
  std::vector<bool> sliding_layers;     // (L) layer_types[i] == "sliding_attention"
  std::vector<bool> rope_layers;        // (L) RoPE applied (smollm3 no_rope_layers[i] == 1; else all true)
  // Gemma 3 (see the header comment); the defaults are every other family's structure.
  MlpActivation mlp_activation = MlpActivation::Silu;
  bool norm_weight_offset = false;      // RMSNorm scales by (1 + w), computed in fp32; zero-init weights
  bool sandwich_norms = false;          // norms on the attention and MLP outputs too (4 per layer)
  bool scale_embeddings = false;        // embedding rows times sqrt(hidden_size) (embedding_scale())
  bool embedding_padding_idx = false;   // nn.Embedding(padding_idx=pad_token_id): the lookup of that id
                                        // adds no gradient to its row (the tied head's part remains)
  double query_pre_attn_scalar = 0;     // attention scale query_pre_attn_scalar^-0.5; 0: head_dim
  double rope_local_theta = 0;          // RoPE base of sliding layers, without scaling; 0: as full layers
  int64_t sliding_window_pattern = 0;   // gemma3 field as read (written back; layer_types decides)
  // Gemma 2 tanh softcapping (0 = none, the config's null): every attention score s (after the scale,
  // before the mask) becomes cap * tanh(s / cap), and so does every final logit (before the loss, the
  // TRL metrics and generation).
  double attn_logit_softcapping = 0;
  double final_logit_softcapping = 0;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;   // config's eos_token_id: an int or a list
  std::optional<int64_t> pad_token_id;
  std::string torch_dtype = "float32";  // "float32", "bfloat16" or "float16"

  // Parses config.json at `path`. Missing file, bad JSON or unsupported values -> UserError naming
  // the file (and the field and value).
  static ModelConfig from_file(const std::string& path);
  // Parses an already-read JSON object; `source` names it in error messages (usually the path).
  static ModelConfig from_json(const nlohmann::json& json, const std::string& source);

  // A config.json object that transformers' AutoConfig/AutoModelForCausalLM loads back to this model.
  nlohmann::json to_json() const;
  // Writes to_json() to `path` (pretty-printed).
  void save(const std::string& path) const;

  const char* model_type() const;       // "llama" | "qwen2" | ... | "gemma2" | "gemma3_text"
  const char* architecture_name() const;  // "LlamaForCausalLM" | ... | "Gemma3ForCausalLM"
  // The attention window of layer `layer` (AttentionShape::window): sliding_window on a sliding
  // layer, 0 (none) otherwise.
  int64_t attention_window(int64_t layer) const;
  // Whether layer `layer` rotates q and k (false only on SmolLM3's no-RoPE layers).
  bool layer_uses_rope(int64_t layer) const;
  // The softmax scale of the attention scores: query_pre_attn_scalar^-0.5, else head_dim^-0.5.
  float attention_scale() const;
  // The caps as the kernels take them (AttentionShape::softcap, the loss's logit cap): the config's
  // python floats rounded to fp32 where they meet the fp32 scores / logits; 0 = none.
  float attention_softcap() const;
  float final_logit_softcap() const;
  // The embedding multiplier (scale_embeddings): fp32(sqrt(hidden_size)), rounded to bf16 when the
  // weights compute in bf16, as transformers casts its embed_scale to the weights' dtype.
  float embedding_scale(bool bf16) const;
  // Whether layer `layer`'s RoPE uses the local base (rope_local_theta) instead of rope_theta.
  bool layer_uses_local_rope(int64_t layer) const;
  // "full_attention" / "sliding_attention" per layer, as transformers' layer_types.
  std::vector<std::string> layer_types() const;
  // The structure its family gave it, as short phrases for `trlhpc env` ("q/k/v bias", "q/k norms",
  // "GeGLU (tanh GELU)", "tied head", ...); the sizes and the layer pattern are reported separately.
  std::vector<std::string> structure() const;
  // Number of trainable parameters (a tied head counted once), as transformers' num_parameters().
  int64_t parameter_count() const;
};

// RoPE inverse frequencies, HS/2 floats: inv_freq[i] = 1 / theta^(2i/HS), then the llama3 rescaling
// when enabled, computed in fp32 step by step as transformers' _compute_default_rope_parameters and
// _compute_llama3_parameters (modeling_rope_utils.py) do:
//   wavelen = 2*pi / inv_freq;  low_wl = orig_max / low_freq_factor;  high_wl = orig_max / high_freq_factor
//   wavelen > low_wl           -> inv_freq / factor
//   wavelen < high_wl          -> inv_freq
//   otherwise (smooth = (orig_max / wavelen - low) / (high - low))
//                              -> (1 - smooth) * inv_freq / factor + smooth * inv_freq
// `local`: the frequencies of the layers that rotate with rope_local_theta (no scaling).
// "linear" scaling divides each inv_freq by factor in fp32.
std::vector<float> rope_inverse_frequencies(const ModelConfig& config, bool local = false);

}  // namespace trlhpc
