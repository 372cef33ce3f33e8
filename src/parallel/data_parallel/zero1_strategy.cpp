#include "src/parallel/data_parallel/zero1_strategy.hpp"

#include <span>

#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

Zero1Strategy::Zero1Strategy(const DataParallelOptions& options, ParameterStore& store, ProcessGroups& groups, Ops& ops)
    : store_(store), ops_(ops), fsdp_(groups.fsdp().device()), pool_(ops), grads_(store, groups, ops, pool_) {
  if (options.offload == Offload::None) return;
  std::vector<int64_t> shard_numel;
  for (int u = 0; u < store_.num_units(); ++u) shard_numel.push_back(grads_.shard_numel(u));
  offload_ = std::make_unique<HostOffload>(ops, shard_numel, /*masters=*/true);
  offload_->pull_masters(device_owned_params());
}

void Zero1Strategy::load_parameters(const UnitRangeSource& source) {
  load_all_units(source, ops_, store_);
  if (offload_) offload_->pull_masters(device_owned_params());
  store_.refresh_compute(ops_);
}

std::vector<Tensor> Zero1Strategy::owned_grads() {
  return offload_ ? offload_->stage_grads(grads_.shards()) : grads_.shards();
}

void Zero1Strategy::after_backward(int unit) {
  // Only the last micro-step communicates (as DeepSpeed's ZeRO-1 reduces at the accumulation boundary);
  // the full buffer persists, so it is not recycled.
  if (last_micro_step_) grads_.reduce(unit, store_.unit(unit).grads, /*recycle=*/false, /*final_contribution=*/true);
}

std::vector<OptimizerRange> Zero1Strategy::owned_ranges() const {
  std::vector<OptimizerRange> ranges;
  for (int u = 0; u < store_.num_units(); ++u) ranges.push_back(grads_.range(u));
  return ranges;
}

std::vector<Tensor> Zero1Strategy::owned_params() { return offload_ ? offload_->masters() : device_owned_params(); }

std::vector<Tensor> Zero1Strategy::device_owned_params() {
  std::vector<Tensor> out;
  for (int u = 0; u < store_.num_units(); ++u)
    out.push_back(store_.unit(u).params.view({grads_.shard_numel(u)}, grads_.shard_begin(u)));
  return out;
}

void Zero1Strategy::all_gather_updated_parameters() {
  // A window of two units in flight: the next all-gather overlaps the current one's completion, and
  // the staging memory stays two shards (staging every unit at once would hold 1/P of the model).
  constexpr size_t kWindow = 2;
  struct InFlight {
    Tensor staging;  // (S)
    CommRequest request;
  };
  std::vector<InFlight> window;
  auto retire_oldest = [&] {
    window.front().request.wait();
    pool_.release(std::move(window.front().staging));
    window.erase(window.begin());
  };
  for (int u = 0; u < store_.num_units(); ++u) {
    if (window.size() == kWindow) retire_oldest();
    ParameterUnit& unit = store_.unit(u);
    const int64_t S = grads_.shard_numel(u);
    InFlight f{pool_.acquire(S), CommRequest{}};
    ops_.copy(f.staging, unit.params.view({S}, grads_.shard_begin(u)));
    f.request = fsdp_.all_gather_async(std::span<const float>(f.staging.f32(), static_cast<size_t>(S)),
                                       std::span<float>(unit.params.f32(), static_cast<size_t>(unit.padded_numel)));
    window.push_back(std::move(f));
  }
  while (!window.empty()) retire_oldest();
}

void Zero1Strategy::publish_updated_parameters() {
  if (offload_) offload_->push_masters(device_owned_params());  // queued before the all-gathers' staging copies
  all_gather_updated_parameters();
  store_.refresh_compute(ops_);  // the other ranks' slices changed without an optimizer call here
}

void Zero1Strategy::finish_step() {
  publish_updated_parameters();
  store_.zero_grads(ops_);
  grads_.zero();
}

MemoryAccount Zero1Strategy::memory(const AdamW* optimizer) const {
  MemoryAccount m;
  for (const ParameterUnit& unit : store_.units()) {
    m.parameter_bytes += static_cast<int64_t>(unit.params.nbytes());
    m.gradient_bytes += static_cast<int64_t>(unit.grads.nbytes());
  }
  m.gradient_bytes += grads_.bytes();
  m.parameter_bytes += store_.compute_bytes();  // bf16 compute copies (--bf16)
  if (optimizer) m.optimizer_bytes = optimizer->state_bytes();
  // Staging and received shards are 1/P-size and short-lived; they count as transient.
  m.transient_bytes = pool_.peak_bytes();
  if (offload_) offload_->account(m, optimizer);
  return m;
}

}  // namespace trlhpc
