// PinnedStaging (include/trlhpc/comm/pinned_staging.hpp). Host code only; compiled in CUDA builds.
// Compiled here; not yet run on a GPU.
#include <cuda_runtime.h>

#include <utility>
#include <vector>

#include "cuda_raii.cuh"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/comm/pinned_staging.hpp"

namespace trlhpc {

// Free page-locked blocks, smallest fit first; owned blocks are freed when the last lease and the
// staging object are gone (the pool is shared by both).
class PinnedPool {
 public:
  ~PinnedPool() {
    for (const Block& b : free_) cudaFreeHost(b.data);
  }
  PinnedBuffer take(const std::shared_ptr<PinnedPool>& self, size_t bytes) {
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i)
      if (free_[i].capacity >= bytes && (best == free_.size() || free_[i].capacity < free_[best].capacity)) best = i;
    if (best != free_.size()) {
      const Block b = free_[best];
      free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
      return PinnedBuffer(self, b.data, b.capacity);
    }
    void* data = nullptr;
    TRLHPC_CHECK_CUDA(cudaMallocHost(&data, bytes));
    allocated_ += bytes;
    return PinnedBuffer(self, data, bytes);
  }
  void give_back(void* data, size_t capacity) noexcept {
    try {
      free_.push_back(Block{data, capacity});
    } catch (...) {
      cudaFreeHost(data);
    }
  }
  size_t allocated() const { return allocated_; }

 private:
  struct Block {
    void* data;
    size_t capacity;
  };
  std::vector<Block> free_;
  size_t allocated_ = 0;
};

PinnedBuffer::~PinnedBuffer() {
  if (pool_ && data_) pool_->give_back(data_, capacity_);
}
PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : pool_(std::move(other.pool_)), data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  std::swap(pool_, other.pool_);
  std::swap(data_, other.data_);
  std::swap(capacity_, other.capacity_);
  return *this;
}

PinnedStaging::PinnedStaging(int device, CUstream_st* compute_stream)
    : device_(device), compute_stream_(compute_stream), pool_(std::make_shared<PinnedPool>()) {}
PinnedStaging::~PinnedStaging() = default;

PinnedBuffer PinnedStaging::acquire(size_t bytes) {
  cuda::DeviceGuard guard(device_);
  return pool_->take(pool_, bytes > 0 ? bytes : 1);
}

void PinnedStaging::download(void* host, const void* device, size_t bytes) {
  if (bytes == 0) return;
  cuda::DeviceGuard guard(device_);
  TRLHPC_CHECK_CUDA(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, compute_stream_));
  TRLHPC_CHECK_CUDA(cudaStreamSynchronize(compute_stream_));  // MPI reads `host` next
}

void PinnedStaging::upload(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return;
  cuda::DeviceGuard guard(device_);
  TRLHPC_CHECK_CUDA(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, compute_stream_));
  TRLHPC_CHECK_CUDA(cudaStreamSynchronize(compute_stream_));  // `host` goes back to the pool next
}

size_t PinnedStaging::pinned_bytes() const { return pool_->allocated(); }

}  // namespace trlhpc
