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
  // (padded_numel) BF16 under a bf16 compute dtype while params holds values: bf16(params), the copy
  // the decoder computes with (docs/ARCHITECTURE.md "bf16 compute copies"); an empty Tensor() otherwise.
  // Whoever changes params refreshes it (ParameterStore::refresh_compute, or DDP's AdamW writing it in
  // its own pass: ShardedStateView::owned_compute); nothing keys it by address.
  Tensor compute;
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
  // The view of `name` in its unit's compute copy where one exists (BF16), else param(name) (F32).
  Tensor compute_param(const std::string& name) const;
  bool has_compute(int u) const { return unit(u).compute.data() != nullptr; }
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  const ParameterSlot& slot(const std::string& name) const;
  int unit_of(const std::string& name) const;

  int64_t total_numel() const;  // real elements over all units
  void zero_grads(Ops& ops);

  // The refresh rule of the compute copies: call after every write of unit u's params (an optimizer
  // update, an all-gather of updated shards, a host -> device copy of masters, a load, a gather into a
  // pool buffer). Under a bf16 compute dtype it (re)allocates the copy and rounds params into it; a
  // unit without params gets none; under F32 it does nothing. set_compute hands over a bf16 copy made
  // otherwise (ZeRO-3's bf16 all-gather); drop_compute forgets it (the unit's params are released).
  void refresh_compute(Ops& ops, int u);
  void refresh_compute(Ops& ops);
  void set_compute(int u, Tensor copy);
  void drop_compute(int u) { unit(u).compute = Tensor(); }
  int64_t compute_bytes() const;  // device bytes of the compute copies held now

 private:
  std::vector<ParameterUnit> units_;
  TpLayout tp_;
  std::unordered_map<std::string, std::pair<int, size_t>> index_;  // name -> (unit, slot)
};

}  // namespace trlhpc
