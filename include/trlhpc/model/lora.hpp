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
// The adapters' parameters live in a ParameterStore of their own (one unit per decoder layer, plus units
// for modules_to_save copies: LoraUnitLayout), named as the targeted weight with ".lora_A" / ".lora_B"
// before ".weight" (PEFT's key minus its "base_model.model." prefix and adapter name), in layer order,
// modules in parameter_names.hpp order, A before B. Under tensor parallelism each factor follows its base projection's split
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
  // PEFT's modules_to_save: modules trained in full next to the adapters, as copies (the base's stay
  // frozen; a tied head and embedding become two). Matched as PEFT matches them (a module whose full
  // name ends with the key); trlhpc trains the embedding, the final norm and the head this way.
  std::vector<std::string> modules_to_save;
  // Seeds the dropout masks (with the step, layer and module): trlhpc's, not PEFT's (torch's RNG).
  uint64_t dropout_seed = 42;

  double scale() const;  // alpha / r, or alpha / sqrt(r) with use_rslora
};

// The adapter config as a checkpoint's identity records it (r, alpha, dropout, target_modules,
// use_rslora, modules_to_save when any), and back (export of a LoRA checkpoint).
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

// modules_to_save resolved (lora_saved_modules.cpp): which modules outside the layers train in full.
struct LoraSavedModules {
  bool embed_tokens = false;  // model.embed_tokens: the input lookup reads the trained copy
  bool norm = false;          // model.norm
  bool lm_head = false;       // lm_head: the head reads the trained copy ("lm_head.weight", also when tied)
  bool any() const { return embed_tokens || norm || lm_head; }
};
// Throws UserError naming the key when it is empty, matches no module of the model, or matches a
// module trlhpc does not train in full (a layer's module: name the layer linears in target_modules
// instead). Pure: call it on every rank before any collective.
LoraSavedModules resolve_lora_modules_to_save(const ModelConfig& config, const LoraConfig& lora);

// The adapter store's units: [the embedding copy] one per layer [the final norm and head copies],
// so a unit exists only where something trains; each belongs to one decoder unit (parameter_names.hpp).
struct LoraUnitLayout {
  int count = 0;
  int embed = -1;       // the embedding copy's unit, or -1
  int first_layer = 0;  // layer l's unit is first_layer + l
  int final = -1;       // the final norm / head copies' unit, or -1
  int layers = 0;
  // The adapter unit of decoder unit `decoder_unit` (0 embedding, 1..L layers, L+1 final), or -1.
  int of_decoder_unit(int decoder_unit) const;
};
LoraUnitLayout lora_unit_layout(const ModelConfig& config, const LoraConfig& lora);

// The adapter parameters of `targets` and the copies of modules_to_save (full names, the base's specs;
// a tied model's head copy is "lm_head.weight" shaped as the embedding), shaped for tp rank `tp`
// (default: whole), units by lora_unit_layout.
std::vector<ParameterSpec> lora_parameter_specs(const ModelConfig& config, const LoraConfig& lora,
                                                const LoraTargets& targets, TpLayout tp = {});
// True for "...lora_A.weight" / "...lora_B.weight"; false for a modules_to_save copy.
bool is_lora_factor(const std::string& name);
// The model an adapter merges into: the base's config, untied when it is tied and modules_to_save
// trains its embedding or head (the merged head and embedding then differ).
ModelConfig lora_merged_config(const ModelConfig& base, const LoraConfig& lora);
// The base tensor a modules_to_save copy starts from: its own name, or the embedding for a tied head.
std::string lora_copy_base_name(const ModelConfig& config, const std::string& name);

// "model.layers.<layer>.<path>.lora_A.weight" (factor 'A') or ".lora_B.weight" ('B').
std::string lora_parameter_name(int64_t layer, LoraModule module, char factor);
// PEFT's key of an adapter parameter in adapter_model.safetensors: "base_model.model." + name.
std::string peft_key(const std::string& name);

// Writes elements [begin, end) of the flat (row-major) initial value of the full adapter parameter
// `spec` to out: PEFT's init (above), A from the counter-based generator of init.hpp keyed by
// (seed, name), B zero. Every layout gets the same bits.
void lora_init_range(const ParameterSpec& spec, uint64_t seed, int64_t begin, int64_t end, float* out);

}  // namespace trlhpc
