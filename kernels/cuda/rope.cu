// RoPE forward and backward (see rope.cuh).
#include "device_math.cuh"
#include "rope.cuh"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/kernels/elementwise_math.hpp"

namespace trlhpc::cuda {

namespace {

// One thread per (token n, frequency i); it rotates pair i of every head of token n by sign * angle.
template <class T>
__global__ void rope_kernel(T* __restrict__ x, const int32_t* __restrict__ pos, const float* __restrict__ inv_freq,
                            int64_t N, int64_t H, int64_t HS, double sign) {
  const int64_t half = HS / 2;
  for (int64_t item = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; item < N * half;
       item += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = item / half, i = item % half;
    const double angle = static_cast<double>(math::rope_angle(pos[n], inv_freq[i]));
    double s, c;
    sincos(angle, &s, &c);
    const float cf = static_cast<float>(c), sf = static_cast<float>(sign * s);
    for (int64_t h = 0; h < H; ++h) {
      T* x1 = x + (n * H + h) * HS + i;  // element i of the first half; x1 + half is its pair
      float a = to_float(x1[0]), b = to_float(x1[half]);
      math::rope_rotate(&a, &b, cf, sf);
      x1[0] = from_float<T>(a);
      x1[half] = from_float<T>(b);
    }
  }
}

template <class T>
void rotate(T* x, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS, double sign,
            cudaStream_t stream) {
  if (N <= 0 || HS < 2) return;
  rope_kernel<<<grid_for(N * (HS / 2), 256), 256, 0, stream>>>(x, pos, inv_freq, N, H, HS, sign);
  TRLHPC_CHECK_CUDA_LAUNCH("rope_kernel");
}

}  // namespace

template <class T>
void rope_fwd(T* x, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS, cudaStream_t stream) {
  rotate(x, pos, inv_freq, N, H, HS, +1.0, stream);
}

template <class T>
void rope_bwd(T* dx, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS, cudaStream_t stream) {
  rotate(dx, pos, inv_freq, N, H, HS, -1.0, stream);
}

template void rope_fwd<float>(float*, const int32_t*, const float*, int64_t, int64_t, int64_t, cudaStream_t);
template void rope_fwd<bf16>(bf16*, const int32_t*, const float*, int64_t, int64_t, int64_t, cudaStream_t);
template void rope_bwd<float>(float*, const int32_t*, const float*, int64_t, int64_t, int64_t, cudaStream_t);
template void rope_bwd<bf16>(bf16*, const int32_t*, const float*, int64_t, int64_t, int64_t, cudaStream_t);

}  // namespace trlhpc::cuda
