// RMSNorm forward and backward (see rmsnorm.cuh).
#include <cmath>

#include "column_reduce.cuh"
#include "device_math.cuh"
#include "rmsnorm.cuh"
#include "trlhpc/core/cuda_check.hpp"

namespace trlhpc::cuda {

namespace {

constexpr int kRowsPerBlock = 8;  // one warp per row

template <class TX, class TY>
__global__ void rmsnorm_fwd_kernel(const TX* __restrict__ x, const float* __restrict__ weight, TY* __restrict__ y,
                                   float* __restrict__ rstd, int64_t N, int64_t C, float eps) {
  const int lane = threadIdx.x % 32;
  const int64_t n = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / 32;
  if (n >= N) return;
  const TX* xr = x + n * C;  // (C)
  TY* yr = y + n * C;        // (C)
  float ss = 0.0f;
  for (int64_t c = lane; c < C; c += 32) {
    const float v = to_float(xr[c]);
    ss += v * v;
  }
  ss = group_sum(ss, 32);
  const float r = static_cast<float>(1.0 / sqrt(static_cast<double>(ss) / static_cast<double>(C) + eps));
  if (lane == 0) rstd[n] = r;
  for (int64_t c = lane; c < C; c += 32) yr[c] = from_float<TY>(to_float(xr[c]) * r * weight[c]);
}

template <class TX, class TD>
__global__ void rmsnorm_bwd_kernel(const TX* __restrict__ x, const float* __restrict__ weight,
                                   const float* __restrict__ rstd, const TD* __restrict__ dy, TD* __restrict__ dx,
                                   int64_t N, int64_t C) {
  const int lane = threadIdx.x % 32;
  const int64_t n = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / 32;
  if (n >= N) return;
  const TX* xr = x + n * C;    // (C)
  const TD* dyr = dy + n * C;  // (C)
  TD* dxr = dx + n * C;        // (C)
  const float r = rstd[n];
  float dot = 0.0f;  // sum_c dy w x
  for (int64_t c = lane; c < C; c += 32) dot += to_float(dyr[c]) * weight[c] * to_float(xr[c]);
  dot = group_sum(dot, 32);
  const float k = dot * r * r / static_cast<float>(C);  // mean(g xhat) * rstd
  for (int64_t c = lane; c < C; c += 32)
    dxr[c] = from_float<TD>(r * (to_float(dyr[c]) * weight[c] - to_float(xr[c]) * k));
}

template <class TX, class TD>
struct WeightGradTerm {  // dy[r, c] * x[r, c] * rstd[r]
  const TX* x;
  const TD* dy;
  const float* rstd;
  int64_t C;
  __device__ float operator()(int64_t r, int64_t c) const {
    return to_float(dy[r * C + c]) * (to_float(x[r * C + c]) * rstd[r]);
  }
};

unsigned row_blocks(int64_t N) { return static_cast<unsigned>((N + kRowsPerBlock - 1) / kRowsPerBlock); }

}  // namespace

template <class TX, class TY>
void rmsnorm_fwd(const TX* x, const float* weight, TY* y, float* rstd, int64_t N, int64_t C, float eps,
                 cudaStream_t stream) {
  if (N <= 0) return;
  rmsnorm_fwd_kernel<<<row_blocks(N), 32 * kRowsPerBlock, 0, stream>>>(x, weight, y, rstd, N, C, eps);
  TRLHPC_CHECK_CUDA_LAUNCH("rmsnorm_fwd_kernel");
}

template <class TX, class TD>
void rmsnorm_bwd(const TX* x, const float* weight, const float* rstd, const TD* dy, TD* dx, float* dweight, int64_t N,
                 int64_t C, DeviceAllocator& allocator, cudaStream_t stream) {
  if (N <= 0) return;
  rmsnorm_bwd_kernel<<<row_blocks(N), 32 * kRowsPerBlock, 0, stream>>>(x, weight, rstd, dy, dx, N, C);
  TRLHPC_CHECK_CUDA_LAUNCH("rmsnorm_bwd_kernel");
  if (dweight)  // null: no weight gradient wanted (a frozen norm)
    column_sum_accumulate(WeightGradTerm<TX, TD>{x, dy, rstd, C}, N, C, dweight, allocator, stream);
}

template void rmsnorm_fwd<float, float>(const float*, const float*, float*, float*, int64_t, int64_t, float, cudaStream_t);
template void rmsnorm_fwd<float, bf16>(const float*, const float*, bf16*, float*, int64_t, int64_t, float, cudaStream_t);
template void rmsnorm_fwd<bf16, bf16>(const bf16*, const float*, bf16*, float*, int64_t, int64_t, float, cudaStream_t);
template void rmsnorm_bwd<float, float>(const float*, const float*, const float*, const float*, float*, float*, int64_t,
                                        int64_t, DeviceAllocator&, cudaStream_t);
template void rmsnorm_bwd<float, bf16>(const float*, const float*, const float*, const bf16*, bf16*, float*, int64_t,
                                       int64_t, DeviceAllocator&, cudaStream_t);
template void rmsnorm_bwd<bf16, float>(const bf16*, const float*, const float*, const float*, float*, float*, int64_t,
                                       int64_t, DeviceAllocator&, cudaStream_t);
template void rmsnorm_bwd<bf16, bf16>(const bf16*, const float*, const float*, const bf16*, bf16*, float*, int64_t,
                                      int64_t, DeviceAllocator&, cudaStream_t);

}  // namespace trlhpc::cuda
