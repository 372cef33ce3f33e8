#pragma once
// LoRA adapters (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models") as PEFT builds
// them for TRL's `--use_peft`: each targeted linear y = x W^T gets a trainable low-rank update,
//
//   y = x W^T + scale * dropout(x) A^T B^T      A (r, in), B (out, r); W frozen
//   scale = lora_alpha / r  (rsLoRA, Kalajdzievski 2023: lora_alpha / sqrt(r))
//
// initialised as PEFT's default: A ~ kaiming_uniform(a = sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)), B = 0
// (the adapted model starts equal to the base).
//
// The adapters' parameters live in a ParameterStore of their own (one unit per decoder layer, unit l =
// layer l), named as the targeted weight with ".lora_A" / ".lora_B" before ".weight" (PEFT's key minus
// its "base_model.model." prefix and adapter name), in layer order, modules in parameter_names.hpp
// order, A before B. Under tensor parallelism each factor follows its base projection's split
// (tp_layout.hpp) so the product needs no extra collective in forward:
//   column-parallel q/k/v, gate/up  A (r, in) replicated; B (out, r) split in rows like W
//                                   (kv-replicated for k/v when tp > KVH)
//   row-parallel o, down           A (r, in) split in columns like W; B (out, r) replicated: the
//                                   partial product B (A_local x_local) joins W's partial sum before g
// The rank dimension r is never split.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trlhpc/model/model_config.hpp"
#include "trlhpc/model/parameter_names.hpp"
#include "trlhpc/model/tp_layout.hpp"

namespace trlhpc {

// The seven linears of a decoder layer, in parameter_names.hpp order.
enum class LoraModule { Q, K, V, O, Gate, Up, Down };
inline constexpr int kLoraModuleCount = 7;
inline constexpr std::array<LoraModule, kLoraModuleCount> kLoraModules = {
    LoraModule::Q, LoraModule::K, LoraModule::V, LoraModule::O, LoraModule::Gate, LoraModule::Up, LoraModule::Down};

// "q_proj", ..., "down_proj" (PEFT's target_modules names).
const char* lora_module_name(LoraModule module);
// "self_attn.q_proj", ..., "mlp.down_proj": the module path inside a layer.
const char* lora_module_path(LoraModule module);
// Row-parallel under tp (o, down): A split in columns, B replicated.
bool lora_module_row_parallel(LoraModule module);

struct LoraConfig {
  int64_t r = 16;
  double alpha = 32;
  double dropout = 0.05;
  // PEFT's target_modules: module names ("q_proj"), dotted suffixes ("self_attn.q_proj",
  // "model.layers.3.mlp.up_proj"), or "all-linear" (every linear of the layers, not lm_head).
  std::vector<std::string> target_modules = {"q_proj", "v_proj"};  // PEFT's default for Qwen2/Llama
  bool use_rslora = false;
  // Seeds the dropout masks (with the step, layer and module): trlhpc's, not PEFT's (torch's RNG).
  uint64_t dropout_seed = 42;

  double scale() const;  // alpha / r, or alpha / sqrt(r) with use_rslora
};

// The adapter config as a checkpoint's identity records it (r, alpha, dropout, target_modules,
// use_rslora), and back (export of a LoRA checkpoint).
nlohmann::json lora_identity(const LoraConfig& lora);
LoraConfig lora_from_identity(const nlohmann::json& identity);

// Which modules of which layers carry an adapter: targets[layer][module].
using LoraTargets = std::vector<std::array<bool, kLoraModuleCount>>;

// Resolves `lora.target_modules` against the model's layers as PEFT matches them (a key matches a
// module whose full name equals it or ends with "." + key). Throws UserError naming the key and the
// modules it may name when a key matches no linear of the layers (lm_head and embed_tokens included:
// LoRA on them is not supported), when r < 1 or alpha or dropout is out of range. Pure: call it on
// every rank before any collective.
LoraTargets resolve_lora_targets(const ModelConfig& config, const LoraConfig& lora);

// The adapter parameters of `targets`, shaped for tp rank `tp` (default: whole), unit = layer.
std::vector<ParameterSpec> lora_parameter_specs(const ModelConfig& config, const LoraConfig& lora,
                                                const LoraTargets& targets, TpLayout tp = {});
// Units: one per decoder layer.
inline int lora_unit_count(const ModelConfig& config) { return static_cast<int>(config.num_hidden_layers); }

// "model.layers.<layer>.<path>.lora_A.weight" (factor 'A') or ".lora_B.weight" ('B').
std::string lora_parameter_name(int64_t layer, LoraModule module, char factor);
// PEFT's key of an adapter parameter in adapter_model.safetensors: "base_model.model." + name.
std::string peft_key(const std::string& name);

// Writes elements [begin, end) of the flat (row-major) initial value of the full adapter parameter
// `spec` to out: PEFT's init (above), A from the counter-based generator of init.hpp keyed by
// (seed, name), B zero. Every layout gets the same bits.
void lora_init_range(const ParameterSpec& spec, uint64_t seed, int64_t begin, int64_t end, float* out);

}  // namespace trlhpc
