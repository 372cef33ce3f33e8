#pragma once
// ParameterStore: the model's parameters and gradients in flat per-unit buffers
// (ARCHITECTURE.md "Parameters and sharding").
//
// Unit 0 = embedding, units 1..L = decoder layers, unit L+1 = final norm (+ lm_head when untied).
// Each unit is one contiguous fp32 buffer holding its tensors back to back in ParameterSpec order,
// padded at the end to a multiple of `pad_multiple` (the fsdp group size) so it splits into equal
// shards. Views per tensor point into the buffers, so kernels see ordinary tensors while collectives
// and the optimizer see one span per unit.
#include <string>
#include <unordered_map>
#include <vector>

#include "trlhpc/core/tensor.hpp"
#include "trlhpc/model/model_config.hpp"
#include "trlhpc/model/parameter_names.hpp"

namespace trlhpc {

class Ops;

struct ParameterSlot {
  ParameterSpec spec;
  int64_t offset = 0;  // first element inside the unit buffer
  int64_t numel = 0;
};

struct ParameterUnit {
  std::vector<ParameterSlot> slots;
  int64_t numel = 0;         // real elements
  int64_t padded_numel = 0;  // numel rounded up to pad_multiple
  Tensor params;             // (padded_numel)
  Tensor grads;              // (padded_numel)
};

// Which full-size unit buffers the store allocates. A sharded strategy that keeps only shards (ZeRO-3:
// neither; ZeRO-2: no gradients) passes false, so the full model is never materialised on a rank that
// keeps 1/fsdp of it; those fields then hold zero-element tensors until the strategy fills them.
struct FullUnitBuffers {
  bool params = true;
  bool grads = true;
};

class ParameterStore {
 public:
  // Allocates zeroed parameter and gradient buffers (those `full` asks for) for every unit on `ops'`
  // device, holding tp rank `tp`'s slices (parameter_specs(config, tp); default: the full model).
  ParameterStore(const ModelConfig& config, Ops& ops, int64_t pad_multiple = 1, TpLayout tp = {},
                 FullUnitBuffers full = {});
  // The same for any parameters (LoRA adapters, lora.hpp): `specs` in order, their units 0..num_units-1.
  ParameterStore(const std::vector<ParameterSpec>& specs, int num_units, Ops& ops, int64_t pad_multiple = 1,
                 TpLayout tp = {}, FullUnitBuffers full = {});

  int num_units() const { return static_cast<int>(units_.size()); }
  ParameterUnit& unit(int u) { return units_.at(static_cast<size_t>(u)); }
  const ParameterUnit& unit(int u) const { return units_.at(static_cast<size_t>(u)); }
  std::vector<ParameterUnit>& units() { return units_; }
  const std::vector<ParameterUnit>& units() const { return units_; }
  TpLayout tp_layout() const { return tp_; }

  // Tensor views by Hugging Face name (e.g. "model.layers.3.self_attn.q_proj.weight").
  Tensor param(const std::string& name) const;
  Tensor grad(const std::string& name) const;
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  const ParameterSlot& slot(const std::string& name) const;
  int unit_of(const std::string& name) const;

  int64_t total_numel() const;  // real elements over all units
  void zero_grads(Ops& ops);

 private:
  std::vector<ParameterUnit> units_;
  TpLayout tp_;
  std::unordered_map<std::string, std::pair<int, size_t>> index_;  // name -> (unit, slot)
};

}  // namespace trlhpc
