#pragma once
// DeviceAllocator: a caching allocator of device memory with size-class free lists, and DeviceBuffer,
// a move-only typed scratch buffer drawn from it.
//
// Requests are rounded up to a size class (512 B minimum; above that four classes per power of two,
// so at most 25% is wasted) and a freed block goes onto its class's free list instead of back to
// cudaFree. After the first training step has visited every shape, the step loop therefore makes no
// cudaMalloc/cudaFree calls (tests/cuda/test_allocator.cpp checks the counters). When cudaMalloc runs
// out of memory the cache is released and the call retried once before the error is raised.
//
// Stream order: the backend issues all its work on one stream, so a block freed by the host while a
// queued kernel still uses it can be handed to the next allocation safely: the next user's work is
// queued behind that kernel. Code that touches a block from another stream must synchronise with the
// backend's stream before freeing it.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trlhpc/ops/cuda_ops.hpp"

namespace trlhpc::cuda {

class DeviceAllocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // A block of at least `bytes` (256-byte aligned), nullptr for 0 bytes.
  void* allocate(size_t bytes);
  // Returns a block from allocate() to its free list.
  void release(void* block);
  // cudaFree of every cached (free) block.
  void release_cache();

  DeviceMemoryStats stats() const;
  void reset_peak();
  int device() const { return device_; }

  // The size class of a request: 512 for <= 512 bytes, else rounded up to a multiple of a quarter of
  // the largest power of two not above it (1000 -> 1024, 5000 -> 5120, 600 MiB -> 640 MiB).
  static size_t size_class(size_t bytes);

 private:
  int device_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, size_t> live_;     // block -> its class size
  std::map<size_t, std::vector<void*>> free_;  // class size -> cached blocks
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
