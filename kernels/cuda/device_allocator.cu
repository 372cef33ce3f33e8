// DeviceAllocator (see device_allocator.cuh): size-class free lists over cudaMalloc, with stream-ordered
// release through StreamOrderedBlockCache and CudaEventPolicy.
#include <cuda_runtime.h>

#include <algorithm>
#include <exception>
#include <string>

#include "cuda_raii.cuh"
#include "device_allocator.cuh"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc::cuda {

size_t DeviceAllocator::size_class(size_t bytes) {
  constexpr size_t kMin = 512;
  if (bytes <= kMin) return kMin;
  size_t power = kMin;
  while (power * 2 <= bytes) power *= 2;
  const size_t step = power / 4;
  return (bytes + step - 1) / step * step;
}

CudaEventPolicy::~CudaEventPolicy() {
  for (cudaEvent_t e : owned_) cudaEventDestroy(e);  // errors ignored: the context may be gone at exit
}

cudaEvent_t CudaEventPolicy::record(cudaStream_t stream) {
  DeviceGuard guard(device_);
  cudaEvent_t event = nullptr;
  if (!idle_.empty()) {
    event = idle_.back();
    idle_.pop_back();
  } else {
    TRLHPC_CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    owned_.push_back(event);
  }
  TRLHPC_CHECK_CUDA(cudaEventRecord(event, stream));
  return event;
}

bool CudaEventPolicy::done(const cudaEvent_t& event) {
  const cudaError_t rc = cudaEventQuery(event);
  if (rc == cudaErrorNotReady) {
    // Not an error: if the runtime recorded it, clear it so that the next launch check does not report
    // it (and only it: an earlier real error stays for that check).
    if (cudaPeekAtLastError() == cudaErrorNotReady) cudaGetLastError();
    return false;
  }
  TRLHPC_CHECK_CUDA(rc);
  return true;
}

void CudaEventPolicy::synchronize(const cudaEvent_t& event) { TRLHPC_CHECK_CUDA(cudaEventSynchronize(event)); }

DeviceAllocator::~DeviceAllocator() {
  // Blocks still live here belong to tensors that outlived every owner of the allocator: impossible,
  // since tensors hold the allocator. Pending blocks are waited for, then every cached block goes back
  // to the driver (errors ignored: at process exit the context may already be gone).
  try {
    cache_.synchronize_pending();
  } catch (...) {
  }
  for (const auto& [block, size] : cache_.drain_free()) cudaFree(block);
}

void DeviceAllocator::free_blocks(const std::vector<std::pair<void*, size_t>>& blocks, bool check) {
  DeviceGuard guard(device_);
  for (const auto& [block, size] : blocks) {
    const cudaError_t rc = cudaFree(block);
    if (check) TRLHPC_CHECK_CUDA(rc);
    stats_.reserved_bytes -= static_cast<int64_t>(size);
    ++stats_.device_frees;
  }
}

void* DeviceAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t size = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* block = cache_.take(size);  // a free block, or a pending one whose other-stream work completed
  if (!block) {
    DeviceGuard guard(device_);
    cudaError_t rc = cudaMalloc(&block, size);
    if (rc == cudaErrorMemoryAllocation) {
      // Memory is short: wait for the blocks other streams still use, give the whole cache back and
      // try once more.
      cudaGetLastError();
      cache_.synchronize_pending();
      free_blocks(cache_.drain_free(), true);
      rc = cudaMalloc(&block, size);
    }
    if (rc != cudaSuccess) {
      cudaGetLastError();
      throw_runtime_failure("CUDA", "cudaMalloc",
                            std::string(cudaGetErrorName(rc)) + ": " + cudaGetErrorString(rc) + " allocating " +
                                std::to_string(size) + " bytes on device " + std::to_string(device_) + " (" +
                                std::to_string(stats_.in_use_bytes) + " bytes in use by trlhpc); lower " +
                                "per_device_train_batch_size or max_length, or enable gradient_checkpointing",
                            __FILE__, __LINE__);
    }
    ++stats_.device_mallocs;
    stats_.reserved_bytes += static_cast<int64_t>(size);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    cache_.add_live(block, size);
  }
  stats_.in_use_bytes += static_cast<int64_t>(size);
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return block;
}

void DeviceAllocator::release(void* block) {
  if (!block) return;
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    // 0: not ours (a bug, but a destructor path must not throw).
    stats_.in_use_bytes -= static_cast<int64_t>(cache_.release(block));
  } catch (const std::exception&) {
    // Recording the other stream's event failed: the device is in a sticky error state that the next
    // checked call reports; the block is dropped from the cache (leaked) rather than reused unsafely.
  }
}

void DeviceAllocator::record_stream(const void* ptr, cudaStream_t stream) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  cache_.record_stream(ptr, stream);
}

size_t DeviceAllocator::pending_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_.pending_blocks();
}

DeviceMemoryStats DeviceAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void DeviceAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_in_use_bytes = stats_.in_use_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

}  // namespace trlhpc::cuda
