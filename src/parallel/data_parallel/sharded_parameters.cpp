#include "src/parallel/data_parallel/sharded_parameters.hpp"

#include <span>

#include "trlhpc/core/error.hpp"
#include "trlhpc/core/tensor_span.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

ShardedParameters::ShardedParameters(ParameterStore& store, Communicator& fsdp, Ops& ops, UnitBufferPool& pool,
                                     bool host_shards)
    : store_(store), fsdp_(fsdp), ops_(ops), pool_(pool), no_buffer_(ops.allocate({0})),
      bf16_gathers_(ops.compute_dtype() == DType::BF16), host_shards_(host_shards) {
  const int P = fsdp.size();
  units_.resize(static_cast<size_t>(store.num_units()));
  for (int u = 0; u < store.num_units(); ++u) {
    ParameterUnit& unit = store.unit(u);
    TRLHPC_ASSERT(unit.padded_numel % P == 0, "unit " + std::to_string(u) + " is not padded to the fsdp size " +
                                                  std::to_string(P));
    shard_numel_.push_back(unit.padded_numel / P);
    units_[static_cast<size_t>(u)].shard =
        host_shards ? ops.allocate_host({unit.padded_numel / P}) : ops.zeros({unit.padded_numel / P});
    unit.params = no_buffer_;  // (a store built with full_unit_buffers(Zero3) holds none)
  }
}

std::vector<Tensor> ShardedParameters::shards() const {
  std::vector<Tensor> out;
  for (const Unit& u : units_) out.push_back(u.shard);
  return out;
}

void ShardedParameters::load(const UnitRangeSource& source) {
  for (int u = 0; u < store_.num_units(); ++u)
    load_unit_range(source, ops_, u, shard_begin(u), shard_begin(u) + shard_numel(u), shard(u));
}

void ShardedParameters::prefetch(int unit, Precision precision) {
  Unit& u = units_[static_cast<size_t>(unit)];
  if (u.state != State::Released && precision == Precision::Full && u.rounded) {
    drop(u);  // gathered in bf16 for training; saving needs the fp32 masters
    detach(unit);
  }
  if (u.state != State::Released) return;
  const int64_t padded = store_.unit(unit).padded_numel;
  u.full = pool_.acquire(padded);
  u.rounded = bf16_gathers_ && precision == Precision::Compute;
  Tensor source = u.shard;  // the device copy of this rank's part
  if (host_shards_) {
    u.staged = pool_.acquire(u.shard.numel());
    ops_.copy_from_host_async(u.staged, u.shard);
    source = u.staged;
  }
  if (u.rounded) {
    u.shard_bf16 = ops_.allocate(u.shard.shape(), DType::BF16);
    u.full_bf16 = ops_.allocate({padded}, DType::BF16);
    ops_.cast(u.shard_bf16, source);
    u.request = fsdp_.all_gather_async(span_of<const uint16_t>(u.shard_bf16), span_of<uint16_t>(u.full_bf16));
    gathered_bytes_sent_ += static_cast<int64_t>(u.shard_bf16.nbytes()) * (fsdp_.size() - 1);
  } else {
    u.request = fsdp_.all_gather_async(span_of<const float>(source), span_of<float>(u.full));
    gathered_bytes_sent_ += static_cast<int64_t>(u.shard.nbytes()) * (fsdp_.size() - 1);
  }
  u.state = State::InFlight;
}

void ShardedParameters::gather(int unit, Precision precision) {
  prefetch(unit, precision);
  Unit& u = units_[static_cast<size_t>(unit)];
  if (u.state == State::InFlight) {
    u.request.wait();
    store_.unit(unit).params = u.full;
    if (u.rounded) {
      // The gathered bf16(master) is the unit's compute copy as it stands (no second rounding); it is
      // also widened into the fp32 buffer for what reads params (fp32 views, the embedding rows).
      ops_.cast(u.full, u.full_bf16);
      store_.set_compute(unit, u.full_bf16);
      u.shard_bf16 = u.full_bf16 = Tensor();
    } else {
      store_.refresh_compute(ops_, unit);  // a Full gather under --bf16; nothing under fp32
    }
    if (u.staged.defined() && u.staged.numel() > 0) pool_.release(std::move(u.staged));
    u.staged = Tensor();
    u.state = State::Gathered;
  }
}

void ShardedParameters::drop(Unit& u) {
  if (u.state == State::InFlight) u.request.wait();  // MPI may still write into the buffers
  pool_.release(std::move(u.full));
  if (u.staged.defined() && u.staged.numel() > 0) pool_.release(std::move(u.staged));
  u.full = u.shard_bf16 = u.full_bf16 = u.staged = Tensor();
  u.rounded = false;
  u.state = State::Released;
}

void ShardedParameters::detach(int unit) {
  store_.unit(unit).params = no_buffer_;
  store_.drop_compute(unit);
}

void ShardedParameters::release(int unit) {
  Unit& u = units_[static_cast<size_t>(unit)];
  if (pinned_ || u.state == State::Released) return;
  detach(unit);
  drop(u);
}

void ShardedParameters::release_all() {
  for (int u = 0; u < store_.num_units(); ++u) release(u);
}

void ShardedParameters::poll() {
  for (Unit& u : units_)
    if (u.state == State::InFlight) u.request.test();
}

int64_t ShardedParameters::shard_bytes() const {
  int64_t total = 0;
  for (const Unit& u : units_) total += static_cast<int64_t>(u.shard.nbytes());
  return host_shards_ ? 0 : total;
}

int64_t ShardedParameters::host_shard_bytes() const {
  int64_t total = 0;
  for (const Unit& u : units_) total += static_cast<int64_t>(u.shard.nbytes());
  return host_shards_ ? total : 0;
}

}  // namespace trlhpc
