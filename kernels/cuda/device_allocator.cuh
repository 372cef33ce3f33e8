#pragma once
// DeviceAllocator: a caching allocator of device memory with size-class free lists and stream-ordered
// release, and DeviceBuffer, a move-only typed scratch buffer drawn from it.
//
// Requests are rounded up to a size class (512 B minimum; above that four classes per power of two,
// so at most 25% is wasted) and a freed block goes back to the cache instead of to cudaFree. After the
// first training step has visited every shape, the step loop therefore makes no cudaMalloc/cudaFree
// calls (tests/cuda/test_allocator.cpp checks the counters). When cudaMalloc runs out of memory the
// allocator waits for the blocks still in use on other streams, releases the cache and retries once
// before the error is raised.
//
// Stream order (docs/CUDA-REVIEW-FIXES.md defect 5). The backend issues its work on one stream, so a block freed
// by the host while a queued kernel of that stream still uses it can be handed to the next allocation:
// the next user's work is queued behind that kernel. Work on any other stream (the NCCL communicator's
// comm stream) must be declared with record_stream(ptr, stream) before the block is released: the
// release then records an event on that stream and the block is reused only once the event has
// completed (polled with cudaEventQuery at allocation time). The bookkeeping is
// trlhpc/kernels/stream_ordered_block_cache.hpp, unit-tested on the CPU; CudaEventPolicy below is its
// device half.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "trlhpc/kernels/stream_ordered_block_cache.hpp"
#include "trlhpc/ops/cuda_ops.hpp"

namespace trlhpc::cuda {

// StreamOrderedBlockCache's device half: events on `device`, created without timing and pooled, so the
// steady state creates none. Owns every event it made (move-only).
class CudaEventPolicy {
 public:
  using Stream = cudaStream_t;
  using Event = cudaEvent_t;

  explicit CudaEventPolicy(int device = 0) : device_(device) {}
  ~CudaEventPolicy();
  CudaEventPolicy(CudaEventPolicy&& o) noexcept
      : device_(o.device_), idle_(std::move(o.idle_)), owned_(std::move(o.owned_)) {}
  CudaEventPolicy& operator=(CudaEventPolicy&&) = delete;
  CudaEventPolicy(const CudaEventPolicy&) = delete;
  CudaEventPolicy& operator=(const CudaEventPolicy&) = delete;

  Event record(Stream stream);
  bool done(const Event& event);
  void synchronize(const Event& event);
  void recycle(Event event) { idle_.push_back(event); }
  size_t events_created() const { return owned_.size(); }

 private:
  int device_;
  std::vector<Event> idle_;   // completed, ready to record again
  std::vector<Event> owned_;  // every event created (destroyed with the policy)
};

class DeviceAllocator {
 public:
  explicit DeviceAllocator(int device) : device_(device), cache_(CudaEventPolicy(device)) {}
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // A block of at least `bytes` (256-byte aligned), nullptr for 0 bytes.
  void* allocate(size_t bytes);
  // Returns a block from allocate() to the cache: free at once, or pending behind the streams recorded
  // for it (record_stream).
  void release(void* block);
  // Work queued on `stream` (not the backend's own stream) uses the live block containing `ptr` (any
  // address inside it): its release waits for that work. Memory not from this allocator is ignored.
  void record_stream(const void* ptr, cudaStream_t stream);
  // Blocks released but still waiting for another stream's work (for tests and diagnostics).
  size_t pending_blocks() const;

  DeviceMemoryStats stats() const;
  void reset_peak();
  int device() const { return device_; }

  // The size class of a request: 512 for <= 512 bytes, else rounded up to a multiple of a quarter of
  // the largest power of two not above it (1000 -> 1024, 5000 -> 5120, 600 MiB -> 640 MiB).
  static size_t size_class(size_t bytes);

 private:
  // cudaFree of the given cached blocks (the mutex is held).
  void free_blocks(const std::vector<std::pair<void*, size_t>>& blocks, bool check);

  int device_;
  mutable std::mutex mutex_;
  kernels::StreamOrderedBlockCache<CudaEventPolicy> cache_;
  DeviceMemoryStats stats_;
};

// A typed device buffer of `count` elements from a DeviceAllocator; returns the block on destruction.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceAllocator& allocator, int64_t count)
      : allocator_(&allocator),
        data_(static_cast<T*>(allocator.allocate(static_cast<size_t>(count) * sizeof(T)))),
        count_(count) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : allocator_(std::exchange(o.allocator_, nullptr)),
        data_(std::exchange(o.data_, nullptr)),
        count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      allocator_ = std::exchange(o.allocator_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  int64_t size() const { return count_; }

 private:
  void reset() {
    if (allocator_ && data_) allocator_->release(data_);
    data_ = nullptr;
    count_ = 0;
  }
  DeviceAllocator* allocator_ = nullptr;
  T* data_ = nullptr;
  int64_t count_ = 0;
};

}  // namespace trlhpc::cuda
