// GeGLU (tanh GELU) forward and backward (see geglu.cuh).
#include "device_math.cuh"
#include "geglu.cuh"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/kernels/elementwise_math.hpp"

namespace trlhpc::cuda {

namespace {

template <class T>
__global__ void geglu_tanh_fwd_kernel(const T* __restrict__ gate, const T* __restrict__ up, T* __restrict__ out,
                                      int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = from_float<T>(math::geglu_tanh(to_float(gate[i]), to_float(up[i])));
}

template <class T>
__global__ void geglu_tanh_bwd_kernel(const T* __restrict__ gate, const T* __restrict__ up,
                                      const T* __restrict__ dout, T* __restrict__ dgate, T* __restrict__ dup,
                                      int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    float dg, du;
    math::geglu_tanh_grad(to_float(gate[i]), to_float(up[i]), to_float(dout[i]), &dg, &du);
    dgate[i] = from_float<T>(dg);
    dup[i] = from_float<T>(du);
  }
}

}  // namespace

template <class T>
void geglu_tanh_fwd(const T* gate, const T* up, T* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  geglu_tanh_fwd_kernel<<<grid_for(n, 256), 256, 0, stream>>>(gate, up, out, n);
  TRLHPC_CHECK_CUDA_LAUNCH("geglu_tanh_fwd_kernel");
}

template <class T>
void geglu_tanh_bwd(const T* gate, const T* up, const T* dout, T* dgate, T* dup, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  geglu_tanh_bwd_kernel<<<grid_for(n, 256), 256, 0, stream>>>(gate, up, dout, dgate, dup, n);
  TRLHPC_CHECK_CUDA_LAUNCH("geglu_tanh_bwd_kernel");
}

template void geglu_tanh_fwd<float>(const float*, const float*, float*, int64_t, cudaStream_t);
template void geglu_tanh_fwd<bf16>(const bf16*, const bf16*, bf16*, int64_t, cudaStream_t);
template void geglu_tanh_bwd<float>(const float*, const float*, const float*, float*, float*, int64_t, cudaStream_t);
template void geglu_tanh_bwd<bf16>(const bf16*, const bf16*, const bf16*, bf16*, bf16*, int64_t, cudaStream_t);

}  // namespace trlhpc::cuda
