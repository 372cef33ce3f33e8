#pragma once
// ZeRO-2 (accelerate's zero2, FSDP's SHARD_GRAD_OP; "ZeRO" sec. 5.2 P_os+g): full parameters,
// gradients and optimizer state sharded over fsdp.
//
// A unit's full-size gradient buffer exists only from before_backward(u) until its reduce-scatter has
// completed: it comes from a small pool, is swapped into the store (the decoder writes gradients
// through store.unit(u).grads), and after after_backward(u) it is reduce-scattered asynchronously,
// overlapped with the backward of the units below, into the persistent gradient shard. That happens in
// EVERY micro-step (the shard accumulates), so per-rank gradient memory is ~1/P of DDP's plus the few
// buffers in flight. Parameters and the optimizer step are ZeRO-1's.
#include "src/parallel/data_parallel/zero1_strategy.hpp"

namespace trlhpc {

class Zero2Strategy final : public Zero1Strategy {
 public:
  Zero2Strategy(const DataParallelOptions& options, ParameterStore& store, ProcessGroups& groups, Ops& ops);

  void before_backward(int unit) override;
  void after_backward(int unit) override;
  void finish_step() override;
  MemoryAccount memory(const AdamW* optimizer) const override;

 private:
  Tensor no_buffer_;  // (0) what store.unit(u).grads holds outside a unit's backward
};

}  // namespace trlhpc
