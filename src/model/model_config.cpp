#include "trlhpc/model/model_config.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace {

using nlohmann::json;

// Reads fields of one JSON object, naming the file and the field in every error.
class FieldReader {
 public:
  FieldReader(const json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  bool has(const char* field) const { return object_.contains(field) && !object_.at(field).is_null(); }
  const json& at(const char* field) const { return object_.at(field); }

  [[noreturn]] void fail(const char* field, const std::string& problem) const {
    std::string value = object_.contains(field) ? object_.at(field).dump() : "(missing)";
    throw UserError(source_ + ": field '" + prefix_ + field + "' = " + value + ": " + problem);
  }

  int64_t integer(const char* field, std::optional<int64_t> fallback = std::nullopt) const {
    if (!has(field)) {
      if (fallback) return *fallback;
      fail(field, "required; add it to the config");
    }
    const json& v = at(field);
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()) return static_cast<int64_t>(v.get<double>());
    fail(field, "expected an integer");
  }
  int64_t positive(const char* field, std::optional<int64_t> fallback = std::nullopt) const {
    int64_t value = integer(field, fallback);
    if (value <= 0) fail(field, "must be a positive integer");
    return value;
  }
  double number(const char* field, double fallback) const {
    if (!has(field)) return fallback;
    if (!at(field).is_number()) fail(field, "expected a number");
    return at(field).get<double>();
  }
  bool boolean(const char* field, bool fallback) const {
    if (!has(field)) return fallback;
    if (!at(field).is_boolean()) fail(field, "expected true or false");
    return at(field).get<bool>();
  }
  std::string string(const char* field, const std::string& fallback) const {
    if (!has(field)) return fallback;
    if (!at(field).is_string()) fail(field, "expected a string");
    return at(field).get<std::string>();
  }
  std::optional<int64_t> optional_integer(const char* field) const {
    if (!has(field)) return std::nullopt;
    return integer(field);
  }

 private:
  const json& object_;
  std::string source_;
  std::string prefix_;
};

