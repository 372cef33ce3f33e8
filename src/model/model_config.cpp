#include "trlhpc/model/model_config.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include "src/model/config_field_reader.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace {

using nlohmann::json;
using model_config_detail::FieldReader;

// The supported architectures: (architectures[0], model_type).
struct ArchitectureName {
  ModelArchitecture architecture;
  const char *class_name, *model_type;
};
constexpr ArchitectureName kArchitectures[] = {
    {ModelArchitecture::Llama, "LlamaForCausalLM", "llama"},
    {ModelArchitecture::Qwen2, "Qwen2ForCausalLM", "qwen2"},
    {ModelArchitecture::Qwen3, "Qwen3ForCausalLM", "qwen3"},
    {ModelArchitecture::Mistral, "MistralForCausalLM", "mistral"},
    {ModelArchitecture::SmolLM3, "SmolLM3ForCausalLM", "smollm3"},
    {ModelArchitecture::Gemma3, "Gemma3ForCausalLM", "gemma3_text"},
};
constexpr const char* kSupportedClasses =
    "LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM, SmolLM3ForCausalLM and "
    "Gemma3ForCausalLM";
constexpr const char* kSupportedTypes =
    "\"llama\", \"qwen2\", \"qwen3\", \"mistral\", \"smollm3\" and \"gemma3_text\"";

const ArchitectureName& name_of(ModelArchitecture a) {
  for (const ArchitectureName& n : kArchitectures)
    if (n.architecture == a) return n;
  return kArchitectures[0];
}

ModelArchitecture parse_architecture(const FieldReader& r) {
  std::optional<ModelArchitecture> from_architectures, from_model_type;
  if (r.has("architectures")) {
    const json& list = r.at("architectures");
    if (!list.is_array() || list.empty() || !list[0].is_string())
      r.fail("architectures", "expected a list like [\"LlamaForCausalLM\"]");
    const std::string name = list[0].get<std::string>();
    for (const ArchitectureName& n : kArchitectures)
      if (name == n.class_name) from_architectures = n.architecture;
    if (!from_architectures)
      r.fail("architectures", std::string("unsupported architecture; trlhpc trains ") + kSupportedClasses);
  }
  if (r.has("model_type")) {
    const std::string type = r.string("model_type", "");
    for (const ArchitectureName& n : kArchitectures)
      if (type == n.model_type) from_model_type = n.architecture;
    if (!from_model_type) r.fail("model_type", std::string("unsupported model type; trlhpc trains ") + kSupportedTypes);
  }
  if (from_architectures && from_model_type && *from_architectures != *from_model_type)
    r.fail("model_type", "does not match the architectures field; make them agree");
  if (from_architectures) return *from_architectures;
  if (from_model_type) return *from_model_type;
  r.fail("architectures", std::string("neither architectures nor model_type is given; add \"model_type\": one of ") +
                              kSupportedTypes);
}

// rope_scaling (transformers 4) or rope_parameters (transformers 5): null, "default" or "llama3".
void parse_rope(const json& root, const std::string& source, ModelConfig& config) {
  const FieldReader top(root, source);
  config.rope_theta = top.number("rope_theta", 10000.0);
  if (top.has("partial_rotary_factor") && top.number("partial_rotary_factor", 1.0) != 1.0)
    top.fail("partial_rotary_factor", "partial rotary embeddings are not supported; remove it or set 1.0");
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!top.has(key)) continue;
    const json& object = root.at(key);
    if (!object.is_object()) top.fail(key, "expected an object or null");
    const FieldReader r(object, source, std::string(key) + ".");
    if (r.has("rope_theta")) config.rope_theta = r.number("rope_theta", config.rope_theta);
    if (r.has("partial_rotary_factor") && r.number("partial_rotary_factor", 1.0) != 1.0)
      r.fail("partial_rotary_factor", "partial rotary embeddings are not supported; remove it or set 1.0");
    const char* type_field = r.has("rope_type") ? "rope_type" : "type";
    const std::string type = r.string(type_field, "default");
    if (type == "default") continue;
    if (type != "llama3")
      r.fail(type_field, "unsupported RoPE scaling; trlhpc implements \"default\" and \"llama3\"");
    RopeScaling& s = config.rope_scaling;
    s.enabled = true;
    s.factor = r.number("factor", 0.0);
    s.low_freq_factor = r.number("low_freq_factor", 0.0);
    s.high_freq_factor = r.number("high_freq_factor", 0.0);
    s.original_max_position_embeddings = r.positive("original_max_position_embeddings");
    if (!(s.factor > 0)) r.fail("factor", "llama3 rope scaling needs a positive factor");
    if (!(s.low_freq_factor > 0)) r.fail("low_freq_factor", "llama3 rope scaling needs a positive low_freq_factor");
    if (!(s.high_freq_factor > s.low_freq_factor))
      r.fail("high_freq_factor", "llama3 rope scaling needs high_freq_factor > low_freq_factor");
  }
  if (!(config.rope_theta > 0)) top.fail("rope_theta", "must be positive");
}

