// PEFT's modules_to_save next to LoRA adapters: which modules train in full, where their copies live in
// the adapter store, and what they start from.
//
// PEFT wraps every module whose full name ends with a key (a plain string suffix: "norm" names
// model.norm and every layer's norms) in a wrapper holding a trainable copy; the original stays frozen
// and is what disabling the adapter gives back. Its saved adapter holds the copy under the module's
// own key ("base_model.model.lm_head.weight"). On a tied model the head and the embedding are one
// tensor; PEFT's copy of either is a tensor of its own (it warns that this unties them), which is what
// trlhpc does: the head copy is "lm_head.weight" even though the base has none.
#include <algorithm>

#include "src/model/lora_saved_modules.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/model/parameter_names.hpp"

namespace trlhpc {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Every module name transformers' named_modules() gives for this model's layers.
std::vector<std::string> layer_module_names(const ModelConfig& config) {
  std::vector<std::string> names = {"model.layers"};
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    names.push_back(p);
    for (const char* m : {"self_attn", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "mlp.act_fn", "input_layernorm",
                          "post_attention_layernorm"})
      names.push_back(p + "." + m);
    if (config.qk_norm) {
      names.push_back(p + ".self_attn.q_norm");
      names.push_back(p + ".self_attn.k_norm");
    }
  }
  return names;
}

}  // namespace

LoraSavedModules resolve_lora_modules_to_save(const ModelConfig& config, const LoraConfig& lora) {
  LoraSavedModules saved;
  const std::string supported = "embed_tokens, model.norm or lm_head";
  for (const std::string& key : lora.modules_to_save) {
    if (key.empty()) throw UserError("--lora_modules_to_save: an empty name would match every module; name " + supported);
    bool matched = false;
    if (ends_with("model.embed_tokens", key)) saved.embed_tokens = matched = true;
    if (ends_with("model.norm", key)) saved.norm = matched = true;
    if (ends_with("lm_head", key)) saved.lm_head = matched = true;
    for (const std::string& module : {std::string("model"), std::string("model.rotary_emb")})
      if (ends_with(module, key))
        throw UserError("--lora_modules_to_save " + key + " names " + module +
                        ", which trlhpc cannot train in full next to adapters; name " + supported);
    for (const std::string& module : layer_module_names(config))
      if (ends_with(module, key))
        throw UserError("--lora_modules_to_save " + key + " matches " + module +
                        " (PEFT matches any module whose name ends with it): fully trained modules inside the layers "
                        "are not supported; target a layer linear with --lora_target_modules, or name " + supported);
    if (!matched)
      throw UserError("--lora_modules_to_save " + key + " matches no module of this " + config.architecture_name() +
                      "; name " + supported);
  }
  return saved;
}

int LoraUnitLayout::of_decoder_unit(int decoder_unit) const {
  if (decoder_unit == 0) return embed;
  if (decoder_unit >= 1 && decoder_unit <= layers) return first_layer + decoder_unit - 1;
  if (decoder_unit == layers + 1) return final;
  return -1;
}

LoraUnitLayout lora_unit_layout(const ModelConfig& config, const LoraConfig& lora) {
  const LoraSavedModules saved = resolve_lora_modules_to_save(config, lora);
  LoraUnitLayout layout;
  layout.layers = static_cast<int>(config.num_hidden_layers);
  if (saved.embed_tokens) layout.embed = layout.count++;
  layout.first_layer = layout.count;
  layout.count += layout.layers;
  if (saved.norm || saved.lm_head) layout.final = layout.count++;
  return layout;
}

bool is_lora_factor(const std::string& name) {
  return ends_with(name, ".lora_A.weight") || ends_with(name, ".lora_B.weight");
}

std::string lora_copy_base_name(const ModelConfig& config, const std::string& name) {
  if (name == "lm_head.weight" && config.tie_word_embeddings) return "model.embed_tokens.weight";
  return name;
}

ModelConfig lora_merged_config(const ModelConfig& base, const LoraConfig& lora) {
  const LoraSavedModules saved = resolve_lora_modules_to_save(base, lora);
  ModelConfig merged = base;
  if (saved.embed_tokens || saved.lm_head) merged.tie_word_embeddings = false;
  return merged;
}

// The copies' specs (the base's, moved to their adapter unit), for lora_parameter_specs.
std::vector<ParameterSpec> lora_saved_module_specs(const ModelConfig& config, const LoraConfig& lora, TpLayout tp,
                                                   bool before_layers) {
  const LoraSavedModules saved = resolve_lora_modules_to_save(config, lora);
  const LoraUnitLayout layout = lora_unit_layout(config, lora);
  const std::vector<ParameterSpec> base = parameter_specs(config, tp);
  auto base_spec = [&](const std::string& name) {
    const auto it = std::find_if(base.begin(), base.end(), [&](const ParameterSpec& s) { return s.name == name; });
    TRLHPC_ASSERT(it != base.end(), "lora_saved_module_specs: the model has no " + name);
    return *it;
  };
  std::vector<ParameterSpec> specs;
  if (before_layers) {
    if (saved.embed_tokens) {
      ParameterSpec s = base_spec("model.embed_tokens.weight");
      s.unit = layout.embed;
      specs.push_back(s);
    }
    return specs;
  }
  if (saved.norm) {
    ParameterSpec s = base_spec("model.norm.weight");
    s.unit = layout.final;
    specs.push_back(s);
  }
  if (saved.lm_head) {
    ParameterSpec s = base_spec(lora_copy_base_name(config, "lm_head.weight"));
    s.name = "lm_head.weight";
    s.kind = ParameterKind::Matrix;
    s.unit = layout.final;
    specs.push_back(s);
  }
  return specs;
}

}  // namespace trlhpc
