#include "trlhpc/model/lora.hpp"

#include <algorithm>
#include <cmath>

#include "src/model/lora_saved_modules.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/model/init.hpp"
#include "trlhpc/model/tensor_parallel.hpp"

namespace trlhpc {

const char* lora_module_name(LoraModule module) {
  switch (module) {
    case LoraModule::Q: return "q_proj";
    case LoraModule::K: return "k_proj";
    case LoraModule::V: return "v_proj";
    case LoraModule::O: return "o_proj";
    case LoraModule::Gate: return "gate_proj";
    case LoraModule::Up: return "up_proj";
    case LoraModule::Down: return "down_proj";
  }
  return "?";
}

const char* lora_module_path(LoraModule module) {
  switch (module) {
    case LoraModule::Q: return "self_attn.q_proj";
    case LoraModule::K: return "self_attn.k_proj";
    case LoraModule::V: return "self_attn.v_proj";
    case LoraModule::O: return "self_attn.o_proj";
    case LoraModule::Gate: return "mlp.gate_proj";
    case LoraModule::Up: return "mlp.up_proj";
    case LoraModule::Down: return "mlp.down_proj";
  }
  return "?";
}

bool lora_module_row_parallel(LoraModule module) { return module == LoraModule::O || module == LoraModule::Down; }

double LoraConfig::scale() const {
  return use_rslora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / static_cast<double>(r);
}

nlohmann::json lora_identity(const LoraConfig& lora) {
  nlohmann::json j = {{"r", lora.r}, {"alpha", lora.alpha}, {"dropout", lora.dropout},
                      {"target_modules", lora.target_modules}, {"use_rslora", lora.use_rslora}};
  // Only when set: checkpoints written before modules_to_save existed keep their identity.
  if (!lora.modules_to_save.empty()) j["modules_to_save"] = lora.modules_to_save;
  return j;
}

LoraConfig lora_from_identity(const nlohmann::json& j) {
  LoraConfig lora;
  lora.r = j.at("r").get<int64_t>();
  lora.alpha = j.at("alpha").get<double>();
  lora.dropout = j.at("dropout").get<double>();
  lora.target_modules = j.at("target_modules").get<std::vector<std::string>>();
  lora.use_rslora = j.at("use_rslora").get<bool>();
  if (j.contains("modules_to_save")) lora.modules_to_save = j.at("modules_to_save").get<std::vector<std::string>>();
  return lora;
}

std::string lora_parameter_name(int64_t layer, LoraModule module, char factor) {
  return layer_parameter_name(layer, std::string(lora_module_path(module)) + ".lora_" + factor + ".weight");
}

std::string peft_key(const std::string& name) { return "base_model.model." + name; }

namespace {

bool key_matches(const std::string& full_name, const std::string& key) {
  return full_name == key ||
         (full_name.size() > key.size() && full_name.compare(full_name.size() - key.size(), key.size(), key) == 0 &&
          full_name[full_name.size() - key.size() - 1] == '.');
}

std::string module_list() {
  std::string names;
  for (LoraModule m : kLoraModules) names += std::string(names.empty() ? "" : ", ") + lora_module_name(m);
  return names;
}

}  // namespace

LoraTargets resolve_lora_targets(const ModelConfig& config, const LoraConfig& lora) {
  if (lora.r < 1)
    throw UserError("--lora_r " + std::to_string(lora.r) + ": the adapter rank must be at least 1 (TRL's default 16)");
  if (!(lora.alpha > 0) || !std::isfinite(lora.alpha))
    throw UserError("--lora_alpha must be a positive number (TRL's default 32)");
  if (!(lora.dropout >= 0 && lora.dropout < 1))
    throw UserError("--lora_dropout must be in [0, 1) (TRL's default 0.05)");
  if (lora.target_modules.empty())
    throw UserError("--lora_target_modules is empty: name modules (" + module_list() + ") or all-linear");
  const int64_t L = config.num_hidden_layers;
  LoraTargets targets(static_cast<size_t>(L), std::array<bool, kLoraModuleCount>{});
  for (const std::string& key : lora.target_modules) {
    if (key == "all-linear") {
      for (auto& layer : targets) layer.fill(true);
      continue;
    }
    if (key_matches("lm_head", key) || key_matches("model.embed_tokens", key))
      throw UserError("--lora_target_modules " + key + ": LoRA on the embedding or lm_head is not supported; target "
                      "the layers' linears (" + module_list() + ", or all-linear)");
    bool matched = false;
    for (int64_t l = 0; l < L; ++l)
      for (int m = 0; m < kLoraModuleCount; ++m)
        if (key_matches(layer_parameter_name(l, lora_module_path(kLoraModules[static_cast<size_t>(m)])), key)) {
          targets[static_cast<size_t>(l)][static_cast<size_t>(m)] = true;
          matched = true;
        }
    if (!matched)
      throw UserError("--lora_target_modules " + key + " matches no linear module of this " +
                      config.architecture_name() + " (" + std::to_string(L) + " layers); the modules are " +
                      module_list() + " (or model.layers.N.self_attn.q_proj-style paths), or all-linear");
  }
  (void)resolve_lora_modules_to_save(config, lora);  // its errors before any collective, too
  // An adapter unit per layer: a layer without any adapter would be an empty unit for the sharding
  // strategies (PEFT's layers_to_transform is not supported).
  for (int64_t l = 0; l < L; ++l) {
    const auto& layer = targets[static_cast<size_t>(l)];
    if (std::none_of(layer.begin(), layer.end(), [](bool t) { return t; }))
      throw UserError("--lora_target_modules: layer " + std::to_string(l) +
                      " gets no adapter; adapters on only some layers are not supported: name modules every layer has (" +
                      module_list() + ") or all-linear");
  }
  return targets;
}

std::vector<ParameterSpec> lora_parameter_specs(const ModelConfig& full_config, const LoraConfig& lora,
                                                const LoraTargets& targets, TpLayout tp) {
  const ModelConfig local = tp_local_config(full_config, tp.size);
  const int64_t C = local.hidden_size, F = local.intermediate_size, r = lora.r;
  const int64_t q_out = local.num_attention_heads * local.head_dim, kv_out = local.num_key_value_heads * local.head_dim;
  const int kv_share =
      tp.size > full_config.num_key_value_heads ? static_cast<int>(tp.size / full_config.num_key_value_heads) : 1;
  // (out, in) of each module's local base weight, and how tp cuts it.
  auto local_shape = [&](LoraModule m) -> std::pair<int64_t, int64_t> {
    switch (m) {
      case LoraModule::Q: return {q_out, C};
      case LoraModule::K:
      case LoraModule::V: return {kv_out, C};
      case LoraModule::O: return {C, q_out};
      case LoraModule::Gate:
      case LoraModule::Up: return {F, C};
      case LoraModule::Down: return {C, F};
    }
    return {0, 0};
  };
  const LoraUnitLayout layout = lora_unit_layout(full_config, lora);
  std::vector<ParameterSpec> specs = lora_saved_module_specs(full_config, lora, tp, true);
  for (int64_t l = 0; l < local.num_hidden_layers; ++l) {
    const int unit = layout.first_layer + static_cast<int>(l);
    for (int mi = 0; mi < kLoraModuleCount; ++mi) {
      if (!targets[static_cast<size_t>(l)][static_cast<size_t>(mi)]) continue;
      const LoraModule m = kLoraModules[static_cast<size_t>(mi)];
      const auto [out, in] = local_shape(m);
      ParameterSpec a{lora_parameter_name(l, m, 'A'), {r, in}, ParameterKind::Matrix, unit, TpSplit::Replicated};
      ParameterSpec b{lora_parameter_name(l, m, 'B'), {out, r}, ParameterKind::Matrix, unit, TpSplit::Replicated};
      if (lora_module_row_parallel(m)) {
        a.tp_split = TpSplit::Columns;  // B replicated
      } else if ((m == LoraModule::K || m == LoraModule::V) && kv_share > 1) {
        b.tp_split = TpSplit::KvReplicated;
        b.tp_kv_share = kv_share;
      } else {
        b.tp_split = TpSplit::Rows;  // A replicated
      }
      specs.push_back(std::move(a));
      specs.push_back(std::move(b));
    }
  }
  for (ParameterSpec& copy : lora_saved_module_specs(full_config, lora, tp, false)) specs.push_back(std::move(copy));
  return specs;
}

void lora_init_range(const ParameterSpec& spec, uint64_t seed, int64_t begin, int64_t end, float* out) {
  TRLHPC_ASSERT(0 <= begin && begin <= end && end <= spec.numel(), "lora init range outside " + spec.name);
  const bool is_a = spec.name.find(".lora_A.") != std::string::npos;
  if (!is_a) {
    std::fill(out, out + (end - begin), 0.0f);
    return;
  }
  // kaiming_uniform_(a = sqrt(5)) on (r, in): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / in) = 1 / sqrt(in).
  const double bound = 1.0 / std::sqrt(static_cast<double>(spec.shape.at(1)));
  const uint64_t key = init_stream_key(spec.name, seed);
  for (int64_t i = begin; i < end; ++i)
    out[i - begin] = static_cast<float>(bound * (2.0 * init_uniform(key, static_cast<uint64_t>(i)) - 1.0));
}

}  // namespace trlhpc
