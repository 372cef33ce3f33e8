// NEFTune's noise on the input embeddings (see embedding_noise.cuh).
#include "device_math.cuh"
#include "embedding_noise.cuh"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/core/philox.hpp"

namespace trlhpc::cuda {

namespace {

template <class T>
__global__ void embedding_noise_kernel(T* x, const int32_t* __restrict__ rows, const int32_t* __restrict__ columns,
                                       int64_t N, int64_t C, float magnitude, uint64_t key) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < N * C; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = i / C, c = i % C;
    if (rows[n] < 0) continue;  // padding
    x[i] = from_float<T>(to_float(x[i]) + magnitude * neftune_unit_noise(key, rows[n], columns[n], c));
  }
}

}  // namespace

template <class T>
void embedding_noise(T* x, const int32_t* rows, const int32_t* columns, int64_t N, int64_t C, float magnitude,
                     uint64_t key, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  embedding_noise_kernel<<<grid_for(N * C, 256), 256, 0, stream>>>(x, rows, columns, N, C, magnitude, key);
  TRLHPC_CHECK_CUDA_LAUNCH("embedding_noise_kernel");
}

template void embedding_noise<float>(float*, const int32_t*, const int32_t*, int64_t, int64_t, float, uint64_t,
                                     cudaStream_t);
template void embedding_noise<bf16>(bf16*, const int32_t*, const int32_t*, int64_t, int64_t, float, uint64_t,
                                    cudaStream_t);

}  // namespace trlhpc::cuda
