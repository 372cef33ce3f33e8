#pragma once
// ShardedGradients: the gradient half of ZeRO-1/2/3 (ARCHITECTURE.md "Parameters and sharding").
//
// Every unit buffer of padded_numel elements splits into P = |fsdp| equal shards; fsdp rank r owns
// elements [r*S, (r+1)*S) with S = padded_numel / P (the store pads units to a multiple of P). Worked
// example: a unit of 10 real elements, P = 4 -> padded 12, S = 3; rank 2 owns elements 6, 7, 8.
//
// reduce(u, full) reduce-scatters a full-size gradient buffer of unit u over fsdp (asynchronously) and
// adds the summed shard into this rank's persistent gradient shard of u once it arrives, so several
// micro-steps accumulate. With hybrid sharding (|dp_replicate| > 1) the ranks of a dp_replicate group
// own the same shard of different data; after a unit's last contribution of a step its shard is
// all-reduced across dp_replicate, making the shards identical there. Together that is a sum over the
// whole `loss` group (fsdp x dp_replicate), what DDP's all-reduce computes, at 1/P of the memory.
//
// Ordering: every rank must issue the collectives of a communicator in the same order. Completion
// order (test()) differs between ranks, so no collective is ever launched from a completion; the
// dp_replicate all-reduce of a unit is launched at the next reduce() call of the final micro-step
// (after waiting for that unit's reduce-scatter, which has had one unit of backward to finish) or in
// finish(). Shard additions happen in launch order per unit, so results do not depend on timing.
#include <cstdint>
#include <vector>

#include "trlhpc/optim/adamw.hpp"
#include "trlhpc/comm/communicator.hpp"
#include "trlhpc/parallel/data_parallel/data_parallel.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "src/parallel/data_parallel/unit_buffer_pool.hpp"

namespace trlhpc {

class ShardedGradients {
 public:
  ShardedGradients(ParameterStore& store, ProcessGroups& groups, Ops& ops, UnitBufferPool& pool);

  int64_t shard_numel(int unit) const { return shard_numel_[static_cast<size_t>(unit)]; }
  int64_t shard_begin(int unit) const { return shard_numel(unit) * fsdp_.rank(); }
  OptimizerRange range(int unit) const { return {shard_begin(unit), shard_begin(unit) + shard_numel(unit)}; }
  // This rank's index among the dp_replicate ranks holding the same shards.
  int replica_rank() const { return replicate_.rank(); }

  // Starts the reduce-scatter of `full` (padded_numel of unit `unit`). `full` must stay untouched until
  // the reduction completes; with `recycle` it then goes back to the pool. `final_contribution`: no
  // further reduce() of this unit follows in this optimizer step (hybrid: its replicate all-reduce may start).
  void reduce(int unit, Tensor full, bool recycle, bool final_contribution);
  // Lets MPI progress the reductions in flight; accumulates the ones that completed.
  void poll();
  // Waits for every reduction (the owned shards are final afterwards); records backward_end.
  void finish();

  // Sum of squares of the owned shards, summed over fsdp: every element of the model once.
  double norm_squared();
  void scale(float factor);
  void zero();

  Tensor shard(int unit) const { return shards_[static_cast<size_t>(unit)]; }  // (S)
  std::vector<Tensor> shards() const { return shards_; }
  int64_t bytes() const;

  // Reductions allowed in flight before reduce() waits for the oldest: enough to overlap with the
  // next units' backward, few enough that in-flight full buffers stay a small multiple of one unit.
  static constexpr size_t kMaxReductionsInFlight = 3;

  // The timeline covers one optimizer step: cleared by the first reduce() after finish().
  const CommTimeline& timeline() const { return timeline_; }

 private:
  struct Pending {
    int unit;
    Tensor full;      // (padded_numel) the buffer being reduced
    bool recycle;     // return `full` to the pool afterwards
    Tensor received;  // (S) this rank's summed shard, from the pool
    CommRequest request;
    size_t slot;      // index in timeline_.bucket_launch / bucket_done
  };
  void accumulate(Pending& p);               // request complete: shard += received, recycle buffers
  void complete_unit(int unit);              // waits for every reduction of `unit` in launch order
  void start_replicate(int unit);            // in-place all-reduce of the shard over dp_replicate

  ParameterStore& store_;
  Communicator& fsdp_;       // device(): gradient reduce-scatters
  Communicator& replicate_;  // device(): shard all-reduces over dp_replicate
  Communicator& fsdp_host_;  // host(): the grad norm's partial sums (host doubles)
  Communicator& tp_;         // host(): grad norm, tp-split slots summed over tp (tensor_parallel_norm.hpp)
  Ops& ops_;
  UnitBufferPool& pool_;
  std::vector<int64_t> shard_numel_;        // (units)
  std::vector<Tensor> shards_;               // (units) each (S)
  std::vector<Pending> pending_;             // launch order
  std::vector<int> awaiting_replicate_;      // units whose final reduce-scatter is in flight
  std::vector<CommRequest> replicate_requests_;
  CommTimeline timeline_;
  bool step_finished_ = true;                // the next reduce() opens a new step's timeline
};

}  // namespace trlhpc
