// DeviceAllocator (see device_allocator.cuh): size-class free lists over cudaMalloc.
#include <cuda_runtime.h>

#include <algorithm>
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

DeviceAllocator::~DeviceAllocator() {
  // Blocks still live here belong to tensors that outlived every owner of the allocator: impossible,
  // since tensors hold the allocator. Cached blocks go back to the driver (errors ignored: at process
  // exit the context may already be gone).
  for (auto& [size, blocks] : free_)
    for (void* block : blocks) cudaFree(block);
}

void* DeviceAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t size = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* block = nullptr;
  auto it = free_.find(size);
  if (it != free_.end() && !it->second.empty()) {
    block = it->second.back();
    it->second.pop_back();
  } else {
    DeviceGuard guard(device_);
    cudaError_t rc = cudaMalloc(&block, size);
    if (rc == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the error, give the cache back and try once more
      for (auto& [cached_size, blocks] : free_)
        for (void* b : blocks) {
          TRLHPC_CHECK_CUDA(cudaFree(b));
          stats_.reserved_bytes -= static_cast<int64_t>(cached_size);
          ++stats_.device_frees;
        }
      free_.clear();
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
  }
  live_.emplace(block, size);
  stats_.in_use_bytes += static_cast<int64_t>(size);
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return block;
}

void DeviceAllocator::release(void* block) {
  if (!block) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(block);
  if (it == live_.end()) return;  // not ours: a bug, but a destructor path must not throw
  stats_.in_use_bytes -= static_cast<int64_t>(it->second);
  free_[it->second].push_back(block);
  live_.erase(it);
}

void DeviceAllocator::release_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceGuard guard(device_);
  for (auto& [size, blocks] : free_)
    for (void* block : blocks) {
      TRLHPC_CHECK_CUDA(cudaFree(block));
      stats_.reserved_bytes -= static_cast<int64_t>(size);
      ++stats_.device_frees;
    }
  free_.clear();
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
