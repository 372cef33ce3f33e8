#pragma once
// ZeRO-1 (accelerate's zero1; Rajbhandari et al. 2020, "ZeRO", sec. 5.1 P_os): full parameters and
// gradients on every rank, optimizer state sharded over fsdp.
//
//   micro-steps       gradients accumulate locally into the full buffers (no communication)
//   last micro-step   as soon as unit u's backward is done, its full gradient is reduce-scattered over
//                     fsdp into this rank's gradient shard (async, overlapped with the rest of the
//                     backward); hybrid: then all-reduced across dp_replicate
//   optimizer         AdamW updates this rank's slice [r*S, (r+1)*S) of every full parameter buffer in
//                     place, with moments for that slice only
//   finish_step       the updated slices are all-gathered over fsdp into every full parameter buffer
//   offload           (Offload::Optimizer) the masters of the slices and the moments live on the host
//                     (host_offload.hpp): owned_grads() stages the gradient shards to the host, AdamW
//                     runs there, finish_step first copies the updated masters into the device slices
//
// Zero2Strategy derives from this class and changes only how gradient buffers live.
#include <memory>
#include <vector>

#include "src/parallel/data_parallel/host_offload.hpp"
#include "src/parallel/data_parallel/sharded_gradients.hpp"
#include "src/parallel/data_parallel/unit_buffer_pool.hpp"
#include "trlhpc/parallel/data_parallel/data_parallel.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"

namespace trlhpc {

class Zero1Strategy : public DataParallelStrategy, public ShardedStateView {
 public:
  ShardedStateView& state() override { return *this; }
  Zero1Strategy(const DataParallelOptions& options, ParameterStore& store, ProcessGroups& groups, Ops& ops);

  void begin_micro_step(bool last_micro_step) override { last_micro_step_ = last_micro_step; }
  void before_backward(int unit) override { grads_.poll(); }
  void after_backward(int unit) override;
  void finish_gradients() override { grads_.finish(); }
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
  void gather_full_parameters() override {}
  void release_full_parameters() override {}
  void gather_unit_parameters(int) override {}
  void release_unit_parameters(int) override {}
  void release_cached_buffers() override { pool_.release_idle(); }

 protected:
  // Brings the optimizer's updated slices to every rank of fsdp (one all-gather per unit, all in flight
  // together). The own slice is staged through a pool buffer because MPI forbids aliased send/receive
  // buffers.
  void all_gather_updated_parameters();
  // The optimizer's updated slices into the device's full buffers (from the host masters under
  // offload), then all_gather_updated_parameters.
  void publish_updated_parameters();
  std::vector<Tensor> device_owned_params();  // this rank's slice of every full parameter buffer

  ParameterStore& store_;
  Ops& ops_;
  Communicator& fsdp_;  // device(): parameter shard all-gathers
  UnitBufferPool pool_;
  ShardedGradients grads_;
  std::unique_ptr<HostOffload> offload_;  // CPU offload, else null
  bool last_micro_step_ = true;
};

}  // namespace trlhpc