void reject_unsupported(const FieldReader& r, const ModelConfig& config) {
  // Gemma 3 reads hidden_activation instead (model_config_gemma.cpp); its hidden_act is unused.
  if (config.architecture != ModelArchitecture::Gemma3 && r.string("hidden_act", "silu") != "silu")
    r.fail("hidden_act", "unsupported activation; trlhpc implements SwiGLU with \"silu\"");
  if (r.number("attention_dropout", 0.0) != 0.0)
    r.fail("attention_dropout", "dropout is not implemented; set it to 0.0");
  if (r.number("mlp_dropout", 0.0) != 0.0) r.fail("mlp_dropout", "dropout is not implemented; set it to 0.0");
  if (config.num_attention_heads % config.num_key_value_heads != 0)
    r.fail("num_key_value_heads", "must divide num_attention_heads (" +
                                      std::to_string(config.num_attention_heads) + ")");
  if (config.head_dim % 2 != 0) r.fail("head_dim", "RoPE needs an even head size");
  if (!(config.rms_norm_eps > 0)) r.fail("rms_norm_eps", "must be positive");
  if (!(config.initializer_range >= 0)) r.fail("initializer_range", "must be >= 0");
}

std::vector<int64_t> parse_eos(const FieldReader& r) {
  if (!r.has("eos_token_id")) return {};
  const json& v = r.at("eos_token_id");
  if (v.is_number_integer()) return {v.get<int64_t>()};
  if (!v.is_array()) r.fail("eos_token_id", "expected an integer or a list of integers");
  std::vector<int64_t> ids;
  for (const json& id : v) {
    if (!id.is_number_integer()) r.fail("eos_token_id", "expected an integer or a list of integers");
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

// The fields only some architectures have, as their configuration classes name them, so that
// transformers derives the same layers back (the sliding window is written as read: 0 = null).
void write_architecture_fields(const ModelConfig& c, json& j) {
  const json window = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  switch (c.architecture) {
    case ModelArchitecture::Llama:
      j["attention_bias"] = c.qkv_bias;
      j["mlp_bias"] = c.mlp_bias;
      break;
    case ModelArchitecture::Qwen2:
    case ModelArchitecture::Qwen3:
      if (c.architecture == ModelArchitecture::Qwen3) j["attention_bias"] = c.qkv_bias;
      j["use_sliding_window"] = c.use_sliding_window;
      j["sliding_window"] = window;
      // Before sliding layers existed trlhpc wrote max_window_layers = L; kept when there is no window.
      j["max_window_layers"] = c.sliding_window > 0 ? c.max_window_layers : c.num_hidden_layers;
      if (c.sliding_window > 0) j["layer_types"] = c.layer_types();  // as read or derived; exact either way
      break;
    case ModelArchitecture::Mistral:
      j["sliding_window"] = window;
      break;
    case ModelArchitecture::Gemma3:
      model_config_detail::write_gemma3_fields(c, j);
      break;
    case ModelArchitecture::SmolLM3: {
      j["attention_bias"] = c.qkv_bias;
      j["mlp_bias"] = c.mlp_bias;
      j["use_sliding_window"] = c.use_sliding_window;
      j["sliding_window"] = window;
      json no_rope = json::array();
      for (int64_t i = 0; i < c.num_hidden_layers; ++i) no_rope.push_back(c.layer_uses_rope(i) ? 1 : 0);
      j["no_rope_layers"] = no_rope;
      j["no_rope_layer_interval"] = c.no_rope_layer_interval;
      j["layer_types"] = c.layer_types();
      break;
    }
  }
}

}  // namespace

ModelConfig ModelConfig::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError(path + ": cannot open the model config; check the path (a Hugging Face config.json)");
  json root;
  try {
    root = json::parse(in);
  } catch (const json::exception& e) {
    throw UserError(path + ": not valid JSON (" + e.what() + "); fix or regenerate the config.json");
  }
  return from_json(root, path);
}

