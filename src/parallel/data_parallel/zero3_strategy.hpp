#pragma once
// ZeRO-3 / FSDP (accelerate's zero3, fsdp1 FULL_SHARD, fsdp2; "ZeRO" sec. 5.3 P_os+g+p; Zhao et al.
// 2023, "PyTorch FSDP"): parameters, gradients and optimizer state sharded over fsdp; parameters
// gathered per unit on demand.
//
//   forward   before_forward(u): all-gather unit u (usually already prefetched), start the all-gather
//             of u+1; after_forward(u): free u (reshard_after_forward)
//   backward  before_backward(u): all-gather u again (prefetched by u+1), start u-1, give u a zeroed
//             full gradient buffer; after_backward(u): free u's parameters, reduce-scatter its gradient
//             into the shard (async, overlapped with the backward of the units below)
//   step      hybrid: shards all-reduced across dp_replicate; AdamW on the parameter shards; nothing to
//             gather afterwards (the next forward gathers on demand)
//   offload   Optimizer: fp32 masters of the shards + moments on the host (host_offload.hpp), AdamW there,
//             the updated masters copied into the device shards at finish_step. Parameters: the shards
//             themselves live on the host (ShardedParameters' host shards, staged per gather) and are
//             the masters; AdamW updates them in place
//
// Hook order (decoder.hpp): the final unit L+1 has no after_forward in training (its norm and head run
// straight into the loss and its backward), and with tied embeddings the head reads unit 0 again:
// the decoder calls before_forward(0) and before_backward(0) before the loss, so unit 0 stays gathered,
// with a full gradient buffer, from the loss until the embedding backward. Prefetch follows the
// forward walk only (a repeated before_forward(0) for the head prefetches nothing).
#include <memory>
#include <vector>

#include "src/parallel/data_parallel/host_offload.hpp"
#include "src/parallel/data_parallel/sharded_gradients.hpp"
#include "src/parallel/data_parallel/sharded_parameters.hpp"
#include "src/parallel/data_parallel/unit_buffer_pool.hpp"
#include "trlhpc/parallel/data_parallel/data_parallel.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"

namespace trlhpc {

class Zero3Strategy final : public DataParallelStrategy, public ShardedStateView {
 public:
  ShardedStateView& state() override { return *this; }
  Zero3Strategy(const DataParallelOptions& options, ParameterStore& store, ProcessGroups& groups, Ops& ops);

  void begin_micro_step(bool last_micro_step) override { last_micro_step_ = last_micro_step; }
  void before_forward(int unit) override;
  void after_forward(int unit) override;
  void before_backward(int unit) override;
  void after_backward(int unit) override;
  void finish_gradients() override;
  double grad_norm_squared() override { return grads_.norm_squared(); }
  void scale_owned_grads(float factor) override { grads_.scale(factor); }
  std::vector<OptimizerRange> owned_ranges() const override;
  bool primary_owner() const override { return grads_.replica_rank() == 0; }
  std::vector<Tensor> owned_params() override;
  std::vector<Tensor> owned_grads() override;
  void finish_step() override;
  MemoryAccount memory(const AdamW* optimizer) const override;
  const CommTimeline& timeline() const override { return grads_.timeline(); }
  void load_parameters(const UnitRangeSource& source) override;
  void gather_full_parameters() override;
  void release_full_parameters() override;
  void gather_unit_parameters(int unit) override { params_.gather(unit, ShardedParameters::Precision::Full); }
  void release_unit_parameters(int unit) override { params_.release(unit); }
  void release_cached_buffers() override { pool_.release_idle(); }

 private:
  enum class Phase { Idle, Forward, Backward };

  ParameterStore& store_;
  UnitBufferPool pool_;
  ShardedGradients grads_;
  ShardedParameters params_;
  std::unique_ptr<HostOffload> offload_;  // CPU offload, else null
  Tensor no_buffer_;  // (0) store.unit(u).grads outside a unit's backward
  bool reshard_after_forward_;
  bool last_micro_step_ = true;
  Phase phase_ = Phase::Idle;
  int next_forward_ = 0;  // the unit the forward walk reaches next (prefetch target)
};

}  // namespace trlhpc
