// Gemma 2 (Gemma2ForCausalLM, model_type "gemma2"), read as transformers 5's Gemma2Config derives its
// fields (and written back in the spelling transformers 4 and 5 both read): embeddings times
// sqrt(hidden_size); every RMSNorm scales by (1 + w) in fp32 (weights are offsets); input_layernorm before
// attention, post_attention_layernorm on the attention output, pre_/post_feedforward_layernorm around a
// GeGLU MLP with tanh GELU; no q/k norms; attention scale query_pre_attn_scalar^-0.5; one RoPE base
// (rope_theta, default 10000) for every layer; layer_types, or "sliding_attention" on the even layers
// (0, 2, ...) and "full_attention" on the odd ones, with sliding_window 4096 by default; tanh softcapping
// of the attention scores (attn_logit_softcapping, default 50) and of the final logits
// (final_logit_softcapping, default 30). Bidirectional attention is refused.
#include <cmath>
#include <string>

#include "src/model/family/model_family.hpp"

namespace trlhpc::model_family_detail {
namespace {

void read_structure(const FieldReader& r, ModelConfig& c) {
  read_gemma_structure(r, c, "Gemma2Config");  // no q/k norms
  read_softcapping(r, c, 50.0, 30.0);
}

// layer_types, or "sliding_attention" where (i + 1) % 2 != 0 (Gemma2Config.__post_init__).
void read_layers(const FieldReader& r, ModelConfig& c) {
  const std::optional<int64_t> window = read_window(r);
  c.sliding_window = r.present("sliding_window") ? window.value_or(0) : 4096;
  if (r.has("layer_types")) {
    c.sliding_layers = read_layer_types(r, c.num_hidden_layers);
  } else {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.sliding_layers[static_cast<size_t>(i)] = (i + 1) % 2 != 0;
  }
}

void read(const json& root, const FieldReader& r, ModelConfig& c) {
  read_rope(root, r, c);  // rope_theta (default 10000) for every layer, as Gemma2RotaryEmbedding
  read_structure(r, c);
  read_layers(r, c);
}

void write(const ModelConfig& c, json& j) {
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["attention_bias"] = c.qkv_bias;
  // Gemma2Config declares it an int (transformers 5's strict config refuses 24.0).
  const double scalar = c.query_pre_attn_scalar;
  j["query_pre_attn_scalar"] = scalar == std::floor(scalar) ? json(static_cast<int64_t>(scalar)) : json(scalar);
  j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  j["layer_types"] = c.layer_types();
  write_softcapping(c, j);
  j["use_bidirectional_attention"] = nullptr;  // Gemma2Config's default (causal), as transformers writes it
}

}  // namespace

void read_gemma_structure(const FieldReader& r, ModelConfig& c, const char* config_class) {
  c.qkv_bias = c.o_bias = r.boolean("attention_bias", false);  // GemmaNAttention: Linear(bias=attention_bias)
  c.mlp_bias = false;
  c.norm_weight_offset = c.sandwich_norms = c.scale_embeddings = true;
  c.mlp_activation = MlpActivation::GeluTanh;
  c.embedding_padding_idx = true;  // GemmaNTextScaledWordEmbedding(padding_idx=pad_token_id)
  // Gemma reads hidden_activation; its hidden_act is unused.
  if (r.string("hidden_activation", "gelu_pytorch_tanh") != "gelu_pytorch_tanh")
    r.fail("hidden_activation", "unsupported activation; trlhpc implements Gemma's \"gelu_pytorch_tanh\"");
  c.query_pre_attn_scalar = r.number("query_pre_attn_scalar", 256.0);
  if (!(c.query_pre_attn_scalar > 0)) r.fail("query_pre_attn_scalar", "must be positive");
  if (c.hidden_size % c.num_attention_heads != 0)
    r.fail("num_attention_heads", "must divide hidden_size (" + std::to_string(c.hidden_size) + "), as " +
                                      config_class + " requires");
  if (r.boolean("use_bidirectional_attention", false))
    r.fail("use_bidirectional_attention", "bidirectional attention is not implemented; set it to false");
  // Gemma2Config's and Gemma3TextConfig's token ids (pad 0, eos 1, bos 2) where config.json leaves them
  // out: the padding id decides which embedding row the lookup leaves without a gradient. An explicit
  // null stays null.
  if (!r.present("pad_token_id")) c.pad_token_id = 0;
  if (!r.present("eos_token_id")) c.eos_token_ids = {1};
  if (!r.present("bos_token_id")) c.bos_token_id = 2;
}

// Gemma2Config: head_dim 256, max_position_embeddings 8192, tied head.
const ModelFamily kGemma2Family{ModelArchitecture::Gemma2, "Gemma2ForCausalLM", "gemma2", 256, 8192, true, read, write};

}  // namespace trlhpc::model_family_detail
