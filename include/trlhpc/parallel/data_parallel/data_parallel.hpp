#pragma once
// DataParallelStrategy: what a data-parallel profile does to parameters, gradients and optimizer state
// (ARCHITECTURE.md "Parameters and sharding" table). The trainer drives every profile the same way:
//
//   for each micro-step m of an optimizer step:
//       begin_micro_step(m == last)     -> the strategy decides whether this backward communicates
//       decoder.forward_backward(...)   -> UnitHooks (gather / free / reduce per unit) fire inside
//   finish_gradients()                  -> outstanding reductions complete; owned grads are final
//   grad_norm_squared()                 -> global, each element counted once (one all-reduce at most)
//   scale_owned_grads(clip)             -> clipping
//   optimizer.step(owned_params(), owned_grads(), lr, owned_compute())
//   finish_step()                       -> updated parameters reach every rank that needs them; grads zeroed
//
// Size-1 groups take the same code path as size-N: the single-process run is DDP over 1 rank.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trlhpc/model/decoder.hpp"
#include "trlhpc/model/model_weights.hpp"
#include "trlhpc/model/parameter_store.hpp"
#include "trlhpc/optim/adamw.hpp"

namespace trlhpc {

class ProcessGroups;
class Ops;

enum class ShardingKind { None /*DDP*/, Zero1, Zero2, Zero3 };
ShardingKind parse_sharding(const std::string& name);  // none|ddp|zero1|zero2|zero3|fsdp; UserError otherwise
const char* sharding_name(ShardingKind kind);

// CPU offload (src/parallel/data_parallel/host_offload.hpp): where the fp32 master and the AdamW moments live.
//   None        on the device (the default)
//   Optimizer   master + moments in pinned host memory, AdamW on the host (DeepSpeed
//               offload_optimizer_device: cpu); ZeRO-1/2/3
//   Parameters  also the fp32 parameter shard between uses (DeepSpeed offload_param_device: cpu, FSDP
//               fsdp_offload_params: true); ZeRO-3 only
enum class Offload { None, Optimizer, Parameters };
const char* offload_name(Offload offload);  // "none", "optimizer", "optimizer + parameters"

struct DataParallelOptions {
  ShardingKind sharding = ShardingKind::None;
  Offload offload = Offload::None;  // refused by make_data_parallel_strategy where the sharding cannot
  int64_t bucket_elements = 25 * 1024 * 1024 / 4;  // DDP bucket size (elements)
  bool reshard_after_forward = true;                // ZeRO-3: free gathered params after forward
};

// Per-rank bytes as accounted by the strategy (CONTRACT: reported at start). The first three are the
// persistent state a rank holds between steps (full or sharded). transient_bytes is the peak of the
// full-size unit buffers that ZeRO-2/3 hold only during a step (gathered parameters, unit gradients
// awaiting their reduce-scatter); 0 for DDP and ZeRO-1, whose full buffers are persistent.
// host_bytes: the pinned host memory of CPU offload (fp32 masters or parameter shards, the moments,
// the gradient staging); the other fields are device memory. device_bytes_saved: the device bytes
// those would take without offload (the moments, and the parameter shards under Offload::Parameters).
// Both 0 without offload.
struct MemoryAccount {
  int64_t parameter_bytes = 0, gradient_bytes = 0, optimizer_bytes = 0;
  int64_t transient_bytes = 0;
  int64_t host_bytes = 0, device_bytes_saved = 0;
};

// Times (seconds since an arbitrary epoch) of gradient-communication events of the last step, for the
// overlap test and benchmark: when each bucket was launched and completed, and when backward ended.
// A bucket is a DDP all-reduce bucket, or one unit's gradient reduce-scatter under ZeRO (every
// micro-step's under ZeRO-2/3).
struct CommTimeline {
  std::vector<double> bucket_launch, bucket_done;
  double backward_end = 0;
};

// The state a data-parallel profile keeps between steps, as the rest of the job sees it: what this rank
// owns (the optimizer's and the checkpoint's view), loading it, and bringing units together for saving,
// export and tests that inspect the whole model.
class ShardedStateView {
 public:
  virtual ~ShardedStateView() = default;
  virtual std::vector<OptimizerRange> owned_ranges() const = 0;
  // True on exactly one of the ranks (of one tp slice) that own the same elements: DDP's owned
  // ranges are whole units on every rank of the loss group, ZeRO's shards are repeated across
  // dp_replicate. The copy a checkpoint writes and verifies.
  virtual bool primary_owner() const = 0;
  // Under CPU offload (DataParallelOptions::offload) both are host tensors: the fp32 masters (or the
  // host parameter shards), and the gradient shards staged device -> host by this call.
  virtual std::vector<Tensor> owned_params() = 0;
  virtual std::vector<Tensor> owned_grads() = 0;
  // The --bf16 compute copies of owned_params() (one per unit, same numel) that the optimizer writes in
  // its own pass, where finish_step() relies on that instead of casting them again: DDP's whole units.
  // Empty (the default) where finish_step() refreshes the copies itself (ZeRO: after its all-gather).
  virtual std::vector<Tensor> owned_compute() { return {}; }
  // Fills the parameters this rank stores from `source` (every unit in full, or its shards).
  virtual void load_parameters(const UnitRangeSource& source) = 0;
  // Brings every unit's full parameters to this rank at once (tests that inspect the whole model); no-op
  // unless sharded. Saving goes unit by unit instead (below), so no rank holds the whole model.
  virtual void gather_full_parameters() = 0;
  virtual void release_full_parameters() = 0;
  // Unit `unit`'s full parameters in store.unit(unit).params until release_unit_parameters(unit):
  // collective over fsdp under ZeRO-3 (every rank, same units, same order), no-op otherwise. Full
  // precision (fp32), also under --bf16, whose training gathers are bf16 (docs/ARCHITECTURE.md).
  virtual void gather_unit_parameters(int unit) = 0;
  virtual void release_unit_parameters(int unit) = 0;
};

// The step protocol of the header comment: the hooks the trainer and the decoder call during a step.
class DataParallelStrategy : public UnitHooks {
 public:
  ~DataParallelStrategy() override = default;
  virtual void begin_micro_step(bool last_micro_step) = 0;
  virtual void finish_gradients() = 0;
  virtual double grad_norm_squared() = 0;
  virtual void scale_owned_grads(float factor) = 0;
  virtual void finish_step() = 0;
  // Returns the idle full-size unit buffers a sharded strategy keeps for the next step (ZeRO-1/2/3) to
  // the allocator, e.g. before the final save; a later step allocates them again.
  virtual void release_cached_buffers() = 0;
  virtual MemoryAccount memory(const AdamW* optimizer) const = 0;
  // The last step's gradient-communication events (the overlap test and dp_bench).
  virtual const CommTimeline& timeline() const = 0;
  // The same profile's state between steps.
  virtual ShardedStateView& state() = 0;
};

// The full-size unit buffers a strategy of `kind` keeps in the store (ZeRO-2 shards the gradients,
// ZeRO-3 the parameters too): what to build the store with.
FullUnitBuffers full_unit_buffers(ShardingKind kind);

// The store must have been built with pad_multiple = the fsdp group size and full_unit_buffers(kind).
std::unique_ptr<DataParallelStrategy> make_data_parallel_strategy(const DataParallelOptions& options,
                                                                  ParameterStore& store, ProcessGroups& groups,
                                                                  Ops& ops);

}  // namespace trlhpc
