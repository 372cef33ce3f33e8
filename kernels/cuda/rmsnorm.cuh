#pragma once
// RMSNorm (Zhang & Sennrich 2019) for the CUDA backend (CPU: kernels/cpu/rmsnorm.cpp).
//
// Forward, per row n of x (N, C):
//   rstd[n] = 1 / sqrt(mean_c x[n,c]^2 + eps)            (fp32 statistics whatever x's dtype)
//   y[n,c]  = x[n,c] * rstd[n] * w[c]
// Backward, with g = dy * w and xhat = x * rstd:
//   dx[n,c] = rstd[n] * (g[c] - xhat[n,c] * mean_c'(g[c'] xhat[n,c']))     (overwrite)
//   dw[c]  += sum_n dy[n,c] * xhat[n,c]                                     (accumulate, deterministic)
// One warp per row; dw by the fixed-order column reduction of column_reduce.cuh.
#include <cuda_runtime.h>

#include <cstdint>

#include "device_allocator.cuh"

namespace trlhpc::cuda {

// x (N, C) TX, weight (C) fp32, y (N, C) TY, rstd (N) fp32. (TX, TY): (f32, f32), (f32, bf16), (bf16, bf16).
template <class TX, class TY>
void rmsnorm_fwd(const TX* x, const float* weight, TY* y, float* rstd, int64_t N, int64_t C, float eps,
                 cudaStream_t stream);

// dy, dx (N, C) TD; x TX; dweight (C) fp32 +=. TX, TD in {float, bf16}.
template <class TX, class TD>
void rmsnorm_bwd(const TX* x, const float* weight, const float* rstd, const TD* dy, TD* dx, float* dweight, int64_t N,
                 int64_t C, DeviceAllocator& allocator, cudaStream_t stream);

}  // namespace trlhpc::cuda
