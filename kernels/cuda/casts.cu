// Casts fp32 <-> bf16 (see casts.cuh). bf16 -> fp32 is exact; fp32 -> bf16 rounds to nearest even
// (math::round_to_bf16 is the same function on the host, tested in tests/unit/test_elementwise_math.cpp).
#include "casts.cuh"
#include "device_math.cuh"
#include "trlhpc/core/cuda_check.hpp"

namespace trlhpc::cuda {

namespace {

template <class TD, class TS>
__global__ void cast_kernel(TD* __restrict__ dst, const TS* __restrict__ src, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = from_float<TD>(to_float(src[i]));
}

}  // namespace

template <class TD, class TS>
void cast(TD* dst, const TS* src, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  cast_kernel<<<grid_for(n, 256), 256, 0, stream>>>(dst, src, n);
  TRLHPC_CHECK_CUDA_LAUNCH("cast_kernel");
}

template void cast<float, bf16>(float*, const bf16*, int64_t, cudaStream_t);
template void cast<bf16, float>(bf16*, const float*, int64_t, cudaStream_t);

}  // namespace trlhpc::cuda
