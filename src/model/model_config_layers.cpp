// The per-layer pattern of a config.json: which layers use a sliding window and which rotate q/k,
// derived as transformers 5's configuration classes derive layer_types and no_rope_layers
// (Qwen2Config / Qwen3Config / MistralConfig / SmolLM3Config __post_init__; see model_config.hpp).
#include <string>
#include <vector>

#include "src/model/config_field_reader.hpp"
#include "trlhpc/model/model_config.hpp"

namespace trlhpc {
namespace model_config_detail {
namespace {

// layer_types as given: L entries, each "full_attention" or "sliding_attention".
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

// no_rope_layers as given: L entries, 1 = the layer uses RoPE, 0 = it does not.
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

}  // namespace

void parse_layer_pattern(const FieldReader& r, ModelConfig& c) {
  const int64_t L = c.num_hidden_layers;
  c.rope_layers.assign(static_cast<size_t>(L), true);
  c.sliding_layers.assign(static_cast<size_t>(L), false);
  const std::optional<int64_t> window_field = r.optional_integer("sliding_window");
  if (window_field && *window_field <= 0) r.fail("sliding_window", "must be a positive integer or null");
  switch (c.architecture) {
    case ModelArchitecture::Llama:
      if (r.has("layer_types")) c.sliding_layers = read_layer_types(r, L);
      if (r.has("sliding_window") || r.boolean("use_sliding_window", false))
        r.fail("sliding_window", "LlamaForCausalLM has no sliding window; remove it (or use model_type mistral)");
      break;
    case ModelArchitecture::Qwen2:
    case ModelArchitecture::Qwen3: {
      // Qwen*Config: sliding_window defaults to 4096 and is nulled unless use_sliding_window.
      c.use_sliding_window = r.boolean("use_sliding_window", false);
      c.sliding_window = c.use_sliding_window ? (r.has("sliding_window") ? *window_field : 4096) : 0;
      c.max_window_layers = r.integer("max_window_layers", 28);
      if (r.has("layer_types")) {
        c.sliding_layers = read_layer_types(r, L);
      } else if (c.sliding_window > 0) {
        for (int64_t i = c.max_window_layers; i < L; ++i) c.sliding_layers[static_cast<size_t>(i)] = true;
      }
      break;
    }
    case ModelArchitecture::Mistral:
      // MistralConfig: sliding_window defaults to 4096; null = full attention; every layer the same
      // (transformers ignores layer_types for Mistral, so a differing one is refused, not ignored).
      c.sliding_window = r.present("sliding_window") ? window_field.value_or(0) : 4096;
      c.sliding_layers.assign(static_cast<size_t>(L), c.sliding_window > 0);
      if (r.has("layer_types") && read_layer_types(r, L) != c.sliding_layers)
        r.fail("layer_types", "MistralForCausalLM applies sliding_window to every layer; remove layer_types");
      break;
    case ModelArchitecture::SmolLM3: {
      c.use_sliding_window = r.boolean("use_sliding_window", false);
      c.sliding_window = window_field.value_or(0);
      c.no_rope_layer_interval = r.positive("no_rope_layer_interval", 4);
      if (r.has("no_rope_layers")) {
        c.rope_layers = read_no_rope_layers(r, L);
      } else {
        for (int64_t i = 0; i < L; ++i)
          c.rope_layers[static_cast<size_t>(i)] = (i + 1) % c.no_rope_layer_interval != 0;
      }
      if (r.has("layer_types")) {
        c.sliding_layers = read_layer_types(r, L);
      } else if (c.use_sliding_window && c.sliding_window > 0) {
        for (int64_t i = 0; i < L; ++i) c.sliding_layers[static_cast<size_t>(i)] = !c.rope_layers[static_cast<size_t>(i)];
      }
      // transformers' eager/sdpa mask follows layer_types while its flash path follows
      // use_sliding_window: a sliding layer without use_sliding_window is ambiguous there.
      for (bool sliding : c.sliding_layers)
        if (sliding && !c.use_sliding_window)
          r.fail("use_sliding_window", "layer_types names sliding_attention layers but use_sliding_window is false "
                                       "(transformers' attention implementations disagree on such a layer); set it "
                                       "to true or make those layers full_attention");
      break;
    }
    case ModelArchitecture::Gemma3: {
      const std::vector<bool> types = r.has("layer_types") ? read_layer_types(r, L) : std::vector<bool>();
      parse_gemma3_layers(r, c, r.has("layer_types") ? &types : nullptr);
      break;
    }
  }
  for (bool sliding : c.sliding_layers)
    if (sliding && c.sliding_window <= 0)
      r.fail("sliding_window", "layer_types names sliding_attention layers but there is no window (null, or "
                               "use_sliding_window is false); set sliding_window and use_sliding_window");
}

}  // namespace model_config_detail

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

}  // namespace trlhpc
