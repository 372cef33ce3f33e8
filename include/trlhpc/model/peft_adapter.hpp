#pragma once
// PEFT LoRA adapter directories, in and out: what `PeftModel.save_pretrained` writes and
// `PeftModel.from_pretrained` reads.
//
//   adapter_config.json         peft_type "LORA", task_type "CAUSAL_LM", r, lora_alpha, lora_dropout,
//                               target_modules, use_rslora, use_dora, base_model_name_or_path, ...
//   adapter_model.safetensors   "base_model.model.<module>.lora_A.weight" (r, in) and ".lora_B.weight"
//                               (out, r), and each modules_to_save copy under its module's own key
//                               ("base_model.model.lm_head.weight"), F32
//
// In: `PeftAdapterDir` validates the config (a LoRA adapter trlhpc can train: no DoRA, modules_to_save
// among embed_tokens / model.norm / lm_head, every targeted module a layer linear) and that the file holds exactly the tensors the
// targets need, with their shapes, finite; errors name the file and what to do. The base model is
// `base_model_name_or_path` as written (a directory, absolute or relative to the working directory),
// else relative to the adapter directory (an adapter saved next to its base).
// Out: `save_peft_adapter` writes both files into `<dir>` (each finished file renamed into place, the
// directory itself never removed). Call it on one rank.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trlhpc/io/safetensors.hpp"
#include "trlhpc/model/lora.hpp"
#include "trlhpc/model/model_config.hpp"

namespace trlhpc {

inline constexpr const char* kPeftConfigFile = "adapter_config.json";
inline constexpr const char* kPeftWeightsFile = "adapter_model.safetensors";

// True when `dir` holds an adapter_config.json (a PEFT adapter, not a model).
bool is_peft_adapter_dir(const std::string& dir);

class PeftAdapterDir {
 public:
  explicit PeftAdapterDir(const std::string& dir);  // reads and checks the config only
  const std::string& path() const { return dir_; }
  const LoraConfig& lora() const { return lora_; }
  // base_model_name_or_path as written, and the directory it resolves to ("" when it names none).
  const std::string& base_model_name() const { return base_name_; }
  const std::string& base_model_dir() const { return base_dir_; }
  // Opens adapter_model.safetensors and checks it against the model (UserError naming the file and
  // the tensor: a missing, extra or misshapen tensor, or one with NaN/inf: an adapter of another base).
  void check_weights(const ModelConfig& config, const LoraTargets& targets);
  const SafetensorsReader& weights() const { return *weights_; }

 private:
  std::string dir_, base_name_, base_dir_;
  LoraConfig lora_;
  std::unique_ptr<SafetensorsReader> weights_;
};

// The full value of one adapter parameter (spec.numel() floats), asked in lora_parameter_specs order.
using AdapterSource = std::function<void(const ParameterSpec& full, float* out)>;

// Writes adapter_config.json and adapter_model.safetensors (F32) into `dir`, created if missing.
void save_peft_adapter(const std::string& dir, const ModelConfig& config, const LoraConfig& lora,
                       const LoraTargets& targets, const std::string& base_model_name, const AdapterSource& source);

}  // namespace trlhpc