ModelConfig ModelConfig::from_json(const json& root, const std::string& source) {
  if (!root.is_object()) throw UserError(source + ": expected a JSON object (a Hugging Face config.json)");
  const FieldReader r(root, source);
  ModelConfig c;
  c.architecture = parse_architecture(r);
  c.hidden_size = r.positive("hidden_size");
  c.intermediate_size = r.positive("intermediate_size");
  c.num_hidden_layers = r.positive("num_hidden_layers");
  c.num_attention_heads = r.positive("num_attention_heads");
  c.num_key_value_heads = r.positive("num_key_value_heads", c.num_attention_heads);
  const bool qwen3 = c.architecture == ModelArchitecture::Qwen3;
  const bool gemma3 = c.architecture == ModelArchitecture::Gemma3;
  if (!qwen3 && !r.has("head_dim") && c.hidden_size % c.num_attention_heads != 0)
    r.fail("num_attention_heads", "must divide hidden_size (" + std::to_string(c.hidden_size) +
                                      ") when head_dim is not given");
  // Qwen3Config's head_dim defaults to 128 whatever hidden_size / num_attention_heads is.
  // Gemma3TextConfig's is 256.
  c.head_dim = r.positive("head_dim", qwen3 ? 128 : gemma3 ? 256 : c.hidden_size / c.num_attention_heads);
  c.vocab_size = r.positive("vocab_size");
  // The configuration classes' defaults (LlamaConfig 2048, MistralConfig 4096 * 32, Qwen / SmolLM3 32768).
  // (Gemma3TextConfig 131072.)
  const int64_t default_max_positions = c.architecture == ModelArchitecture::Llama ? 2048
                                        : c.architecture == ModelArchitecture::Mistral || gemma3 ? 131072
                                                                                                 : 32768;
  c.max_position_embeddings = r.positive("max_position_embeddings", default_max_positions);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.initializer_range = r.number("initializer_range", 0.02);
  if (gemma3) model_config_detail::parse_gemma3_rope(root, source, c);
  else parse_rope(root, source, c);
  if (gemma3) {
    model_config_detail::parse_gemma3_structure(r, c);  // biases, q/k norms, the Gemma flags
  } else if (c.architecture == ModelArchitecture::Qwen2) {
    c.qkv_bias = true;  // Qwen2Attention: q/k/v Linear(bias=True), o_proj bias=False; Qwen2MLP no bias
    c.o_bias = false;
    c.mlp_bias = false;
  } else if (qwen3) {
    // Qwen3Attention: q/k/v/o Linear(bias=attention_bias); Qwen3MLP no bias; q_norm/k_norm always.
    c.qkv_bias = c.o_bias = r.boolean("attention_bias", false);
    c.mlp_bias = false;
    c.qk_norm = true;
  } else if (c.architecture == ModelArchitecture::Mistral) {
    c.qkv_bias = c.o_bias = c.mlp_bias = false;  // MistralAttention / MistralMLP: Linear(bias=False)
  } else {  // llama, smollm3: attention_bias on q/k/v/o, mlp_bias on gate/up/down
    c.qkv_bias = c.o_bias = r.boolean("attention_bias", false);
    c.mlp_bias = r.boolean("mlp_bias", false);
  }
  // SmolLM3Config and Gemma3TextConfig tie the embeddings by default; the others do not.
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", c.architecture == ModelArchitecture::SmolLM3 || gemma3);
  c.bos_token_id = r.optional_integer("bos_token_id");
  c.eos_token_ids = parse_eos(r);
  c.pad_token_id = r.optional_integer("pad_token_id");
  c.torch_dtype = r.string("torch_dtype", r.string("dtype", "float32"));
  reject_unsupported(r, c);
  model_config_detail::parse_layer_pattern(r, c);
  return c;
}

const char* ModelConfig::model_type() const { return name_of(architecture).model_type; }

const char* ModelConfig::architecture_name() const { return name_of(architecture).class_name; }

