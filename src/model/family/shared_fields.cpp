// config.json fields that several families spell the same way (model_family.hpp).
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "src/model/family/model_family.hpp"

namespace trlhpc::model_family_detail {

void read_rope(const json& root, const FieldReader& top, ModelConfig& config) {
  config.rope_theta = top.number("rope_theta", 10000.0);
  if (top.has("partial_rotary_factor") && top.number("partial_rotary_factor", 1.0) != 1.0)
    top.fail("partial_rotary_factor", "partial rotary embeddings are not supported; remove it or set 1.0");
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!top.has(key)) continue;
    const json& object = root.at(key);
    if (!object.is_object()) top.fail(key, "expected an object or null");
    const FieldReader r(object, top.source(), std::string(key) + ".");
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

void require_silu(const FieldReader& r) {
  if (r.string("hidden_act", "silu") != "silu")
    r.fail("hidden_act", "unsupported activation; trlhpc implements SwiGLU with \"silu\"");
}

std::vector<bool> read_layer_types(const FieldReader& r, int64_t L) {
  const json& types = r.at("layer_types");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != L)
    r.fail("layer_types", "expected a list of num_hidden_layers (" + std::to_string(L) + ") entries");
  std::vector<bool> sliding;
  for (const json& t : types) {
    if (t == "full_attention") sliding.push_back(false);
    else if (t == "sliding_attention") sliding.push_back(true);
    else r.fail("layer_types", "entries must be \"full_attention\" or \"sliding_attention\", got " + t.dump());
  }
  return sliding;
}

std::vector<bool> read_no_rope_layers(const FieldReader& r, int64_t L) {
  const json& flags = r.at("no_rope_layers");
  if (!flags.is_array() || static_cast<int64_t>(flags.size()) != L)
    r.fail("no_rope_layers", "expected a list of num_hidden_layers (" + std::to_string(L) + ") entries of 0 or 1");
  std::vector<bool> rope;
  for (const json& f : flags) {
    if (f == 1 || f == true) rope.push_back(true);
    else if (f == 0 || f == false) rope.push_back(false);
    else r.fail("no_rope_layers", "entries must be 1 (RoPE) or 0 (no RoPE), got " + f.dump());
  }
  return rope;
}

std::optional<int64_t> read_window(const FieldReader& r) {
  const std::optional<int64_t> window = r.optional_integer("sliding_window");
  if (window && *window <= 0) r.fail("sliding_window", "must be a positive integer or null");
  return window;
}

void read_softcapping(const FieldReader& r, ModelConfig& c, std::optional<double> attn_default,
                      std::optional<double> final_default) {
  const auto read_cap = [&r](const char* field, std::optional<double> fallback) {
    if (!r.present(field)) return fallback.value_or(0.0);
    if (!r.has(field)) return 0.0;  // null: no cap
    const double cap = r.number(field, 0.0);
    // transformers divides by the cap: 0 would turn every score into NaN, a negative cap flips the sign.
    if (!(cap > 0) || !std::isfinite(cap)) r.fail(field, "must be a positive number, or null for no softcapping");
    return cap;
  };
  c.attn_logit_softcapping = read_cap("attn_logit_softcapping", attn_default);
  c.final_logit_softcapping = read_cap("final_logit_softcapping", final_default);
}

void write_softcapping(const ModelConfig& c, json& j) {
  j["attn_logit_softcapping"] = c.attn_logit_softcapping > 0 ? json(c.attn_logit_softcapping) : json(nullptr);
  j["final_logit_softcapping"] = c.final_logit_softcapping > 0 ? json(c.final_logit_softcapping) : json(nullptr);
}

}  // namespace trlhpc::model_family_detail
