#pragma once
// UnitBufferPool: reusable full-size unit buffers for the sharded strategies.
//
// ZeRO-2 needs a full gradient buffer for a unit only while that unit's backward runs and its
// reduce-scatter is in flight; ZeRO-3 needs a full parameter buffer only while a unit is gathered.
// A model has few distinct unit sizes (embedding, L equal layers, final norm + head), and at most a
// handful of units are live at once (the current one, the prefetched one, the ones still reducing), so
// a free list keyed by element count keeps the working set at a few buffers without allocating per
// unit and per micro-step (allocation on a device is a synchronising call; on the host a fresh mmap'd
// buffer costs page faults on first touch).
//
// Buffers are whole tensors handed out and taken back; the pool keeps a reference to nothing in use.
#include <cstdint>
#include <map>

#include "trlhpc/core/tensor.hpp"

namespace trlhpc {

class Ops;

class UnitBufferPool {
 public:
  explicit UnitBufferPool(Ops& ops) : ops_(ops) {}
  UnitBufferPool(const UnitBufferPool&) = delete;
  UnitBufferPool& operator=(const UnitBufferPool&) = delete;

  // A buffer of `numel` fp32 elements, contents undefined.
  Tensor acquire(int64_t numel);  // (numel)
  // The same, zero-filled (gradient buffers accumulate with +=).
  Tensor acquire_zeroed(int64_t numel);  // (numel)
  // Takes back a buffer that acquire() returned (the whole tensor, not a view of it).
  void release(Tensor buffer);
  // Frees every idle buffer (buffers in use stay valid).
  void release_idle();

  int64_t bytes_in_use() const { return in_use_bytes_; }
  int64_t bytes_cached() const { return cached_bytes_; }
  // Largest bytes_in_use() + bytes_cached() seen: the transient memory the strategy needed.
  int64_t peak_bytes() const { return peak_bytes_; }

 private:
  Ops& ops_;
  std::multimap<int64_t, Tensor> free_;  // numel -> idle buffer
  int64_t in_use_bytes_ = 0, cached_bytes_ = 0, peak_bytes_ = 0;
};

}  // namespace trlhpc