json ModelConfig::to_json() const {
  json j;
  j["architectures"] = json::array({architecture_name()});
  j["model_type"] = model_type();
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j["vocab_size"] = vocab_size;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  if (rope_scaling.enabled && rope_scaling.linear) {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", rope_scaling.factor}};
  } else if (rope_scaling.enabled) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", rope_scaling.factor},
                         {"low_freq_factor", rope_scaling.low_freq_factor},
                         {"high_freq_factor", rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", rope_scaling.original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  if (architecture != ModelArchitecture::Gemma3) j["hidden_act"] = "silu";
  write_architecture_fields(*this, j);
  j["attention_dropout"] = 0.0;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["initializer_range"] = initializer_range;
  j["bos_token_id"] = bos_token_id ? json(*bos_token_id) : json(nullptr);
  if (eos_token_ids.empty()) j["eos_token_id"] = nullptr;
  else if (eos_token_ids.size() == 1) j["eos_token_id"] = eos_token_ids[0];
  else j["eos_token_id"] = eos_token_ids;
  if (pad_token_id) j["pad_token_id"] = *pad_token_id;
  j["torch_dtype"] = torch_dtype;
  j["use_cache"] = true;
  return j;
}

void ModelConfig::save(const std::string& path) const {
  std::ofstream out(path);
  out << to_json().dump(2) << "\n";
  out.close();
  if (!out) throw RuntimeFailure(rank_prefix() + "writing " + path + " failed (disk full or not writable?)");
}

int64_t ModelConfig::parameter_count() const {
  const int64_t C = hidden_size, F = intermediate_size, V = vocab_size;
  const int64_t q_out = num_attention_heads * head_dim, kv_out = num_key_value_heads * head_dim;
  int64_t layer = (sandwich_norms ? 4 : 2) * C;       // input/post-attention (+ pre/post-MLP) RMSNorm weights
  layer += q_out * C + 2 * kv_out * C + C * q_out;     // q, k, v, o
  if (qkv_bias) layer += q_out + 2 * kv_out;
  if (o_bias) layer += C;
  if (qk_norm) layer += 2 * head_dim;                  // q_norm, k_norm weights
  layer += 3 * F * C;                                  // gate, up, down
  if (mlp_bias) layer += 2 * F + C;
  int64_t total = V * C + num_hidden_layers * layer + C;  // embedding, layers, final norm
  if (!tie_word_embeddings) total += V * C;               // lm_head
  return total;
}

std::vector<float> rope_inverse_frequencies(const ModelConfig& config, bool local) {
  const int64_t dim = config.head_dim;
  const float base = static_cast<float>(local ? config.rope_local_theta : config.rope_theta);
  std::vector<float> inv_freq(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    // torch: 1.0 / (base ** (arange(0, dim, 2).float() / dim)); the exponent is an fp32 quotient.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float power = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
    inv_freq[static_cast<size_t>(i)] = 1.0f / power;
  }
  if (!config.rope_scaling.enabled || local) return inv_freq;
  if (config.rope_scaling.linear) {  // _compute_linear_scaling_rope_parameters: inv_freq /= factor (fp32)
    for (float& f : inv_freq) f /= static_cast<float>(config.rope_scaling.factor);
    return inv_freq;
  }

  // Mirrors the torch expression by expression: python-float operands meet fp32 tensors, so each is
  // rounded to fp32 first, and the arithmetic is fp32 (high - low is a python subtraction, in double).
  const RopeScaling& s = config.rope_scaling;
  const float factor = static_cast<float>(s.factor);
  const float low_freq_factor = static_cast<float>(s.low_freq_factor);
  const float factor_span = static_cast<float>(s.high_freq_factor - s.low_freq_factor);
  const double old_context_len = static_cast<double>(s.original_max_position_embeddings);
  const float low_freq_wavelen = static_cast<float>(old_context_len / s.low_freq_factor);
  const float high_freq_wavelen = static_cast<float>(old_context_len / s.high_freq_factor);
  const float two_pi = static_cast<float>(2.0 * M_PI);
  for (float& f : inv_freq) {
    const float wavelen = two_pi / f;
    const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    if (medium) {
      const float smooth = (static_cast<float>(old_context_len) / wavelen - low_freq_factor) / factor_span;
      // volatile: the products are rounded to fp32 before the sum, as torch does; without it the
      // compiler may fuse `smooth * scaled + low_part` into an FMA and differ by an ulp.
      const volatile float low_part = (1.0f - smooth) * scaled / factor;
      const volatile float high_part = smooth * scaled;
      f = low_part + high_part;
    } else {
      f = scaled;
    }
  }
  return inv_freq;
}

}  // namespace trlhpc