ModelArchitecture parse_architecture(const FieldReader& r) {
  std::optional<ModelArchitecture> from_architectures, from_model_type;
  if (r.has("architectures")) {
    const json& list = r.at("architectures");
    if (!list.is_array() || list.empty() || !list[0].is_string())
      r.fail("architectures", "expected a list like [\"LlamaForCausalLM\"]");
    const std::string name = list[0].get<std::string>();
    if (name == "LlamaForCausalLM") from_architectures = ModelArchitecture::Llama;
    else if (name == "Qwen2ForCausalLM") from_architectures = ModelArchitecture::Qwen2;
    else if (name == "Qwen3ForCausalLM") from_architectures = ModelArchitecture::Qwen3;
    else r.fail("architectures", "unsupported architecture; trlhpc trains LlamaForCausalLM, Qwen2ForCausalLM and "
                                 "Qwen3ForCausalLM");
  }
  if (r.has("model_type")) {
    const std::string type = r.string("model_type", "");
    if (type == "llama") from_model_type = ModelArchitecture::Llama;
    else if (type == "qwen2") from_model_type = ModelArchitecture::Qwen2;
    else if (type == "qwen3") from_model_type = ModelArchitecture::Qwen3;
    else r.fail("model_type", "unsupported model type; trlhpc trains \"llama\", \"qwen2\" and \"qwen3\"");
  }
  if (from_architectures && from_model_type && *from_architectures != *from_model_type)
    r.fail("model_type", "does not match the architectures field; make them agree");
  if (from_architectures) return *from_architectures;
  if (from_model_type) return *from_model_type;
  r.fail("architectures",
         "neither architectures nor model_type is given; add \"model_type\": \"llama\", \"qwen2\" or \"qwen3\"");
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
  if (r.string("hidden_act", "silu") != "silu")
    r.fail("hidden_act", "unsupported activation; trlhpc implements SwiGLU with \"silu\"");
  if (r.boolean("use_sliding_window", false))
    r.fail("use_sliding_window", "sliding-window attention is not supported yet; set it to false");
  if (r.has("layer_types")) {
    const json& types = r.at("layer_types");
    if (!types.is_array()) r.fail("layer_types", "expected a list");
    for (const json& t : types)
      if (t != "full_attention")
        r.fail("layer_types", "only \"full_attention\" layers are supported (sliding-window attention is not "
                              "implemented yet)");
  }
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
  if (!qwen3 && !r.has("head_dim") && c.hidden_size % c.num_attention_heads != 0)
    r.fail("num_attention_heads", "must divide hidden_size (" + std::to_string(c.hidden_size) +
                                      ") when head_dim is not given");
  // Qwen3Config's head_dim defaults to 128 whatever hidden_size / num_attention_heads is.
  c.head_dim = r.positive("head_dim", qwen3 ? 128 : c.hidden_size / c.num_attention_heads);
  c.vocab_size = r.positive("vocab_size");
  c.max_position_embeddings =
      r.positive("max_position_embeddings", c.architecture == ModelArchitecture::Llama ? 2048 : 32768);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.initializer_range = r.number("initializer_range", 0.02);
  parse_rope(root, source, c);
  if (c.architecture == ModelArchitecture::Qwen2) {
    c.qkv_bias = true;  // Qwen2Attention: q/k/v Linear(bias=True), o_proj bias=False; Qwen2MLP no bias
    c.o_bias = false;
    c.mlp_bias = false;
  } else if (qwen3) {
    // Qwen3Attention: q/k/v/o Linear(bias=attention_bias); Qwen3MLP no bias; q_norm/k_norm always.
    c.qkv_bias = c.o_bias = r.boolean("attention_bias", false);
    c.mlp_bias = false;
    c.qk_norm = true;
  } else {
    c.qkv_bias = c.o_bias = r.boolean("attention_bias", false);
    c.mlp_bias = r.boolean("mlp_bias", false);
  }
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  c.bos_token_id = r.optional_integer("bos_token_id");
  c.eos_token_ids = parse_eos(r);
  c.pad_token_id = r.optional_integer("pad_token_id");
  c.torch_dtype = r.string("torch_dtype", r.string("dtype", "float32"));
  reject_unsupported(r, c);
  return c;
}

const char* ModelConfig::model_type() const {
  switch (architecture) {
    case ModelArchitecture::Qwen2: return "qwen2";
    case ModelArchitecture::Qwen3: return "qwen3";
    case ModelArchitecture::Llama: break;
  }
  return "llama";
}

const char* ModelConfig::architecture_name() const {
  switch (architecture) {
    case ModelArchitecture::Qwen2: return "Qwen2ForCausalLM";
    case ModelArchitecture::Qwen3: return "Qwen3ForCausalLM";
    case ModelArchitecture::Llama: break;
  }
  return "LlamaForCausalLM";
}

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
  if (rope_scaling.enabled) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", rope_scaling.factor},
                         {"low_freq_factor", rope_scaling.low_freq_factor},
                         {"high_freq_factor", rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", rope_scaling.original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["hidden_act"] = "silu";
  if (architecture == ModelArchitecture::Llama) {
    j["attention_bias"] = qkv_bias;
    j["mlp_bias"] = mlp_bias;
  } else {
    if (architecture == ModelArchitecture::Qwen3) j["attention_bias"] = qkv_bias;
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = num_hidden_layers;
  }
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
  int64_t layer = 2 * C;                               // input/post-attention RMSNorm weights
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

std::vector<float> rope_inverse_frequencies(const ModelConfig& config) {
  const int64_t dim = config.head_dim;
  const float base = static_cast<float>(config.rope_theta);
  std::vector<float> inv_freq(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    // torch: 1.0 / (base ** (arange(0, dim, 2).float() / dim)); the exponent is an fp32 quotient.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float power = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
    inv_freq[static_cast<size_t>(i)] = 1.0f / power;
  }
  if (!config.rope_scaling.enabled) return inv_freq;

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
