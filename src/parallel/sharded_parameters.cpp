#include "src/parallel/sharded_parameters.hpp"

#include <span>

#include "trlhpc/core/error.hpp"
#include "trlhpc/core/tensor_span.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

ShardedParameters::ShardedParameters(ParameterStore& store, Communicator& fsdp, Ops& ops, UnitBufferPool& pool)
    : store_(store), fsdp_(fsdp), ops_(ops), pool_(pool), no_buffer_(ops.allocate({0})) {
  const int P = fsdp.size();
  units_.resize(static_cast<size_t>(store.num_units()));
  for (int u = 0; u < store.num_units(); ++u) {
    ParameterUnit& unit = store.unit(u);
    TRLHPC_ASSERT(unit.padded_numel % P == 0, "unit " + std::to_string(u) + " is not padded to the fsdp size " +
                                                  std::to_string(P));
    shard_numel_.push_back(unit.padded_numel / P);
    units_[static_cast<size_t>(u)].shard = ops.zeros({unit.padded_numel / P});
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

void ShardedParameters::prefetch(int unit) {
  Unit& u = units_[static_cast<size_t>(unit)];
  if (u.state != State::Released) return;
  u.full = pool_.acquire(store_.unit(unit).padded_numel);
  u.request = fsdp_.all_gather_async(span_of<const float>(u.shard),
                                     span_of<float>(u.full));
  u.state = State::InFlight;
}

void ShardedParameters::gather(int unit) {
  prefetch(unit);
  Unit& u = units_[static_cast<size_t>(unit)];
  if (u.state == State::InFlight) {
    u.request.wait();
    u.state = State::Gathered;
    store_.unit(unit).params = u.full;
  }
}

void ShardedParameters::release(int unit) {
  Unit& u = units_[static_cast<size_t>(unit)];
  if (pinned_ || u.state == State::Released) return;
  if (u.state == State::InFlight) u.request.wait();  // MPI may still write into the buffer
  store_.unit(unit).params = no_buffer_;
  pool_.release(std::move(u.full));
  u.full = Tensor();
  u.state = State::Released;
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
  return total;
}

}  // namespace trlhpc
