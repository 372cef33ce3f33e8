#pragma once
// ShardedParameters: the parameter half of ZeRO-3 / FSDP (ARCHITECTURE.md "Parameters and sharding").
//
// Each rank keeps only its shard [r*S, (r+1)*S) of every unit's flat parameter buffer (S = padded_numel
// / |fsdp|, the same split as ShardedGradients). A unit is brought back in full by an all-gather over
// fsdp into a pool buffer, which is swapped into store.unit(u).params for as long as the decoder uses
// it (the decoder builds its tensor views from that field on every call), and handed back afterwards.
// all_gather's layout, out[s*S + i] = shard_s[i], is exactly the unit's flat layout.
//
// States of a unit: released (store holds a zero-element tensor) -> in flight (prefetch() started the
// all-gather) -> gathered (gather() waited; store holds the full buffer) -> released. prefetch() lets
// the next unit's all-gather run while the current unit computes (FSDP's forward/backward prefetch).
// While pinned (gather_full_parameters for saving), release() keeps every unit gathered.
//
// Precision: under a BF16 compute dtype (--bf16) the training gathers (Precision::Compute) move bf16
// (half the bytes): the shard is rounded to bf16 and all-gathered; the gathered bf16 buffer becomes the
// unit's compute copy (store.unit(u).compute, what the decoder computes with) and is also widened into
// the fp32 pool buffer, which then holds bf16(master) -- the same numbers every layout computes with.
// Saving and export gather Precision::Full (fp32; the compute copy is then rounded from it), and a unit
// gathered in compute precision is gathered again for them. Releasing a unit drops both.
//
// Host shards (parameter offload: FSDP fsdp_offload_params, DeepSpeed offload_param_device cpu): the
// shard lives in pinned host memory (Ops::allocate_host) and is the optimizer's master; each gather
// first copies it into a shard-size device buffer from the pool (a queued copy the all-gather on the
// backend's stream follows), which goes back to the pool once the gather completes.
#include <cstdint>
#include <vector>

#include "src/parallel/data_parallel/unit_buffer_pool.hpp"
#include "trlhpc/model/model_weights.hpp"
#include "trlhpc/model/parameter_store.hpp"
#include "trlhpc/comm/communicator.hpp"

namespace trlhpc {

class ShardedParameters {
 public:
  // Takes the store's full parameter buffers away, if it has any (after this, the store holds only
  // gathered units).
  ShardedParameters(ParameterStore& store, Communicator& fsdp, Ops& ops, UnitBufferPool& pool,
                    bool host_shards = false);

  int64_t shard_numel(int unit) const { return shard_numel_[static_cast<size_t>(unit)]; }
  int64_t shard_begin(int unit) const { return shard_numel(unit) * fsdp_.rank(); }
  Tensor shard(int unit) const { return units_[static_cast<size_t>(unit)].shard; }  // (S)
  std::vector<Tensor> shards() const;

  // Fills this rank's shard of every unit from `source` (only the owned elements are read).
  void load(const UnitRangeSource& source);

  enum class Precision { Compute, Full };
  // Starts the all-gather unless the unit is gathered or in flight at that precision.
  void prefetch(int unit, Precision precision = Precision::Compute);
  // Returns with the full unit in store.unit(unit).params.
  void gather(int unit, Precision precision = Precision::Compute);
  void release(int unit);   // gives the full buffer back (no-op when released or pinned)
  void release_all();
  void set_pinned(bool pinned) { pinned_ = pinned; }
  void poll();              // lets MPI progress prefetches in flight

  bool is_gathered(int unit) const { return units_[static_cast<size_t>(unit)].state == State::Gathered; }
  int64_t gathered_bytes_sent() const { return gathered_bytes_sent_; }  // by this rank's all-gathers so far
  int64_t shard_bytes() const;  // device bytes of the shards (0 with host shards)
  int64_t host_shard_bytes() const;

 private:
  enum class State { Released, InFlight, Gathered };
  struct Unit {
    Tensor shard;  // (S) persistent, what the optimizer updates
    Tensor full;   // (padded_numel) pool buffer while in flight or gathered
    Tensor shard_bf16, full_bf16;  // (S), (padded_numel) BF16 staging of a compute-precision gather
    Tensor staged;                 // (S) device copy of a host shard while its gather is in flight
    bool rounded = false;          // full holds bf16(master) (a compute-precision gather under bf16)
    CommRequest request;
    State state = State::Released;
  };

  ParameterStore& store_;
  Communicator& fsdp_;
  Ops& ops_;
  UnitBufferPool& pool_;
  std::vector<int64_t> shard_numel_;  // (units)
  std::vector<Unit> units_;           // (units)
  Tensor no_buffer_;                  // (0) the store's params of a released unit
  bool pinned_ = false;
  bool bf16_gathers_ = false;  // ops.compute_dtype() is BF16
  bool host_shards_ = false;
  int64_t gathered_bytes_sent_ = 0;
  void drop(Unit& u);       // waits for a gather in flight, hands the buffers back
  void detach(int unit);    // the store forgets the unit's full params and its compute copy
};

}  // namespace trlhpc
