#include "trlhpc/parallel/data_parallel/frozen_base.hpp"

#include "src/parallel/data_parallel/sharded_parameters.hpp"
#include "src/parallel/data_parallel/unit_buffer_pool.hpp"
#include "trlhpc/ops/ops.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"

namespace trlhpc {
namespace {

// DDP, ZeRO-1/2: the whole base on every rank; nothing to do around a unit.
class ReplicatedFrozenBase final : public FrozenBase {
 public:
  ReplicatedFrozenBase(ParameterStore& store, Ops& ops) : store_(store), ops_(ops) {}
  void load(const UnitRangeSource& source) override {
    load_all_units(source, ops_, store_);
    store_.refresh_compute(ops_);
  }
  int64_t parameter_bytes() const override {
    int64_t bytes = 0;
    for (const ParameterUnit& unit : store_.units()) bytes += static_cast<int64_t>(unit.params.nbytes());
    return bytes + store_.compute_bytes();
  }
  int64_t transient_bytes() const override { return 0; }

 private:
  ParameterStore& store_;
  Ops& ops_;
};

// ZeRO-3 / FSDP: Zero3Strategy's gathers (zero3_strategy.hpp for the hook order) without gradients.
class ShardedFrozenBase final : public FrozenBase {
 public:
  ShardedFrozenBase(ParameterStore& store, ProcessGroups& groups, Ops& ops)
      : store_(store), pool_(ops), params_(store, groups.fsdp().device(), ops, pool_) {}

  void before_forward(int unit) override {
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
  }
  void after_forward(int unit) override {
    if (unit == store_.num_units() - 1) {  // a forward without backward is over (evaluation)
      params_.release_all();
      phase_ = Phase::Idle;
      return;
    }
    params_.release(unit);
  }
  void before_backward(int unit) override {
    phase_ = Phase::Backward;
    params_.gather(unit);
    if (unit >= 1) params_.prefetch(unit - 1);
    params_.poll();
  }
  void after_backward(int unit) override {
    params_.release(unit);
    if (unit == 0) {
      params_.release_all();
      phase_ = Phase::Idle;
    }
  }
  void load(const UnitRangeSource& source) override { params_.load(source); }
  int64_t parameter_bytes() const override { return params_.shard_bytes(); }
  int64_t transient_bytes() const override { return pool_.peak_bytes(); }

 private:
  enum class Phase { Idle, Forward, Backward };
  ParameterStore& store_;
  UnitBufferPool pool_;
  ShardedParameters params_;
  Phase phase_ = Phase::Idle;
  int next_forward_ = 0;
};

}  // namespace

std::unique_ptr<FrozenBase> make_frozen_base(ShardingKind kind, ParameterStore& store, ProcessGroups& groups, Ops& ops) {
  if (kind == ShardingKind::Zero3) return std::make_unique<ShardedFrozenBase>(store, groups, ops);
  return std::make_unique<ReplicatedFrozenBase>(store, ops);
}

}  // namespace trlhpc
