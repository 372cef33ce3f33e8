#include "src/parallel/data_parallel/zero2_strategy.hpp"

#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

Zero2Strategy::Zero2Strategy(const DataParallelOptions& options, ParameterStore& store, ProcessGroups& groups, Ops& ops)
    : Zero1Strategy(options, store, groups, ops), no_buffer_(ops.allocate({0})) {
  // No full gradient buffers outside a unit's backward (the store was built without them): a
  // zero-element tensor makes any stray use fail loudly (a view of it does not fit).
  for (ParameterUnit& unit : store_.units()) unit.grads = no_buffer_;
}

void Zero2Strategy::before_backward(int unit) {
  // Idempotent: with tied embeddings the decoder announces unit 0's backward before the loss (the head
  // writes its gradient there) and again before the embedding backward.
  ParameterUnit& u = store_.unit(unit);
  if (u.grads.numel() == 0) u.grads = pool_.acquire_zeroed(u.padded_numel);
  grads_.poll();
}

void Zero2Strategy::after_backward(int unit) {
  ParameterUnit& u = store_.unit(unit);
  Tensor full = std::move(u.grads);
  u.grads = no_buffer_;
  grads_.reduce(unit, std::move(full), /*recycle=*/true, /*final_contribution=*/last_micro_step_);
}

void Zero2Strategy::finish_step() {
  publish_updated_parameters();
  grads_.zero();
}

MemoryAccount Zero2Strategy::memory(const AdamW* optimizer) const {
  MemoryAccount m;
  for (const ParameterUnit& unit : store_.units()) m.parameter_bytes += static_cast<int64_t>(unit.params.nbytes());
  m.parameter_bytes += store_.compute_bytes();  // bf16 compute copies (--bf16)
  m.gradient_bytes = grads_.bytes();
  if (optimizer) m.optimizer_bytes = optimizer->state_bytes();
  m.transient_bytes = pool_.peak_bytes();
  if (offload_) offload_->account(m, optimizer);
  return m;
}

}  // namespace trlhpc
