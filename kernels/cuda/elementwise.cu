// Elementwise ops and the deterministic sum of squares (see elementwise.cuh).
#include "device_math.cuh"
#include "elementwise.cuh"
#include "trlhpc/kernels/elementwise_math.hpp"
#include "trlhpc/core/cuda_check.hpp"

namespace trlhpc::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kSumBlocks = 1024;  // fixed: the partial sums, hence the rounding, never depend on n's split

template <class TY, class TX>
__global__ void add_kernel(TY* __restrict__ y, const TX* __restrict__ x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = from_float<TY>(to_float(y[i]) + to_float(x[i]));
}

template <class T>
__global__ void scale_kernel(T* __restrict__ y, float s, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = from_float<T>(to_float(y[i]) * s);
}

__global__ void softcap_kernel(float* __restrict__ x, float cap, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    x[i] = math::softcap(x[i], cap);
}

// Block-wide double sum in a fixed order; valid in thread 0.
__device__ double block_sum_double(double v) {
  __shared__ double warp_partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) warp_partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? warp_partial[lane] : 0.0;
    v = warp_sum(v);
  }
  return v;
}

// partial (gridDim.x): each block's sum of x^2 over i = block*threads + tid + k*grid*threads.
template <class T>
__global__ void sum_squares_partial_kernel(const T* __restrict__ x, int64_t n, double* __restrict__ partial) {
  double s = 0.0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const double v = to_float(x[i]);
    s += v * v;
  }
  s = block_sum_double(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// *out = sum of partial (count <= blockDim.x), one block.
__global__ void sum_partials_kernel(const double* __restrict__ partial, int count, double* __restrict__ out) {
  double s = threadIdx.x < count ? partial[threadIdx.x] : 0.0;
  s = block_sum_double(s);
  if (threadIdx.x == 0) *out = s;
}

}  // namespace

template <class TY, class TX>
void add_inplace(TY* y, const TX* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(y, x, n);
  TRLHPC_CHECK_CUDA_LAUNCH("add_kernel");
}

template <class T>
void scale_inplace(T* y, float s, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  scale_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(y, s, n);
  TRLHPC_CHECK_CUDA_LAUNCH("scale_kernel");
}

void logit_softcap(float* x, int64_t n, float cap, cudaStream_t stream) {
  if (n <= 0) return;
  softcap_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, cap, n);
  TRLHPC_CHECK_CUDA_LAUNCH("softcap_kernel");
}

template <class T>
void sum_of_squares(const T* x, int64_t n, double* out, DeviceAllocator& allocator, cudaStream_t stream) {
  DeviceBuffer<double> partial(allocator, kSumBlocks);  // (kSumBlocks)
  sum_squares_partial_kernel<<<kSumBlocks, kThreads, 0, stream>>>(x, n, partial.get());
  TRLHPC_CHECK_CUDA_LAUNCH("sum_squares_partial_kernel");
  sum_partials_kernel<<<1, kSumBlocks, 0, stream>>>(partial.get(), kSumBlocks, out);
  TRLHPC_CHECK_CUDA_LAUNCH("sum_partials_kernel");
}

template void add_inplace<float, float>(float*, const float*, int64_t, cudaStream_t);
template void add_inplace<bf16, bf16>(bf16*, const bf16*, int64_t, cudaStream_t);
template void add_inplace<float, bf16>(float*, const bf16*, int64_t, cudaStream_t);
template void scale_inplace<float>(float*, float, int64_t, cudaStream_t);
template void scale_inplace<bf16>(bf16*, float, int64_t, cudaStream_t);
template void sum_of_squares<float>(const float*, int64_t, double*, DeviceAllocator&, cudaStream_t);
template void sum_of_squares<bf16>(const bf16*, int64_t, double*, DeviceAllocator&, cudaStream_t);

}  // namespace trlhpc::cuda
