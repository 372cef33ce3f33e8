#include "trlhpc/model/model_config.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include "src/model/config_field_reader.hpp"
#include "src/model/family/model_family.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace {

using nlohmann::json;
using model_config_detail::FieldReader;

using model_family_detail::ModelFamily;
using model_family_detail::model_families;
using model_family_detail::model_family;

// "A, B and C" of the families' class names or quoted model types, for error messages.
std::string supported_list(bool model_types) {
  std::string list;
  const auto families = model_families();
  for (size_t i = 0; i < families.size(); ++i) {
    if (i) list += i + 1 == families.size() ? " and " : ", ";
    if (model_types) list.append("\"").append(families[i]->model_type).append("\"");
    else list += families[i]->class_name;
  }
  return list;
}

const ModelFamily& parse_family(const FieldReader& r) {
  const ModelFamily *from_architectures = nullptr, *from_model_type = nullptr;
  if (r.has("architectures")) {
    const json& list = r.at("architectures");
    if (!list.is_array() || list.empty() || !list[0].is_string())
      r.fail("architectures", "expected a list like [\"LlamaForCausalLM\"]");
    const std::string name = list[0].get<std::string>();
    for (const ModelFamily* family : model_families())
      if (name == family->class_name) from_architectures = family;
    if (!from_architectures)
      r.fail("architectures", "unsupported architecture; trlhpc trains " + supported_list(false));
  }
  if (r.has("model_type")) {
    const std::string type = r.string("model_type", "");
    for (const ModelFamily* family : model_families())
      if (type == family->model_type) from_model_type = family;
    if (!from_model_type) r.fail("model_type", "unsupported model type; trlhpc trains " + supported_list(true));
  }
  if (from_architectures && from_model_type && from_architectures != from_model_type)
    r.fail("model_type", "does not match the architectures field; make them agree");
  if (from_architectures) return *from_architectures;
  if (from_model_type) return *from_model_type;
  r.fail("architectures", "neither architectures nor model_type is given; add \"model_type\": one of " +
                              supported_list(true));
}

void reject_unsupported(const FieldReader& r, const ModelConfig& config) {
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
  const ModelFamily& family = parse_family(r);
  c.architecture = family.architecture;
  c.hidden_size = r.positive("hidden_size");
  c.intermediate_size = r.positive("intermediate_size");
  c.num_hidden_layers = r.positive("num_hidden_layers");
  c.num_attention_heads = r.positive("num_attention_heads");
  c.num_key_value_heads = r.positive("num_key_value_heads", c.num_attention_heads);
  if (!family.default_head_dim && !r.has("head_dim") && c.hidden_size % c.num_attention_heads != 0)
    r.fail("num_attention_heads", "must divide hidden_size (" + std::to_string(c.hidden_size) +
                                      ") when head_dim is not given");
  c.head_dim = r.positive("head_dim", family.default_head_dim.value_or(c.hidden_size / c.num_attention_heads));
  c.vocab_size = r.positive("vocab_size");
  c.max_position_embeddings = r.positive("max_position_embeddings", family.default_max_position_embeddings);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.initializer_range = r.number("initializer_range", 0.02);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", family.default_tie_word_embeddings);
  c.bos_token_id = r.optional_integer("bos_token_id");
  c.eos_token_ids = parse_eos(r);
  c.pad_token_id = r.optional_integer("pad_token_id");
  c.torch_dtype = r.string("torch_dtype", r.string("dtype", "float32"));
  reject_unsupported(r, c);
  // The family's structure and layer pattern, from every layer full-attention with RoPE.
  c.rope_layers.assign(static_cast<size_t>(c.num_hidden_layers), true);
  c.sliding_layers.assign(static_cast<size_t>(c.num_hidden_layers), false);
  model_family_detail::read_window(r);  // a non-positive sliding_window is refused whatever the family
  family.read(root, r, c);
  for (bool sliding : c.sliding_layers)
    if (sliding && c.sliding_window <= 0)
      r.fail("sliding_window", "layer_types names sliding_attention layers but there is no window (null, or "
                               "use_sliding_window is false); set sliding_window and use_sliding_window");
  return c;
}

const char* ModelConfig::model_type() const { return model_family(architecture).model_type; }

const char* ModelConfig::architecture_name() const { return model_family(architecture).class_name; }

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
  if (mlp_activation == MlpActivation::Silu) j["hidden_act"] = "silu";
  model_family(architecture).write(*this, j);
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
