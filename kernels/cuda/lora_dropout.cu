// LoRA's input dropout (see lora_dropout.cuh).
#include "device_math.cuh"
#include "lora_dropout.cuh"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/core/philox.hpp"

namespace trlhpc::cuda {

namespace {

template <class T>
__global__ void lora_dropout_kernel(const T* x, T* out, const int32_t* __restrict__ rows,
                                    const int32_t* __restrict__ columns, int64_t N, int64_t F, int64_t feature_offset,
                                    float p, float scale, uint64_t key) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < N * F; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = i / F, f = i % F;
    const bool keep = dropout_keeps(key, rows[n], columns[n], feature_offset + f, p);
    out[i] = from_float<T>(keep ? to_float(x[i]) * scale : 0.0f);
  }
}

}  // namespace

template <class T>
void lora_dropout(const T* x, T* out, const int32_t* rows, const int32_t* columns, int64_t N, int64_t F,
                  int64_t feature_offset, float p, uint64_t key, cudaStream_t stream) {
  if (N <= 0 || F <= 0) return;
  lora_dropout_kernel<<<grid_for(N * F, 256), 256, 0, stream>>>(x, out, rows, columns, N, F, feature_offset, p,
                                                                 1.0f / (1.0f - p), key);
  TRLHPC_CHECK_CUDA_LAUNCH("lora_dropout_kernel");
}

template void lora_dropout<float>(const float*, float*, const int32_t*, const int32_t*, int64_t, int64_t, int64_t, float,
                                  uint64_t, cudaStream_t);
template void lora_dropout<bf16>(const bf16*, bf16*, const int32_t*, const int32_t*, int64_t, int64_t, int64_t, float,
                                 uint64_t, cudaStream_t);

}  // namespace trlhpc::cuda
