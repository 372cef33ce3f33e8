#pragma once
// Internal to lora.cpp / lora_saved_modules.cpp: the modules_to_save copies' specs.
#include <vector>

#include "trlhpc/model/lora.hpp"

namespace trlhpc {

// The copies that come before the layers (the embedding) or after them (final norm, head), each the
// base's spec for tp rank `tp` moved to its adapter unit (lora_unit_layout).
std::vector<ParameterSpec> lora_saved_module_specs(const ModelConfig& config, const LoraConfig& lora, TpLayout tp,
                                                   bool before_layers);

}  // namespace trlhpc
