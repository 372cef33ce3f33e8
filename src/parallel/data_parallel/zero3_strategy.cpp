#include "src/parallel/data_parallel/zero3_strategy.hpp"

#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

Zero3Strategy::Zero3Strategy(const DataParallelOptions& options, ParameterStore& store, ProcessGroups& groups, Ops& ops)
    : store_(store),
      pool_(ops),
      grads_(store, groups, ops, pool_),
      params_(store, groups.fsdp().device(), ops, pool_, options.offload == Offload::Parameters),
      no_buffer_(ops.allocate({0})),
      reshard_after_forward_(options.reshard_after_forward) {
  for (ParameterUnit& unit : store_.units()) unit.grads = no_buffer_;
  if (options.offload == Offload::None) return;
  std::vector<int64_t> shard_numel;
  for (int u = 0; u < store_.num_units(); ++u) shard_numel.push_back(params_.shard_numel(u));
  const bool masters = options.offload == Offload::Optimizer;  // else the host shards are the masters
  offload_ = std::make_unique<HostOffload>(ops, shard_numel, masters);
  if (masters) offload_->pull_masters(params_.shards());
}

std::vector<Tensor> Zero3Strategy::owned_params() {
  return offload_ && offload_->has_masters() ? offload_->masters() : params_.shards();
}

std::vector<Tensor> Zero3Strategy::owned_grads() {
  return offload_ ? offload_->stage_grads(grads_.shards()) : grads_.shards();
}

void Zero3Strategy::load_parameters(const UnitRangeSource& source) {
  params_.load(source);
  if (offload_ && offload_->has_masters()) offload_->pull_masters(params_.shards());
}

void Zero3Strategy::finish_step() {
  // Offload::Optimizer: the device shards take the updated masters (queued; the next gathers follow).
  if (offload_ && offload_->has_masters()) offload_->push_masters(params_.shards());
  grads_.zero();
}

void Zero3Strategy::before_forward(int unit) {
  if (phase_ != Phase::Forward) {  // a new forward walk starts at the embedding
    phase_ = Phase::Forward;
    next_forward_ = 0;
  }
  params_.gather(unit);
  if (unit == next_forward_) {
    next_forward_ = unit + 1;
    if (next_forward_ < store_.num_units()) params_.prefetch(next_forward_);
  }
  params_.poll();
  grads_.poll();
}

void Zero3Strategy::after_forward(int unit) {
  if (unit == store_.num_units() - 1) {
    // Only a forward without backward (evaluation, logits) reports the final unit's forward as done:
    // nothing is used afterwards, including unit 0 gathered again for a tied head.
    params_.release_all();
    phase_ = Phase::Idle;
    return;
  }
  if (reshard_after_forward_) params_.release(unit);
}

void Zero3Strategy::before_backward(int unit) {
  phase_ = Phase::Backward;
  params_.gather(unit);
  if (unit >= 1) params_.prefetch(unit - 1);  // the backward walks down: L+1, L, ..., 1, 0
  // Idempotent (tied embeddings announce unit 0 twice, see the header).
  ParameterUnit& u = store_.unit(unit);
  if (u.grads.numel() == 0) u.grads = pool_.acquire_zeroed(u.padded_numel);
  params_.poll();
  grads_.poll();
}

void Zero3Strategy::after_backward(int unit) {
  ParameterUnit& u = store_.unit(unit);
  Tensor full = std::move(u.grads);
  u.grads = no_buffer_;
  params_.release(unit);
  grads_.reduce(unit, std::move(full), /*recycle=*/true, /*final_contribution=*/last_micro_step_);
  if (unit == 0) phase_ = Phase::Idle;
}

void Zero3Strategy::finish_gradients() {
  grads_.finish();
  // Nothing may stay gathered into the optimizer step: it updates the shards the buffers came from.
  params_.release_all();
}

std::vector<OptimizerRange> Zero3Strategy::owned_ranges() const {
  std::vector<OptimizerRange> ranges;
  for (int u = 0; u < store_.num_units(); ++u) ranges.push_back(grads_.range(u));
  return ranges;
}

MemoryAccount Zero3Strategy::memory(const AdamW* optimizer) const {
  MemoryAccount m;
  m.parameter_bytes = params_.shard_bytes();
  m.gradient_bytes = grads_.bytes();
  if (optimizer) m.optimizer_bytes = optimizer->state_bytes();
  m.transient_bytes = pool_.peak_bytes();
  if (offload_) {
    m.host_bytes += params_.host_shard_bytes();
    m.device_bytes_saved += params_.host_shard_bytes();
    offload_->account(m, optimizer);
  }
  return m;
}

void Zero3Strategy::gather_full_parameters() {
  using P = ShardedParameters::Precision;
  for (int u = 0; u < store_.num_units(); ++u) params_.prefetch(u, P::Full);  // all in flight together
  for (int u = 0; u < store_.num_units(); ++u) params_.gather(u, P::Full);
  params_.set_pinned(true);
}

void Zero3Strategy::release_full_parameters() {
  params_.set_pinned(false);
  params_.release_all();
}

}  // namespace trlhpc
