#include "src/parallel/data_parallel/unit_buffer_pool.hpp"

#include <algorithm>

#include "trlhpc/core/error.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

Tensor UnitBufferPool::acquire(int64_t numel) {
  const int64_t bytes = numel * static_cast<int64_t>(sizeof(float));
  Tensor buffer;
  auto it = free_.find(numel);
  if (it != free_.end()) {
    buffer = std::move(it->second);
    free_.erase(it);
    cached_bytes_ -= bytes;
  } else {
    buffer = ops_.allocate({numel});
  }
  in_use_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, in_use_bytes_ + cached_bytes_);
  return buffer;
}

Tensor UnitBufferPool::acquire_zeroed(int64_t numel) {
  Tensor buffer = acquire(numel);
  ops_.fill_zero(buffer);
  return buffer;
}

void UnitBufferPool::release(Tensor buffer) {
  TRLHPC_ASSERT(buffer.rank() == 1 && buffer.dtype() == DType::F32, "pool buffers are flat fp32 tensors");
  const int64_t numel = buffer.numel(), bytes = numel * static_cast<int64_t>(sizeof(float));
  TRLHPC_ASSERT(bytes <= in_use_bytes_, "released a buffer the pool did not hand out");
  in_use_bytes_ -= bytes;
  cached_bytes_ += bytes;
  free_.emplace(numel, std::move(buffer));
}

void UnitBufferPool::release_idle() {
  free_.clear();
  cached_bytes_ = 0;
}

}  // namespace trlhpc
