#pragma once
// FrozenBase: where the frozen base model of a LoRA run (lora.hpp) lives between its uses. It takes no
// gradient, no optimizer state and no gradient collective. Under DDP and ZeRO-1/2 every rank holds it
// in full (those profiles replicate parameters); under ZeRO-3 / FSDP each rank keeps only its fsdp
// shard of every unit and the hooks gather a unit around its use exactly as Zero3Strategy does for a
// trained one (all-gather before the forward and again before the backward, prefetching the next
// unit, free after each), so no rank ever holds the whole base.
#include <cstdint>
#include <memory>

#include "trlhpc/model/decoder.hpp"
#include "trlhpc/model/model_weights.hpp"
#include "trlhpc/model/parameter_store.hpp"
#include "trlhpc/parallel/data_parallel/data_parallel.hpp"

namespace trlhpc {

class ProcessGroups;
class Ops;

class FrozenBase : public UnitHooks {
 public:
  ~FrozenBase() override = default;
  // Fills what this rank keeps (every unit, or its shards) from `source`.
  virtual void load(const UnitRangeSource& source) = 0;
  // Bytes this rank keeps between steps, and the peak of the gathered units' buffers (ZeRO-3).
  virtual int64_t parameter_bytes() const = 0;
  virtual int64_t transient_bytes() const = 0;
};

// The store must have been built with pad_multiple = the fsdp size and FullUnitBuffers{params:
// kind != Zero3, grads: false}.
std::unique_ptr<FrozenBase> make_frozen_base(ShardingKind kind, ParameterStore& store, ProcessGroups& groups, Ops& ops);
inline FullUnitBuffers frozen_base_buffers(ShardingKind kind) { return {kind != ShardingKind::Zero3, false}; }

}  // namespace trlhpc
