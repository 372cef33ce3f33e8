#pragma once
// Device helpers shared by the CUDA kernels: element loads/stores that convert between the storage
// type (float or bf16) and fp32 arithmetic, warp reductions, and grid sizing.
//
// Every kernel computes in fp32 (statistics and accumulators included) whatever it stores: bf16 is a
// storage format only. Launch sizes are computed in int64 and clamped, so element counts above 2^31
// are handled by grid-stride loops rather than overflowing a grid dimension.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace trlhpc::cuda {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float x) { return __float2bfloat16_rn(x); }

// Sum / max over the `width` lanes of an aligned lane group (width a power of two <= 32).
__device__ __forceinline__ float group_sum(float v, int width) {
  for (int o = width / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o, width);
  return v;
}
__device__ __forceinline__ float group_max(float v, int width) {
  for (int o = width / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o, width));
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Block-wide reduction of a float by `group` (group_sum or group_max) with `identity` for the empty warps
// (blockDim.x a multiple of 32, at most 1024); every thread gets the result. `scratch` holds 32 floats of
// shared memory. The order is fixed, so results are reproducible.
template <class Group>
__device__ __forceinline__ float block_reduce(float v, float* scratch, Group group, float identity) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = group(v, 32);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return group(lane < warps ? scratch[lane] : identity, 32);
}
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  return block_reduce(v, scratch, [](float x, int w) { return group_sum(x, w); }, 0.0f);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  return block_reduce(v, scratch, [](float x, int w) { return group_max(x, w); }, -INFINITY);
}

// Blocks for a grid-stride loop over n items with `threads` threads per block, at most `max_blocks`.
inline unsigned grid_for(int64_t n, int threads, int64_t max_blocks = 65536) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, max_blocks));
}

}  // namespace trlhpc::cuda
