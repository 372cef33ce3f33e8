#pragma once
// DDP (accelerate's multi_gpu): full parameters, gradients and optimizer state on every rank;
// gradients all-reduced over the `loss` group (all ranks holding different tokens of the same tp
// slice) in buckets launched as soon as a unit's backward is done, overlapped with the rest of the
// backward, and waited before the optimizer. Non-final micro-steps do not communicate (no_sync).
#include <vector>

#include "trlhpc/parallel/data_parallel/data_parallel.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"

namespace trlhpc {

class DdpStrategy final : public DataParallelStrategy, public ShardedStateView {
 public:
  ShardedStateView& state() override { return *this; }
  DdpStrategy(const DataParallelOptions& options, ParameterStore& store, ProcessGroups& groups, Ops& ops);

  void begin_micro_step(bool last_micro_step) override;
  void after_backward(int unit) override;
  void before_backward(int unit) override { poll(); }
  void finish_gradients() override;
  double grad_norm_squared() override;
  void scale_owned_grads(float factor) override;
  std::vector<OptimizerRange> owned_ranges() const override;
  bool primary_owner() const override { return comm_.rank() == 0; }  // comm_: the loss group
  std::vector<Tensor> owned_params() override;
  std::vector<Tensor> owned_grads() override;
  std::vector<Tensor> owned_compute() override;
  void finish_step() override;
  MemoryAccount memory(const AdamW* optimizer) const override;
  const CommTimeline& timeline() const override { return timeline_; }
  void load_parameters(const UnitRangeSource& source) override {
    load_all_units(source, ops_, store_);
    store_.refresh_compute(ops_);
  }
  void gather_full_parameters() override {}
  void release_full_parameters() override {}
  void gather_unit_parameters(int) override {}
  void release_unit_parameters(int) override {}
  void release_cached_buffers() override {}

 private:
  struct Bucket {
    int unit;
    int64_t begin, end;  // elements of the unit's gradient buffer
  };
  void poll();  // lets MPI progress outstanding reductions and records completions

  ParameterStore& store_;
  Communicator& comm_;  // device(): gradient buckets over the loss group
  Communicator& tp_;    // host(): grad norm, tp-split slots summed over tp (tensor_parallel_norm.hpp)
  Ops& ops_;
  std::vector<Bucket> buckets_;
  std::vector<std::vector<size_t>> unit_buckets_;  // unit -> bucket indices
  std::vector<CommRequest> pending_;               // (buckets) in flight
  std::vector<int> pending_index_;
  bool communicate_ = true;
  CommTimeline timeline_;
};

}  // namespace trlhpc
