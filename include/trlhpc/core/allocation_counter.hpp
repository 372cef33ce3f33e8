#pragma once
// Planning memory by running the real allocation routine: a routine that takes its buffers from a
// callable (shape, dtype) -> Tensor is run once with Ops::allocate and once with an AllocationCounter,
// which answers every request with an empty Tensor and adds up the bytes asked for. The plan then
// cannot drift from what is allocated (the decoder's buffers, the ring's and Ulysses' workspaces).
#include <cstdint>

#include "trlhpc/core/dtype.hpp"
#include "trlhpc/core/tensor.hpp"

namespace trlhpc {

struct AllocationCounter {
  int64_t bytes = 0;
  Tensor operator()(const Shape& shape, DType dtype) {
    bytes += shape_numel(shape) * static_cast<int64_t>(dtype_size(dtype));
    return Tensor();
  }
};

}  // namespace trlhpc
