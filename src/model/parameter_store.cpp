#include "trlhpc/model/parameter_store.hpp"

#include "trlhpc/core/error.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

ParameterStore::ParameterStore(const ModelConfig& config, Ops& ops, int64_t pad_multiple, TpLayout tp,
                               FullUnitBuffers full)
    : ParameterStore(parameter_specs(config, tp), parameter_unit_count(config), ops, pad_multiple, tp, full) {}

ParameterStore::ParameterStore(const std::vector<ParameterSpec>& specs, int num_units, Ops& ops, int64_t pad_multiple,
                               TpLayout tp, FullUnitBuffers full)
    : units_(static_cast<size_t>(num_units)), tp_(tp) {
  TRLHPC_ASSERT(pad_multiple >= 1, "pad_multiple must be >= 1");
  for (const ParameterSpec& spec : specs) {
    TRLHPC_ASSERT(spec.unit >= 0 && spec.unit < num_units, spec.name + ": unit outside the store");
    ParameterUnit& unit = units_[static_cast<size_t>(spec.unit)];
    ParameterSlot slot{spec, unit.numel, shape_numel(spec.shape)};
    unit.numel += slot.numel;
    index_[spec.name] = {spec.unit, unit.slots.size()};
    unit.slots.push_back(std::move(slot));
  }
  for (ParameterUnit& unit : units_) {
    unit.padded_numel = (unit.numel + pad_multiple - 1) / pad_multiple * pad_multiple;
    unit.params = ops.zeros({full.params ? unit.padded_numel : 0});
    unit.grads = ops.zeros({full.grads ? unit.padded_numel : 0});
  }
}

const ParameterSlot& ParameterStore::slot(const std::string& name) const {
  auto it = index_.find(name);
  TRLHPC_ASSERT(it != index_.end(), "no parameter named " + name);
  return units_[static_cast<size_t>(it->second.first)].slots[it->second.second];
}

int ParameterStore::unit_of(const std::string& name) const {
  auto it = index_.find(name);
  TRLHPC_ASSERT(it != index_.end(), "no parameter named " + name);
  return it->second.first;
}

Tensor ParameterStore::param(const std::string& name) const {
  const ParameterSlot& s = slot(name);
  return units_[static_cast<size_t>(unit_of(name))].params.view(s.spec.shape, s.offset);
}

Tensor ParameterStore::grad(const std::string& name) const {
  const ParameterSlot& s = slot(name);
  return units_[static_cast<size_t>(unit_of(name))].grads.view(s.spec.shape, s.offset);
}

Tensor ParameterStore::compute_param(const std::string& name) const {
  const ParameterSlot& s = slot(name);
  const ParameterUnit& u = units_[static_cast<size_t>(unit_of(name))];
  return (u.compute.data() ? u.compute : u.params).view(s.spec.shape, s.offset);
}

void ParameterStore::refresh_compute(Ops& ops, int u) {
  ParameterUnit& unit = units_.at(static_cast<size_t>(u));
  if (ops.compute_dtype() == DType::F32) return;
  if (unit.params.numel() == 0 || !unit.params.data()) {
    unit.compute = Tensor();
    return;
  }
  TRLHPC_ASSERT(unit.params.numel() == unit.padded_numel, "unit " + std::to_string(u) + " holds " +
                                                              std::to_string(unit.params.numel()) + " of " +
                                                              std::to_string(unit.padded_numel) + " parameters");
  if (!unit.compute.data() || unit.compute.numel() != unit.padded_numel || unit.compute.dtype() != ops.compute_dtype())
    unit.compute = ops.allocate({unit.padded_numel}, ops.compute_dtype());
  ops.cast(unit.compute, unit.params);
}

void ParameterStore::refresh_compute(Ops& ops) {
  for (int u = 0; u < num_units(); ++u) refresh_compute(ops, u);
}

void ParameterStore::set_compute(int u, Tensor copy) {
  ParameterUnit& unit = units_.at(static_cast<size_t>(u));
  TRLHPC_ASSERT(copy.numel() == unit.padded_numel && copy.dtype() == DType::BF16,
                "set_compute: unit " + std::to_string(u) + " takes a BF16 copy of " + std::to_string(unit.padded_numel) +
                    " elements");
  unit.compute = std::move(copy);
}

int64_t ParameterStore::compute_bytes() const {
  int64_t bytes = 0;
  for (const ParameterUnit& unit : units_)
    if (unit.compute.data()) bytes += static_cast<int64_t>(unit.compute.nbytes());
  return bytes;
}

int64_t ParameterStore::total_numel() const {
  int64_t n = 0;
  for (const ParameterUnit& unit : units_) n += unit.numel;
  return n;
}

void ParameterStore::zero_grads(Ops& ops) {
  for (ParameterUnit& unit : units_) ops.fill_zero(unit.grads);
}

}  // namespace trlhpc
